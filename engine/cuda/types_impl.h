// The element type of every value of a graph lowered for the GPU (scorer.md §3 "Precision"): all FP32
// in FP32 plans; in FP16 plans, FP16 except where precision needs FP32.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ir/backend.h"

// FP16 plans force FP32 on the residual stream (Embed outputs, GEMM accumulate targets, AddType
// targets), attention's qkv, the ActFeatures inputs and output, and graph outputs; then a GEMM or gather
// whose input is FP32 gets an FP32 output too, unless that output is an attention or GeGLU output.
namespace tandem::cuda {

enum class Dt : uint8_t { kF32, kF16 };
inline size_t dt_size(Dt t) { return t == Dt::kF32 ? 4 : 2; }
const char* dt_name(Dt t);  // "f32", "f16"

std::vector<Dt> value_types(const ir::Graph& graph, ir::Precision precision);

}  // namespace tandem::cuda
