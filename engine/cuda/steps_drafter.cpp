// Launchers of the drafter's families (steps_impl.h): input (tap rows from the run's feature source),
// dyn_conv (DFlash 2, dflash.md §3.2) and qgemm (quantized weights, docs/quantization.md). Shapes and
// element types are checked here, at lowering.
#include <algorithm>

#include "engine/cuda/qgemm_layout.h"
#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

constexpr unsigned kThreads = 256;

Error mismatch(const char* op, const std::string& what) {
  return Error::make(ErrorKind::kUnsupported, "{}: {}", op, what);
}

// One thread per element of the bucket's rows, the grid capped (the kernels loop over the rest).
unsigned element_blocks(const StepContext& c, uint32_t rows, uint32_t width) {
  const uint64_t blocks = (uint64_t{rows} * width + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, uint64_t{std::max(1u, c.sms)} * 32));
}

}  // namespace

// INVARIANT (both packs): the pointers are arena values, weights or index tables that lowering sized for
// the bucket's rows at the types checked here; the kernels touch rows below the real token count only.
Result<KernelStep> input_step(const StepContext& c, const Loc& out) {
  if (out.rows != ir::Rows::kTokens || out.width == 0) {
    return mismatch("input", "output " + out.describe() + " must be token rows");
  }
  KernelStep s;
  switch (out.type) {
    case Dt::kF32: s.id = KernelId::input_f32; break;
    case Dt::kF16: s.id = KernelId::input_f16; break;
    case Dt::kBF16: s.id = KernelId::input_bf16; break;
    case Dt::kU32: return mismatch("input", "output " + out.describe() + " holds ids");
  }
  s.grid = dim3(element_blocks(c, c.bucket.tokens, out.width));
  s.block = dim3(kThreads);
  s.args = kernels::InputArgs{out.ptr, c.ix.features, c.ix.feat_rows, c.ix.n, out.width};
  return s;
}

Result<KernelStep> dyn_conv_step(const StepContext& c, const Loc& x, const Loc& d, const float* base, const Loc& out,
                                 uint32_t stage, uint32_t taps, uint32_t group, bool accumulate) {
  const std::string what = fmt::format("{} with deltas {} into {}", x.describe(), d.describe(), out.describe());
  const bool rows = x.rows == ir::Rows::kTokens && d.rows == ir::Rows::kTokens && out.rows == ir::Rows::kTokens;
  if (!rows || x.width != out.width || group == 0 || x.width % group != 0 || taps == 0 || stage > 1 ||
      uint64_t{d.width} != uint64_t{2} * taps * (x.width / group) || x.ptr == out.ptr || base == nullptr) {
    return mismatch("dyn_conv", fmt::format("{}: stage {} of {} taps, groups of {} (distinct token rows, deltas "
                                            "2·taps·width/group wide)", what, stage, taps, group));
  }
  KernelStep s;
  if (x.type != d.type) return mismatch("dyn_conv", what + ": x and the deltas must have one type");
  const auto pick = [&](KernelId same, KernelId to_f32) -> Result<KernelId> {
    if (out.type == x.type) return same;
    if (out.type == Dt::kF32) return to_f32;
    return mismatch("dyn_conv", what + ": the output must be FP32 or the input's type");
  };
  switch (x.type) {
    case Dt::kF32:
      if (out.type != Dt::kF32) return mismatch("dyn_conv", what + ": FP32 input into a 16-bit output");
      s.id = KernelId::dyn_conv_f32_f32;
      break;
    case Dt::kF16: {
      TANDEM_ASSIGN(s.id, pick(KernelId::dyn_conv_f16_f16, KernelId::dyn_conv_f16_f32));
      break;
    }
    case Dt::kBF16: {
      TANDEM_ASSIGN(s.id, pick(KernelId::dyn_conv_bf16_bf16, KernelId::dyn_conv_bf16_f32));
      break;
    }
    case Dt::kU32: return mismatch("dyn_conv", what + ": ids");
  }
  // A thread per element (kernels/dyn_conv.cu): columns over grid x, rows over grid y (the kernel strides past its
  // 65,535 limit).
  s.grid = dim3((x.width + kThreads - 1) / kThreads, std::clamp<unsigned>(c.bucket.tokens, 1, 65535));
  s.block = dim3(kThreads);
  s.args = kernels::DynConvArgs{out.ptr, x.ptr,    d.ptr, base,  c.ix.seq, c.ix.cu, c.ix.n, x.width,
                                taps,    group,    stage, accumulate ? 1u : 0u};
  return s;
}

