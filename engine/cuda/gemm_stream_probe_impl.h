// Whether the streaming GEMM (kernels/gemm_stream.cu) computes exactly cuBLASLt's bits for a decoder GEMM
// shape: gemm_impl.h's rule lets a kernel other than the reference run a bucket only where a probe shows the
// same bits, and whether this one's chain of mma steps rounds as cuBLASLt's does is the hardware's to say.
// And, where it does, whether it is also the faster of the two for a bucket's rows.
#pragma once

#include <cublasLt.h>

#include "engine/core/result.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/modules_impl.h"

namespace tandem::cuda {

// Both run kGemmStreamRows rows of fixed noise (and prior output) against the real weight `w`: the kernel on
// shape.splits slices, cuBLASLt on `reference`. False without a probe for shapes the kernel does not take (bias
// or activation epilogues, k not a multiple of 16, other splits). Verdicts are kept per kernel source.
Result<bool> gemm_stream_same_bits(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                   const GemmShape& shape, const cublasLtMatmulAlgo_t& reference, const void* w);

// Whether the streaming GEMM runs `rows` rows of `shape` faster than cuBLASLt's `algo` (the bucket's own choice):
// both timed on copies of the real weight rotated past the L2, as a decode step reads each matrix once (a weight
// that fits the L2 would time the L2 instead), medians of launches between events. Remembered per shape, rows,
// algorithm and kernel source. Under a profiler only a remembered verdict is used, else true (same bits suffice,
// as without timing).
Result<bool> gemm_stream_faster(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                const GemmShape& shape, uint32_t rows, const cublasLtMatmulAlgo_t& algo,
                                const void* w);

}  // namespace tandem::cuda
