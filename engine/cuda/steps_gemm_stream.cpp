// The streaming GEMM's launcher (steps_impl.h, kernels/gemm_stream.cu): entry by operand and output type, the
// K split as the caller's cuBLASLt shape has it, the staged rows' shared memory by the bucket's rows, shapes and
// alignment checked here at lowering.
#include <algorithm>
#include <cstdint>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {

Status gemm_stream_supported(uint32_t k, uint32_t splits, Dt ab, Dt out, bool accumulate) {
  TANDEM_TRY(mma_gemm_supported("gemm_stream", ab, out, accumulate));
  if (k == 0 || k % 16 != 0) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: k {} is not a positive multiple of 16", k);
  }
  if (splits != 1 && splits != 2 && splits != 4) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: {} K slices (1, 2 or 4)", splits);
  }
  return {};
}

namespace {

// K per slice: k / splits rounded up to whole 16-k steps.
uint32_t slice_k_of(uint32_t k, uint32_t splits) { return ((k + splits - 1) / splits + 15) / 16 * 16; }

}  // namespace

uint64_t gemm_stream_smem(uint32_t k, uint32_t splits, uint32_t rows) {
  return uint64_t{splits} * rows * (uint64_t{slice_k_of(k, splits)} * 2 + kernels::kGemmStreamRowPad);
}

uint32_t gemm_stream_max_rows(uint32_t k, uint32_t splits) {
  uint32_t rows = kernels::kGemmStreamRows;
  while (rows > 0 && gemm_stream_smem(k, splits, rows) > kernels::kGemmStreamSmemMax) --rows;
  return rows;
}

Result<KernelStep> gemm_stream_step(const StepContext& c, const Loc& a, const Loc& out, const void* w, uint32_t splits,
                                    bool accumulate) {
  const std::string what = a.describe() + " to " + out.describe();
  if (a.rows != out.rows || out.width == 0) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: {}: rows differ or no columns", what);
  }
  if (Status st = gemm_stream_supported(a.width, splits, a.type, out.type, accumulate); !st.ok()) {
    return std::move(st).error().context(what);
  }
  const uint32_t rows = c.bucket.rows(a.rows);
  if (rows > kernels::kGemmStreamRows) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: {}: {} bucket rows (at most {})", what, rows,
                       static_cast<unsigned>(kernels::kGemmStreamRows));
  }
  const uint32_t staged = std::max<uint32_t>(rows, 1);
  const uint64_t smem = gemm_stream_smem(a.width, splits, staged);
  if (smem > kernels::kGemmStreamSmemMax) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: {}: {} rows of k {} in {} slices need {} bytes of shared "
                       "memory (at most {}; gemm_stream_max_rows)", what, staged, a.width, splits, smem,
                       static_cast<unsigned>(kernels::kGemmStreamSmemMax));
  }
  if (Status st = mma_gemm_supported("gemm_stream", a.type, out.type, accumulate, a.ptr, out.ptr, w); !st.ok()) {
    return std::move(st).error().context(what);
  }
  KernelStep s;
  if (a.type == Dt::kF16) {
    s.id = out.type == Dt::kF32 ? KernelId::gemm_stream_f16_f32 : KernelId::gemm_stream_f16_f16;
  } else {
    s.id = out.type == Dt::kF32 ? KernelId::gemm_stream_bf16_f32 : KernelId::gemm_stream_bf16_bf16;
  }
  const uint32_t tiles = (out.width + kernels::kGemmStreamCols - 1) / kernels::kGemmStreamCols;
  const uint32_t slice_k = slice_k_of(a.width, splits);
  s.grid = dim3(1, tiles);
  if (s.grid.y > 65535) {
    return Error::make(ErrorKind::kUnsupported, "gemm_stream: {}: {} column tiles (limit 65535)", what, s.grid.y);
  }
  s.block = dim3(splits * 32);
  s.smem = static_cast<uint32_t>(smem);
  // INVARIANT: a, out and w are arena values and a weight sized at lowering for the bucket's rows (a [rows, k],
  // out [rows, n], w [n, k]) at the types checked above; the kernel touches real rows only.
  s.args = kernels::GemmStreamArgs{out.ptr,   a.ptr,  w,       c.ix.n,     a.kind(),   a.width, out.width,
                                   splits,    slice_k, accumulate ? 1u : 0u, staged};
  return s;
}

}  // namespace tandem::cuda
