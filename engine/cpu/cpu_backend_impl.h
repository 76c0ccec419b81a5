// Internals of the CPU backend shared by its files and its tests: weights as uploaded (f32, GEMM
// weights packed), and a factory that pins the SIMD level (tests compare levels bit for bit).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm_impl.h"
#include "engine/cpu/qgemm_impl.h"
#include "engine/cpu/simd_impl.h"
#include "engine/ir/backend.h"

namespace tandem::cpu {

// One uploaded weight (WeightRef parts stacked along dim 0): row-major f32 for the ops that read it
// directly, packed panels when a Gemm multiplies by it. Only the forms some graph needs are kept.
struct CpuTensor {
  std::vector<uint64_t> shape;
  std::vector<float> values;
  std::optional<PackedMatrix> packed;
  std::vector<uint8_t> codes;  // a QGemm's quantized codes, bytes as stored (never converted)
};

class CpuWeights final : public ir::Weights {
 public:
  size_t bytes() const override;
  const CpuTensor* find(const std::string& name) const;

  std::map<std::string, CpuTensor> tensors;  // by WeightRef::name()
};

// What a graph uses each of its weights as: row-major values (non-GEMM ops, GEMM biases, QGemm scales),
// a GEMM's w, or a QGemm's codes (of `code_bits` 8 or 4).
struct WeightNeeds {
  bool values = false;
  bool packed = false;
  uint32_t code_bits = 0;
};
std::vector<WeightNeeds> weight_needs(const ir::Graph& graph);

// Uploads every weight the graphs reference (the union by name), checking each part against its
// WeightRef: the rank, the trailing dims, and dim 0 summing to the stacked shape.
Result<std::unique_ptr<CpuWeights>> upload_weights(const WeightSource& source,
                                                   std::span<const ir::Graph* const> graphs);

// A backend running `isa` (the base level when this CPU lacks it).
std::unique_ptr<ir::Backend> make_cpu_backend(size_t threads, Isa isa);

}  // namespace tandem::cpu
