// What the quantized GEMM kernels (qgemm.cu on CUDA cores, qgemm_tc.cu on tensor cores) share: a scale's
// bits as a float and the epilogue. Included by prelude.cuh after its primitives.
#pragma once

namespace tandem::kernels {

// One group scale (F16 or BF16 bits, as the checkpoint stores it), exactly widened.
TK_DEV float qgemm_scale(const QGemmArgs& a, unsigned short bits) {
  return a.scale_bf16 != 0u ? b2f(bits) : h2f(bits);
}

// The bias and activation of output column `col` (accumulation is the caller's, into the stored value).
TK_DEV float qgemm_epilogue(const QGemmArgs& a, float v, unsigned col) {
  if (a.bias != nullptr) v += a.bias[col];
  if (a.act == kActGelu) return gelu_erf(v);
  if (a.act == kActRelu) return fmaxf(v, 0.0f);
  return v;
}

}  // namespace tandem::kernels
