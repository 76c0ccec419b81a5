// Launchers of the row-wise kernel families: embed, layer_norm, bias_act, cast, geglu, add_type,
// pick_rows, act_features. Grids cover the bucket's rows; blocks past the real rows return at once.
#include <algorithm>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

constexpr unsigned kRowThreads = 256;
constexpr unsigned kLayerNormRows = 4;   // rows per 128-thread block, one warp each
constexpr uint32_t kLayerNormMaxWidth = 1024;

// The scorer families' entries by (in, out) type: FP32 and FP16 only (supports() keeps BF16 away).
Result<KernelId> pick(const char* op, Dt in, Dt out, KernelId ff, KernelId fh, KernelId hf, KernelId hh) {
  const auto f32_or_f16 = [](Dt t) { return t == Dt::kF32 || t == Dt::kF16; };
  if (!f32_or_f16(in) || !f32_or_f16(out)) {
    return Error::make(ErrorKind::kUnsupported, "{}: no kernel from {} to {}", op, dt_name(in), dt_name(out));
  }
  if (in == Dt::kF32) return out == Dt::kF32 ? ff : fh;
  return out == Dt::kF32 ? hf : hh;
}

unsigned blocks_for(uint32_t rows, uint32_t per_block) { return std::max(1u, (rows + per_block - 1) / per_block); }

// Blocks of kRowThreads for kernels whose threads take 8-wide chunks of rows (single elements when the
// width is not a multiple of 8), over the bucket's rows.
unsigned chunk_blocks(uint32_t rows, uint32_t width) {
  const uint64_t chunks = uint64_t{rows} * (width % 8 == 0 ? width / 8 : width);
  return static_cast<unsigned>(std::max<uint64_t>(1, (chunks + kRowThreads - 1) / kRowThreads));
}

Error mismatch(const char* op, const std::string& what) {
  return Error::make(ErrorKind::kUnsupported, "{}: {}", op, what);
}

}  // namespace

std::string Loc::describe() const {
  return fmt::format("'{}' ({} × {} {})", name, ir::to_string(rows), width, dt_name(type));
}

const std::string& step_label(const Step& step) {
  return std::visit([](const auto& s) -> const std::string& { return s.label; }, step);
}

