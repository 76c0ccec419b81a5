// The element type of every value of a graph lowered for the GPU (scorer.md §3 "Precision"): all FP32
// in FP32 plans; in FP16 and BF16 plans, 16-bit except where precision needs FP32; token ids are u32.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/backend.h"

// 16-bit plans force FP32 on the residual stream (Embed outputs, GEMM accumulate targets, AddType
// targets), attention's qkv, the ActFeatures inputs and output, the logits that Argmax, TopK and Sample
// read, TopK's values and the host outputs; then a GEMM or pick whose input is FP32 gets an FP32 output
// too, unless that output is an attention or GeGLU output. Device outputs (taps) keep 16 bits.
namespace tandem::cuda {

enum class Dt : uint8_t { kF32, kF16, kBF16, kU32 };
inline size_t dt_size(Dt t) { return t == Dt::kF32 || t == Dt::kU32 ? 4 : 2; }
const char* dt_name(Dt t);  // "f32", "f16", "bf16", "u32"
// The 16-bit type of a plan's precision (kF32 for FP32 plans).
Dt half_type(ir::Precision precision);

std::vector<Dt> value_types(const ir::Graph& graph, ir::Precision precision);

// How a value of element type t is stored, as device outputs report it.
inline ir::Storage storage_of(Dt t) {
  switch (t) {
    case Dt::kF32: return ir::Storage::kF32;
    case Dt::kF16: return ir::Storage::kF16;
    case Dt::kBF16: return ir::Storage::kBF16;
    case Dt::kU32: return ir::Storage::kU32;
  }
  return ir::Storage::kF32;
}

}  // namespace tandem::cuda
