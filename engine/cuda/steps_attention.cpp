// Launchers of RoPE and attention, and the RoPE tables they read.
#include <algorithm>
#include <climits>
#include <cmath>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

// attention_tc2 blocks per multiprocessor in a grid: 2 or 3 fit at once (registers, shared memory), so
// this is 5-8 waves' worth, enough that the scheduler evens out tiles of unequal cost.
constexpr uint32_t kTc2BlocksPerSm = 16;

}  // namespace

std::vector<float> rope_table(float theta, uint32_t half, uint32_t positions) {
  std::vector<float> inv(half);
  for (uint32_t i = 0; i < half; ++i) {
    // As HF builds inv_freq in float32: 1 / theta ** (arange(0, d, 2) / d).
    const float e = static_cast<float>(2 * i) / static_cast<float>(2 * half);
    inv[i] = 1.0f / std::pow(theta, e);
  }
  std::vector<float> out(size_t{2} * positions * half);
  float* cos_out = out.data();
  float* sin_out = out.data() + size_t{positions} * half;
  for (uint32_t p = 0; p < positions; ++p) {
    for (uint32_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(static_cast<float>(p) * inv[i]);
      cos_out[size_t{p} * half + i] = static_cast<float>(std::cos(angle));
      sin_out[size_t{p} * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return out;
}

Result<KernelStep> rope_step(const StepContext& c, const Loc& x, const ir::Rope& op, const RopeTable& table) {
  if (x.rows != ir::Rows::kTokens || op.head_dim % 2 != 0 || op.head_dim == 0 ||
      uint64_t{op.col} + uint64_t{op.heads} * op.head_dim > x.width) {
    return Error::make(ErrorKind::kUnsupported, "rope: {} heads of {} from column {} do not fit {}", op.heads,
                       op.head_dim, op.col, x.describe());
  }
  KernelStep s;
  // INVARIANT: the column range was checked against x's width; the tables cover the bucket's positions.
  s.id = x.type == Dt::kF32 ? KernelId::rope_f32_f32 : KernelId::rope_f16_f16;
  s.grid = dim3(std::max(1u, c.bucket.tokens));
  s.block = dim3(256);
  s.args = kernels::RopeArgs{x.ptr, table.cos, table.sin, c.ix.pos, c.ix.n, x.width, op.col, op.heads, op.head_dim / 2};
  return s;
}

Result<KernelStep> attention_step(const StepContext& c, const Loc& qkv, const Loc& out, const ir::Attention& op,
                                  const RopeTable* rope) {
  if (op.head_dim != kernels::kHeadDim) {
    return Error::make(ErrorKind::kUnsupported, "attention over {}: heads of {} (the CUDA kernels take {})",
                       qkv.describe(), op.head_dim, static_cast<unsigned>(kernels::kHeadDim));
  }
  const uint64_t width = uint64_t{op.heads} * op.head_dim;
  if (qkv.rows != ir::Rows::kTokens || out.rows != ir::Rows::kTokens || qkv.width != 3 * width ||
      out.width != width || op.heads == 0 || op.heads > 65535) {
    return Error::make(ErrorKind::kUnsupported, "attention: {} heads over {} to {}", op.heads, qkv.describe(),
                       out.describe());
  }
  if (op.window && *op.window > static_cast<uint32_t>(INT_MAX)) {
    return Error::make(ErrorKind::kUnsupported, "attention window {} is too large", *op.window);
  }
  KernelStep s;
  // FP32 qkv takes the plan's kernel (lowering chose it by precision and device); FP16 qkv only simt.
  const CudaAttention path = qkv.type == Dt::kF32 ? c.attention : CudaAttention::kSimt;
  const bool f32_out = out.type == Dt::kF32;
  switch (path) {
    case CudaAttention::kTc2:
    case CudaAttention::kTc2Split: {
      // An FP32 output keeps P·V split as well (the FP16 output's rounding is what lets tc2 skip it).
      if (f32_out) {
        s.id = KernelId::attention_tc2_f32_f32;
      } else {
        s.id = path == CudaAttention::kTc2 ? KernelId::attention_tc2_f32_f16 : KernelId::attention_tc2s_f32_f16;
      }
      // Blocks loop over tiles, so the grid need not cover a bucket's worst case (⌈T/64⌉ + S tiles,
      // mostly empty): a few waves of blocks per head are enough to fill the device.
      const uint32_t cap = std::max(1u, kTc2BlocksPerSm * c.sms / op.heads);
      s.grid = dim3(op.heads, std::max(1u, std::min(c.tiles_max, cap)));
      s.block = dim3(kernels::kTc2Threads);
      s.smem = kernel_dynamic_smem(s.id);
      break;
    }
    case CudaAttention::kTc:
      s.id = f32_out ? KernelId::attention_tc_f32_f32 : KernelId::attention_tc_f32_f16;
      s.grid = dim3(std::max(1u, c.tiles_max), op.heads);
      s.block = dim3(128);
      break;
    case CudaAttention::kSimt:
      if (qkv.type == Dt::kF32) {
        s.id = f32_out ? KernelId::attention_f32_f32 : KernelId::attention_f32_f16;
      } else {
        s.id = f32_out ? KernelId::attention_f16_f32 : KernelId::attention_f16_f16;
      }
      s.grid = dim3(std::max(1u, 4 * c.tiles_max), op.heads);
      s.block = dim3(256);
      break;
  }
  const int window = op.window ? static_cast<int>(*op.window) : -1;
  // INVARIANT: qkv and out hold the bucket's token rows at the widths checked above; the RoPE tables
  // cover positions below the bucket's tokens (the scorer's positions restart per sequence).
  const float scale = 1.0f / std::sqrt(static_cast<float>(op.head_dim));
  s.args = kernels::AttentionArgs{out.ptr,
                                  qkv.ptr,
                                  rope != nullptr ? rope->cos : nullptr,
                                  rope != nullptr ? rope->sin : nullptr,
                                  c.ix.pos,
                                  c.ix.seq,
                                  c.ix.cu,
                                  c.ix.tiles,
                                  c.ix.spans,
                                  c.ix.n,
                                  op.heads,
                                  window,
                                  scale};
  return s;
}

}  // namespace tandem::cuda
