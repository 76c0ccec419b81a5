// Weight presence and shape checks shared by the decoder models.
#include "engine/models/qwen3/weight_check.h"

#include <string>

namespace tandem::models::qwen3 {

Status check_weights(const WeightSource& source, const ir::Graph& graph, std::string_view origin) {
  for (const ir::WeightRef& ref : graph.weights) {
    for (size_t i = 0; i < ref.parts.size(); ++i) {
      const std::string& name = ref.parts[i];
      const std::vector<uint64_t> want = ref.part_shape(i);
      if (!source.contains(name)) {
        return Error::make(ErrorKind::kNotFound, "{}: tensor '{}' is missing (expected shape {})", origin, name,
                           shape_string(want));
      }
      TANDEM_ASSIGN(TensorView view, source.tensor(name));
      if (view.shape != want) {
        return Error::make(ErrorKind::kShape, "{}: tensor '{}' has shape {}, expected {}", origin, name,
                           shape_string(view.shape), shape_string(want));
      }
      if (dtype_is_integer(view.dtype) != ref.codes) {
        return Error::make(ErrorKind::kFormat, "{}: tensor '{}' {} is {}, expected {}", origin, name,
                           shape_string(view.shape), to_string(view.dtype),
                           ref.codes ? "the I8 or U8 codes of a quantized weight" : "F32, F16 or BF16");
      }
    }
  }
  return {};
}

}  // namespace tandem::models::qwen3
