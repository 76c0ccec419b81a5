// Quantized drafter weights (docs/quantization.md): which drafter modules may be quantized, the group-wise
// symmetric quantizer (the algorithm of tools/quantize_drafter.py, bit for bit), the graph rewrite from
// Gemm to QGemm, and a weight source that quantizes a float checkpoint at load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/quant_config.h"
#include "engine/io/safetensors.h"
#include "engine/ir/graph.h"

namespace tandem::models::dflash {

// What a user asks of a drafter's weights: as the checkpoint is (nullopt in DrafterOptions), float, or
// quantized at load.
enum class Quantization : uint8_t { kNone, kInt8, kInt4 };
const char* to_string(Quantization q);
Result<Quantization> parse_quantization(std::string_view text);  // none, int8 or int4
inline constexpr uint32_t kLoadGroupSize = 64;                    // group of a load-time quantization

// Quantizes one row-major [n, k] f32 matrix: per row and group of `group` columns, amax = max |w|,
// s = to_scale_dtype(amax / qmax) (qmax 127 or 7, round to nearest even), q = s == 0 ? 0 :
// clamp(round_half_even(w / s), −qmax, qmax). Codes as the file stores them (int8, or int4 nibbles + 8,
// column 2j low), scales as F16/BF16 bits.
struct QuantizedMatrix {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
};
QuantizedMatrix quantize_matrix(const float* w, uint32_t n, uint32_t k, uint32_t bits, uint32_t group,
                                DType scale_dtype);

// The drafter's own GEMM weights that may be quantized, as module names ("fc", "layers.0.mlp.gate_proj",
// "candidate_selector.hidden_projection"): every Gemm weight of the graphs except the target's
// (kTargetPrefix: LM head and embedding stay as they are). Sorted.
std::vector<std::string> quantizable_modules(const std::vector<const ir::Graph*>& graphs);

// Whether q.modules names every layer's q_proj, k_proj and v_proj together or none of them (a block layer can
// then run them as one GEMM: DrafterOptions::fuse_qkv).
bool quantizes_qkv_alike(const io::QuantConfig& q, uint32_t layers);

// Rewrites the Gemm ops over `q.modules` into QGemm ops over <module>.qweight and <module>.scales. Refuses a
// module that is not quantizable, a group size that does not divide a module's in-features, and a fused
// weight ([gate; up]) quantized in part; errors name the module and its shape.
Status quantize_graphs(const std::vector<ir::Graph*>& graphs, const io::QuantConfig& q, std::string_view origin);

// Checks what ir shapes cannot: every <module>.qweight is I8 (bits 8) or U8 (bits 4) and every
// <module>.scales has the config's scale dtype, naming the tensor, its shape and dtype.
Status check_quantized_dtypes(const WeightSource& own, const io::QuantConfig& q, std::string_view origin);

// `own` with each of q.modules' <module>.weight replaced by <module>.qweight and <module>.scales, quantized
// now by quantize_matrix (the float tensors are hidden).
Result<std::shared_ptr<const WeightSource>> quantize_source(std::shared_ptr<const WeightSource> own,
                                                            const io::QuantConfig& q, std::string_view origin);

}  // namespace tandem::models::dflash