// INVARIANT (every argument pack in this file): the pointers are arena values, weights or index tables
// that lowering sized for the bucket's rows at the element types checked here, and each kernel touches
// rows below the index header's real counts only.
Result<KernelStep> embed_step(const StepContext& c, const Loc& out, const float* table, uint64_t vocab) {
  if (out.rows != ir::Rows::kTokens || out.type != Dt::kF32 || vocab == 0) {
    return mismatch("embed", "output " + out.describe() + " must be FP32 token rows of a non-empty table");
  }
  KernelStep s;
  s.id = KernelId::embed_f32_f32;
  s.grid = dim3(blocks_for(c.bucket.tokens, 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::EmbedArgs{static_cast<float*>(out.ptr), table, c.ix.ids, c.ix.n, out.width};
  return s;
}

Result<KernelStep> layer_norm_step(const StepContext& c, const Loc& x, const Loc& out, const float* w,
                                   const float* b, float eps) {
  if (x.width != out.width || x.rows != out.rows) {
    return mismatch("layer_norm", x.describe() + " and " + out.describe() + " differ");
  }
  if (x.width == 0 || x.width > kLayerNormMaxWidth) {
    return mismatch("layer_norm", fmt::format("{} is wider than the {} columns a warp holds in registers",
                                              x.describe(), kLayerNormMaxWidth));
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, pick("layer_norm", x.type, out.type, KernelId::layer_norm_f32_f32, KernelId::layer_norm_f32_f16,
                           KernelId::layer_norm_f16_f32, KernelId::layer_norm_f16_f16));
  s.grid = dim3(blocks_for(c.bucket.rows(x.rows), kLayerNormRows));
  s.block = dim3(32 * kLayerNormRows);
  s.args = kernels::LayerNormArgs{out.ptr, x.ptr, w, b, c.ix.n, x.kind(), x.width, eps};
  return s;
}

Result<KernelStep> bias_act_step(const StepContext& c, const Loc& x, const float* bias, unsigned act) {
  KernelStep s;
  switch (x.type) {
    case Dt::kF32: s.id = KernelId::bias_act_f32_f32; break;
    case Dt::kF16: s.id = KernelId::bias_act_f16_f16; break;
    case Dt::kBF16: s.id = KernelId::bias_act_bf16_bf16; break;
    case Dt::kU32: return mismatch("bias_act", x.describe() + " holds ids");
  }
  s.grid = dim3(chunk_blocks(c.bucket.rows(x.rows), x.width));
  s.block = dim3(kRowThreads);
  s.args = kernels::BiasActArgs{x.ptr, bias, c.ix.n, x.kind(), x.width, act};
  return s;
}

Result<KernelStep> cast_step(const StepContext& c, const Loc& x, void* out, Dt to) {
  if (x.type != Dt::kF32 || (to != Dt::kF16 && to != Dt::kBF16)) {
    return mismatch("cast", x.describe() + " to " + dt_name(to) + ": FP32 to FP16 or BF16 only");
  }
  KernelStep s;
  s.id = to == Dt::kF16 ? KernelId::cast_f32_f16 : KernelId::cast_f32_bf16;
  s.grid = dim3(blocks_for(c.bucket.rows(x.rows), 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::CastArgs{out, x.ptr, c.ix.n, x.kind(), x.width};
  return s;
}

Result<KernelStep> geglu_step(const StepContext& c, const Loc& x, const Loc& out) {
  if (x.width != 2 * out.width || x.rows != out.rows) {
    return mismatch("geglu", "input " + x.describe() + " is not twice the output " + out.describe());
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, pick("geglu", x.type, out.type, KernelId::geglu_f32_f32, KernelId::geglu_f32_f16,
                           KernelId::geglu_f16_f32, KernelId::geglu_f16_f16));
  s.grid = dim3(chunk_blocks(c.bucket.rows(x.rows), out.width));
  s.block = dim3(kRowThreads);
  s.args = kernels::GegluArgs{out.ptr, x.ptr, c.ix.n, x.kind(), out.width};
  return s;
}

Result<KernelStep> add_type_step(const StepContext& c, const Loc& h, const float* table) {
  if (h.rows != ir::Rows::kTokens || h.type != Dt::kF32) {
    return mismatch("add_type", "target " + h.describe() + " must be FP32 token rows");
  }
  KernelStep s;
  s.id = KernelId::add_type_f32_f32;
  s.grid = dim3(blocks_for(c.bucket.tokens, 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::AddTypeArgs{static_cast<float*>(h.ptr), table, c.ix.seq, c.ix.qtype, c.ix.n, h.width};
  return s;
}

Result<KernelStep> pick_rows_step(const StepContext& c, const Loc& h, const Loc& out) {
  if (h.rows != ir::Rows::kTokens || out.rows != ir::Rows::kPicks || h.width != out.width) {
    return mismatch("pick_rows", h.describe() + " to " + out.describe());
  }
  KernelStep s;
  TANDEM_ASSIGN(s.id, pick("pick_rows", h.type, out.type, KernelId::pick_rows_f32_f32, KernelId::pick_rows_f32_f16,
                           KernelId::pick_rows_f16_f32, KernelId::pick_rows_f16_f16));
  s.grid = dim3(blocks_for(c.bucket.picks, 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::PickRowsArgs{out.ptr, h.ptr, c.ix.prow, c.ix.n, h.width};
  return s;
}

Result<KernelStep> act_features_step(const StepContext& c, const Loc& h, const Loc& logits, const Loc& out) {
  const bool ok = h.rows == ir::Rows::kTokens && logits.rows == ir::Rows::kPicks && logits.width == 1 &&
                  out.rows == ir::Rows::kSeqs && out.width == h.width + 4 && h.type == Dt::kF32 &&
                  logits.type == Dt::kF32 && out.type == Dt::kF32;
  if (!ok) {
    return mismatch("act_features", h.describe() + ", " + logits.describe() + " to " + out.describe());
  }
  KernelStep s;
  s.id = KernelId::act_features_f32_f32;
  s.grid = dim3(blocks_for(c.bucket.seqs, 1));
  s.block = dim3(kRowThreads);
  s.args = kernels::ActFeaturesArgs{static_cast<float*>(out.ptr), static_cast<const float*>(h.ptr),
                                    static_cast<const float*>(logits.ptr), c.ix.cu, c.ix.pcu, c.ix.n, h.width};
  return s;
}

}  // namespace tandem::cuda
