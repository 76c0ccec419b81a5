// Parsing of quantization_config (quant_config.h), with the key path in every error.
#include "engine/io/quant_config.h"

#include <set>

#include <nlohmann/json.hpp>

#include "engine/io/json_fields_impl.h"
#include "engine/io/json_parse_impl.h"

namespace tandem::io {

using nlohmann::json;

Result<std::optional<QuantConfig>> parse_quant_config(const json& j, const std::string& origin) {
  TANDEM_ASSIGN(const JsonFields top, JsonFields::of(j, JsonLoc(origin)));
  TANDEM_ASSIGN(const std::optional<JsonFields> q, top.opt_object("quantization_config"));
  if (!q) return std::optional<QuantConfig>();
  QuantConfig c;
  TANDEM_ASSIGN(const std::optional<std::string> method, q->opt_string("quant_method"));
  if (!method) return q->missing("quant_method");
  if (*method != kQuantMethod) {
    return q->loc("quant_method")
        .error(ErrorKind::kUnsupported, fmt::format("\"{}\" is not supported (tandem reads \"{}\")", *method,
                                                    kQuantMethod));
  }
  if (!q->has("bits")) return q->missing("bits");
  TANDEM_ASSIGN(c.bits, q->u32("bits"));
  if (c.bits != 8 && c.bits != 4) {
    return q->loc("bits").error(ErrorKind::kUnsupported, fmt::format("{} (4 or 8)", c.bits));
  }
  if (!q->has("group_size")) return q->missing("group_size");
  TANDEM_ASSIGN(c.group_size, q->u32("group_size"));
  if (c.group_size != 32 && c.group_size != 64 && c.group_size != 128) {
    return q->loc("group_size").error(ErrorKind::kUnsupported, fmt::format("{} (32, 64 or 128)", c.group_size));
  }
  TANDEM_ASSIGN(const std::optional<std::string> scale, q->opt_string("scale_dtype"));
  if (!scale) return q->missing("scale_dtype");
  if (*scale == "float16") {
    c.scale_dtype = DType::kF16;
  } else if (*scale == "bfloat16") {
    c.scale_dtype = DType::kBF16;
  } else {
    return q->loc("scale_dtype")
        .error(ErrorKind::kUnsupported, fmt::format("\"{}\" (float16 or bfloat16)", *scale));
  }
  const json* modules = q->find("modules");
  if (modules == nullptr) return q->missing("modules");
  if (!modules->is_array() || modules->empty()) {
    return q->loc("modules").error(ErrorKind::kFormat, fmt::format("expected a non-empty list of module names, "
                                                                   "found {}", describe_json(*modules)));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < modules->size(); ++i) {
    TANDEM_ASSIGN(std::string m, json_to_string((*modules)[i], q->loc("modules").index(i)));
    if (!seen.insert(m).second) {
      return q->loc("modules").index(i).error(ErrorKind::kFormat, fmt::format("\"{}\" is listed twice", m));
    }
    c.modules.push_back(std::move(m));
  }
  return std::optional<QuantConfig>(std::move(c));
}

}  // namespace tandem::io
