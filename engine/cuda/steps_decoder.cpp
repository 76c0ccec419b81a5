// Launchers of the decoder's row-wise kernel families (steps_impl.h): rms_norm, head_norm_rope, qkv_prep,
// swiglu, tap, cache_append. Shapes and element types are checked here, at lowering; grids cover bucket rows.
#include <algorithm>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

constexpr unsigned kRowThreads = 256;
constexpr uint32_t kHeadDimMax = 256;  // head_norm_rope keeps 8 columns per lane

Error mismatch(const char* op, const std::string& what) {
  return Error::make(ErrorKind::kUnsupported, "{}: {}", op, what);
}

unsigned blocks_for(uint64_t items, uint64_t per_block) {
  return static_cast<unsigned>(std::max<uint64_t>(1, (items + per_block - 1) / per_block));
}

// 8-wide chunks (single elements when the width is not a multiple of 8) of the bucket's rows.
unsigned chunk_blocks(uint32_t rows, uint32_t width) {
  return blocks_for(uint64_t{rows} * (width % 8 == 0 ? width / 8 : width), kRowThreads);
}

// An entry by element type, for families with one entry per type (in place, or same in and out).
Result<KernelId> by_type(const char* op, Dt t, KernelId f32, KernelId f16, KernelId bf16) {
  switch (t) {
    case Dt::kF32: return f32;
    case Dt::kF16: return f16;
    case Dt::kBF16: return bf16;
    case Dt::kU32: break;
  }
  return mismatch(op, "token ids have no kernel");
}

}  // namespace