Result<KernelStep> qgemm_step(const StepContext& c, const Loc& x, const QuantWeight& w, const float* bias,
                              unsigned act, bool accumulate, const Loc& out, QGemmKernel kernel) {
  const bool tensor_cores = kernel != QGemmKernel::kCudaCores, whole_k = kernel == QGemmKernel::kTensorCoresWholeK;
  const std::string what = fmt::format("{} into {} (int{} codes, groups of {})", x.describe(), out.describe(), w.bits,
                                       w.group);
  if (x.rows != out.rows || x.ptr == out.ptr || w.codes == nullptr || w.scales == nullptr) {
    return mismatch("qgemm", what + ": x and out must be distinct values of one row kind, with codes and scales");
  }
  if ((w.bits != 8 && w.bits != 4) || w.group == 0 || w.group % 32 != 0 || x.width % w.group != 0) {
    return mismatch("qgemm", what + ": bits 8 or 4, a group that is a multiple of 32 and divides k");
  }
  if (accumulate && act != kernels::kActNone) return mismatch("qgemm", what + ": accumulate takes no activation");
  if (w.packed && !tensor_cores) {
    return mismatch("qgemm", what + ": codes in the tensor-core layout need the tensor-core kernel");
  }
  // Each (x, out) pair's entry in every family: CUDA cores, tensor cores sliced and whole-K.
  struct Ids {
    KernelId cuda_cores, sliced, whole_k;
  };
#define TANDEM_QGEMM_IDS(in_out) \
  Ids { KernelId::qgemm_##in_out, KernelId::qgemm_tc_##in_out, KernelId::qgemm_tc_whole_k_##in_out }
  const auto variant = [&]() -> Result<Ids> {
    switch (x.type) {
      case Dt::kF32:
        if (out.type == Dt::kF32) return TANDEM_QGEMM_IDS(f32_f32);
        if (out.type == Dt::kF16) return TANDEM_QGEMM_IDS(f32_f16);
        if (out.type == Dt::kBF16) return TANDEM_QGEMM_IDS(f32_bf16);
        break;
      case Dt::kF16:
        if (out.type == Dt::kF16) return TANDEM_QGEMM_IDS(f16_f16);
        if (out.type == Dt::kF32) return TANDEM_QGEMM_IDS(f16_f32);
        break;
      case Dt::kBF16:
        if (out.type == Dt::kBF16) return TANDEM_QGEMM_IDS(bf16_bf16);
        if (out.type == Dt::kF32) return TANDEM_QGEMM_IDS(bf16_f32);
        break;
      case Dt::kU32: break;
    }
    return mismatch("qgemm", what + ": the output must be FP32, the input's type, or 16-bit from FP32");
  };
#undef TANDEM_QGEMM_IDS
  TANDEM_ASSIGN(const Ids ids, variant());
  // INVARIANT: x, out, bias, codes and scales are arena values and uploaded weights (64-byte aligned) sized
  // at lowering for the bucket's rows at the shapes and types checked here; the kernels touch real rows only.
  const kernels::QGemmArgs q{out.ptr,  x.ptr,      w.codes,   w.scales,           bias,
                             c.ix.n,   x.kind(),   out.width, x.width,            w.bits,
                             w.group,  w.scale_bf16 ? 1u : 0u, act, accumulate ? 1u : 0u};
  const uint64_t rows = std::max<uint64_t>(1, c.bucket.rows(x.rows));
  KernelStep s;
  if (tensor_cores) {
    // The K split from (k, cols) alone, as the decode GEMM's: a row's bits do not depend on the bucket.
    GemmDecodeSplit split = gemm_decode_split(x.width, out.width);
    if (w.packed) {  // slices of whole 16-byte words (the last ones may come out empty): still (k, cols) alone
      const uint32_t per = qgemm_tc_pack_chunks(w.bits);
      if (!qgemm_tc_packable(x.width, w.bits)) {
        return mismatch("qgemm", fmt::format("{}: codes in the tensor-core layout need k a multiple of {}", what,
                                             32 * per));
      }
      split.slice_chunks = (split.slice_chunks + per - 1) / per * per;
    }
    // Tiles a block covers: its warps' share of the slices, or one each (whole-K).
    const uint64_t tiles = (uint64_t{out.width} + 15) / 16;
    const uint64_t per_block = whole_k ? kernels::kQGemmTcWarps : kernels::kQGemmTcWarps / split.splits;
    const uint64_t col_blocks = (tiles + per_block - 1) / per_block;
    const uint64_t row_blocks = (rows + kernels::kQGemmTcRows - 1) / kernels::kQGemmTcRows;
    if (col_blocks > 65535 || row_blocks > 2147483647) {
      return mismatch("qgemm", fmt::format("{}: {} column blocks and {} row blocks (limits 65535 and 2^31 - 1)",
                                           what, col_blocks, row_blocks));
    }
    s.id = whole_k ? ids.whole_k : ids.sliced;
    s.grid = dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(col_blocks));
    s.block = dim3(kernels::kQGemmTcWarps * 32);
    s.args = kernels::QGemmTcArgs{q, split.splits, split.slice_chunks, w.packed ? 1u : 0u};
    return s;
  }
  const uint64_t col_blocks = (uint64_t{out.width} + kernels::kQGemmWarps - 1) / kernels::kQGemmWarps;
  const uint64_t row_tiles = (rows + kernels::kQGemmRows - 1) / kernels::kQGemmRows;
  s.id = ids.cuda_cores;
  s.grid = dim3(static_cast<unsigned>(std::clamp<uint64_t>(col_blocks, 1, 65535)),
                static_cast<unsigned>(std::clamp<uint64_t>(row_tiles, 1, 65535)));
  s.block = dim3(kernels::kQGemmWarps * 32);
  s.args = q;
  return s;
}

}  // namespace tandem::cuda
