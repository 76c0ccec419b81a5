// The quantization_config of a quantized DFlash drafter's config.json (docs/quantization.md): group-wise
// symmetric int8 or int4 codes with F16 or BF16 scales, and the modules stored that way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/core/dtype.h"
#include "engine/core/result.h"

namespace tandem::io {

inline constexpr const char* kQuantMethod = "tandem-groupwise";

struct QuantConfig {
  uint32_t bits = 8;                  // 8 or 4
  uint32_t group_size = 64;           // 32, 64 or 128 elements of a row share one scale
  DType scale_dtype = DType::kF16;    // F16 or BF16
  std::vector<std::string> modules;   // "fc", "layers.0.self_attn.q_proj": <module>.qweight and .scales
};

// The top-level "quantization_config" of `j` (nullopt when absent): quant_method "tandem-groupwise",
// bits 8|4, group_size 32|64|128, scale_dtype "float16"|"bfloat16", modules a non-empty list of names.
// Errors name the file and the key path.
Result<std::optional<QuantConfig>> parse_quant_config(const nlohmann::json& j, const std::string& origin);

}  // namespace tandem::io