// INVARIANT (every argument pack in this file): the pointers are arena values, weights or index tables
// that lowering sized for the bucket's rows at the element types checked here, and each kernel touches
// rows below the index header's real counts only.
Result<KernelStep> rms_norm_step(const StepContext& c, const Loc& x, const Loc& out, const float* w, float eps) {
  if (x.width != out.width || x.rows != out.rows || x.width == 0) {
    return mismatch("rms_norm", x.describe() + " and " + out.describe() + " differ");
  }
  KernelStep s;
  const auto id = [&]() -> Result<KernelId> {
    if (x.type == Dt::kF32 && out.type == Dt::kF32) return KernelId::rms_norm_f32_f32;
    if (x.type == Dt::kF32 && out.type == Dt::kF16) return KernelId::rms_norm_f32_f16;
    if (x.type == Dt::kF32 && out.type == Dt::kBF16) return KernelId::rms_norm_f32_bf16;
    if (x.type == Dt::kF16 && out.type == Dt::kF32) return KernelId::rms_norm_f16_f32;
    if (x.type == Dt::kF16 && out.type == Dt::kF16) return KernelId::rms_norm_f16_f16;
    if (x.type == Dt::kBF16 && out.type == Dt::kF32) return KernelId::rms_norm_bf16_f32;
    if (x.type == Dt::kBF16 && out.type == Dt::kBF16) return KernelId::rms_norm_bf16_bf16;
    return mismatch("rms_norm", "no kernel from " + x.describe() + " to " + out.describe());
  }();
  TANDEM_ASSIGN(s.id, id);
  s.grid = dim3(blocks_for(c.bucket.rows(x.rows), 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::RmsNormArgs{out.ptr, x.ptr, w, c.ix.n, x.kind(), x.width, eps};
  return s;
}

Result<KernelStep> head_norm_rope_step(const StepContext& c, const Loc& x, uint32_t heads, uint32_t head_dim,
                                       const float* w, float eps, const float* inv_freq, uint32_t col) {
  if (x.rows != ir::Rows::kTokens || heads == 0 || head_dim == 0 || head_dim % 2 != 0 || head_dim > kHeadDimMax ||
      uint64_t{col} + uint64_t{heads} * head_dim > x.width) {
    return mismatch("head_norm_rope", fmt::format("{} heads of {} from column {} on {} (token rows, even head_dim <= {})",
                                                  heads, head_dim, col, x.describe(), kHeadDimMax));
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, by_type("head_norm_rope", x.type, KernelId::head_norm_rope_f32, KernelId::head_norm_rope_f16,
                              KernelId::head_norm_rope_bf16));
  s.grid = dim3(blocks_for(uint64_t{c.bucket.tokens} * heads, 4));
  s.block = dim3(128);
  // INVARIANT: col + heads · head_dim <= x.width (checked), so every row's heads lie inside it.
  void* first = static_cast<char*>(x.ptr) + size_t{col} * dt_size(x.type);
  s.args = kernels::HeadNormRopeArgs{first, w, inv_freq, c.ix.pos, c.ix.n, x.width, heads, head_dim, eps};
  return s;
}

Result<KernelStep> qkv_prep_step(const StepContext& c, const Loc& qkv, const QkvPrepShape& shape, const float* w_q,
                                 const float* w_k, const float* inv_freq, uint32_t cache, Dt cache_type) {
  const uint64_t per_row = uint64_t{shape.heads} + 2ull * shape.kv_heads;
  if (qkv.rows != ir::Rows::kTokens || shape.heads == 0 || shape.kv_heads == 0 || shape.head_dim == 0 ||
      shape.head_dim % 2 != 0 || shape.head_dim > kHeadDimMax || per_row * shape.head_dim > qkv.width ||
      qkv.type != cache_type || w_q == nullptr || w_k == nullptr || inv_freq == nullptr) {
    return mismatch("qkv_prep", fmt::format("{} + 2 x {} heads of {} on {} into a {} cache (token rows, even "
                                            "head_dim <= {}, both norms and the rotation)",
                                            shape.heads, shape.kv_heads, shape.head_dim, qkv.describe(),
                                            dt_name(cache_type), kHeadDimMax));
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, by_type("qkv_prep", qkv.type, KernelId::qkv_prep_f32, KernelId::qkv_prep_f16,
                              KernelId::qkv_prep_bf16));
  s.grid = dim3(blocks_for(uint64_t{c.bucket.tokens} * per_row, 4));
  s.block = dim3(128);
  s.args = kernels::QkvPrepArgs{qkv.ptr,     w_q,         w_k,       inv_freq,       c.ix.caches,
                                c.ix.pos,    c.ix.seq,    c.ix.slot, c.ix.n,         cache,
                                qkv.width,   shape.heads, shape.kv_heads, shape.head_dim, shape.eps};
  return s;
}

Result<KernelStep> swiglu_step(const StepContext& c, const Loc& x, const Loc& out) {
  if (x.width != 2 * out.width || x.rows != out.rows) {
    return mismatch("swiglu", "input " + x.describe() + " is not twice the output " + out.describe());
  }
  KernelStep s;
  const auto id = [&]() -> Result<KernelId> {
    if (x.type == Dt::kF32 && out.type == Dt::kF32) return KernelId::swiglu_f32_f32;
    if (x.type == Dt::kF32 && out.type == Dt::kF16) return KernelId::swiglu_f32_f16;
    if (x.type == Dt::kF32 && out.type == Dt::kBF16) return KernelId::swiglu_f32_bf16;
    if (x.type == Dt::kF16 && out.type == Dt::kF16) return KernelId::swiglu_f16_f16;
    if (x.type == Dt::kBF16 && out.type == Dt::kBF16) return KernelId::swiglu_bf16_bf16;
    return mismatch("swiglu", "no kernel from " + x.describe() + " to " + out.describe());
  }();
  TANDEM_ASSIGN(s.id, id);
  s.grid = dim3(chunk_blocks(c.bucket.rows(x.rows), out.width));
  s.block = dim3(kRowThreads);
  s.args = kernels::SwigluArgs{out.ptr, x.ptr, c.ix.n, x.kind(), out.width};
  return s;
}

Result<KernelStep> tap_step(const StepContext& c, const Loc& x, const Loc& out, uint32_t col) {
  if (x.rows != out.rows || uint64_t{col} + x.width > out.width || x.type != Dt::kF32) {
    return mismatch("tap", fmt::format("{} into {} at column {} (FP32 rows that fit)", x.describe(), out.describe(),
                                       col));
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, by_type("tap", out.type, KernelId::tap_f32_f32, KernelId::tap_f32_f16, KernelId::tap_f32_bf16));
  s.grid = dim3(chunk_blocks(c.bucket.rows(x.rows), x.width));
  s.block = dim3(kRowThreads);
  s.args = kernels::TapArgs{out.ptr, x.ptr, c.ix.n, x.kind(), x.width, out.width, col};
  return s;
}

Result<KernelStep> cache_append_step(const StepContext& c, const Loc& k, const Loc& v, uint32_t cache,
                                     Dt cache_type, uint32_t width, uint32_t k_col, uint32_t v_col) {
  if (width == 0) width = k.width;
  if (k.rows != ir::Rows::kTokens || v.rows != ir::Rows::kTokens || uint64_t{k_col} + width > k.width ||
      uint64_t{v_col} + width > v.width || k.type != cache_type || v.type != cache_type) {
    return mismatch("cache_append", fmt::format("{} from column {} and {} from column {} into a {} cache {} wide",
                                                k.describe(), k_col, v.describe(), v_col, dt_name(cache_type), width));
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, by_type("cache_append", cache_type, KernelId::cache_append_f32, KernelId::cache_append_f16,
                              KernelId::cache_append_bf16));
  s.grid = dim3(blocks_for(c.bucket.tokens, 1));
  s.block = dim3(128);
  // INVARIANT: the columns checked above lie inside each row of k and of v.
  const void* ks = static_cast<const char*>(k.ptr) + size_t{k_col} * dt_size(k.type);
  const void* vs = static_cast<const char*>(v.ptr) + size_t{v_col} * dt_size(v.type);
  s.args = kernels::CacheAppendArgs{ks, vs, c.ix.caches, c.ix.pos, c.ix.seq, c.ix.slot, c.ix.n, cache, width,
                                    k.width, v.width};
  return s;
}

}  // namespace tandem::cuda
