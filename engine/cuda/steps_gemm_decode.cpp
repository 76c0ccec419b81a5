// The decode GEMM's launcher (steps_impl.h, kernels/gemm_decode.cu): entry by operand and output type,
// the K split from (k, n) alone, shapes and alignment checked here at lowering.
#include <algorithm>
#include <cstdint>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

// Warps (16-column tiles × K slices) the split aims for: enough 1-row loads in flight to fill an H200's
// 132 SMs. A constant, not the device's SM count, so a row's bits are the same on every GPU.
constexpr uint64_t kSplitTargetWarps = 2048;
constexpr uint32_t kSplitMax = kernels::kGemmDecodeWarps;
constexpr uint32_t kMinSliceChunks = 4;  // 128 k per slice at least

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

GemmDecodeSplit gemm_decode_split(uint32_t k, uint32_t n) {
  const uint64_t tiles = (uint64_t{n} + 15) / 16;
  const uint32_t chunks = (k + 31) / 32;
  uint32_t splits = 1;
  while (splits < kSplitMax && tiles * splits < kSplitTargetWarps && chunks >= 2 * splits * kMinSliceChunks) {
    splits *= 2;
  }
  return GemmDecodeSplit{splits, (chunks + splits - 1) / splits};
}

Status mma_gemm_supported(std::string_view kernel, Dt ab, Dt out, bool accumulate, const void* a, const void* y,
                          const void* w) {
  if (ab != Dt::kF16 && ab != Dt::kBF16) {
    return Error::make(ErrorKind::kUnsupported, "{}: {} operands (f16 or bf16 only)", kernel, dt_name(ab));
  }
  if (out != Dt::kF32 && out != ab) {
    return Error::make(ErrorKind::kUnsupported, "{}: {} operands into {} (f32 or the operands' type)", kernel,
                       dt_name(ab), dt_name(out));
  }
  if (accumulate && out != Dt::kF32) {
    return Error::make(ErrorKind::kUnsupported, "{}: accumulating into {} (f32 only)", kernel, dt_name(out));
  }
  if (!aligned16(a) || !aligned16(y) || !aligned16(w)) {
    return Error::make(ErrorKind::kUnsupported, "{}: operands not 16-byte aligned", kernel);
  }
  return {};
}

Status gemm_decode_supported(uint32_t k, Dt ab, Dt out, bool accumulate) {
  TANDEM_TRY(mma_gemm_supported("gemm_decode", ab, out, accumulate));
  if (k == 0 || k % 8 != 0) {
    return Error::make(ErrorKind::kUnsupported, "gemm_decode: k {} is not a positive multiple of 8", k);
  }
  return {};
}

Result<KernelStep> gemm_decode_step(const StepContext& c, const Loc& a, const Loc& out, const void* w,
                                    const float* bias, bool accumulate) {
  const std::string what = a.describe() + " to " + out.describe();
  if (a.rows != out.rows || out.width == 0) {
    return Error::make(ErrorKind::kUnsupported, "gemm_decode: {}: rows differ or no columns", what);
  }
  if (Status st = gemm_decode_supported(a.width, a.type, out.type, accumulate); !st.ok()) {
    return std::move(st).error().context(what);
  }
  if (Status st = mma_gemm_supported("gemm_decode", a.type, out.type, accumulate, a.ptr, out.ptr, w); !st.ok()) {
    return std::move(st).error().context(what);
  }
  KernelStep s;
  if (a.type == Dt::kF16) {
    s.id = out.type == Dt::kF32 ? KernelId::gemm_decode_f16_f32 : KernelId::gemm_decode_f16_f16;
  } else {
    s.id = out.type == Dt::kF32 ? KernelId::gemm_decode_bf16_f32 : KernelId::gemm_decode_bf16_bf16;
  }
  const GemmDecodeSplit split = gemm_decode_split(a.width, out.width);
  const uint32_t tiles = (out.width + 15) / 16, per_block = kernels::kGemmDecodeWarps / split.splits;
  const uint32_t rows = std::max<uint32_t>(1, c.bucket.rows(a.rows));
  s.grid = dim3((rows + kernels::kGemmDecodeRows - 1) / kernels::kGemmDecodeRows, (tiles + per_block - 1) / per_block);
  if (s.grid.y > 65535) {
    return Error::make(ErrorKind::kUnsupported, "gemm_decode: {}: {} column blocks (limit 65535)", what, s.grid.y);
  }
  s.block = dim3(kernels::kGemmDecodeWarps * 32);
  // INVARIANT: a, out and w are arena values and a weight sized at lowering for the bucket's rows (a
  // [rows, k], out [rows, n], w [n, k]) at the types checked above; the kernel touches real rows only.
  s.args = kernels::GemmDecodeArgs{out.ptr,  a.ptr,      w,           bias,         c.ix.n,
                                   a.kind(), a.width,    out.width,   split.splits, split.slice_chunks,
                                   accumulate ? 1u : 0u};
  return s;
}

}  // namespace tandem::cuda
