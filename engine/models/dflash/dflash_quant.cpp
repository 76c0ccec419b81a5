// Quantized drafter weights (dflash_quant.h): the quantizer, the Gemm -> QGemm rewrite, the dtype checks
// and the load-time quantizing weight source.
#include "engine/models/dflash/dflash_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "engine/models/dflash/dflash_model.h"

namespace tandem::models::dflash {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

std::optional<std::string> module_of(const std::string& part) {
  if (part.starts_with(kTargetPrefix) || !part.ends_with(kWeightSuffix)) return std::nullopt;
  return part.substr(0, part.size() - kWeightSuffix.size());
}

// The modules of a Gemm's weight, or empty when any part is not a quantizable module.
std::vector<std::string> modules_of(const ir::WeightRef& ref) {
  std::vector<std::string> out;
  for (const std::string& part : ref.parts) {
    const std::optional<std::string> m = module_of(part);
    if (!m) return {};
    out.push_back(*m);
  }
  return out;
}

uint16_t to_scale(float s, DType dtype) { return dtype == DType::kBF16 ? float_to_bf16(s) : float_to_half(s); }
float from_scale(uint16_t s, DType dtype) { return dtype == DType::kBF16 ? bf16_to_float(s) : half_to_float(s); }

// A source that hides the quantized modules' float tensors and adds their codes and scales.
class QuantizedSource final : public WeightSource {
 public:
  QuantizedSource(std::shared_ptr<const WeightSource> own, std::set<std::string, std::less<>> hidden,
                  io::HostTensors made)
      : own_(std::move(own)), hidden_(std::move(hidden)), made_(std::move(made)) {}
  Result<TensorView> tensor(std::string_view name) const override {
    if (made_.contains(name)) return made_.tensor(name);
    if (hidden_.contains(name)) {
      return Error::make(ErrorKind::kNotFound, "tensor '{}' was quantized at load (its codes and scales replace it)",
                         name);
    }
    return own_->tensor(name);
  }
  bool contains(std::string_view name) const override {
    return made_.contains(name) || (!hidden_.contains(name) && own_->contains(name));
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out = made_.names();
    for (std::string& n : own_->names()) {
      if (!hidden_.contains(n)) out.push_back(std::move(n));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::shared_ptr<const WeightSource> own_;
  std::set<std::string, std::less<>> hidden_;
  io::HostTensors made_;
};

}  // namespace

const char* to_string(Quantization q) {
  switch (q) {
    case Quantization::kNone: return "none";
    case Quantization::kInt8: return "int8";
    case Quantization::kInt4: return "int4";
  }
  return "?";
}

Result<Quantization> parse_quantization(std::string_view text) {
  if (text == "none") return Quantization::kNone;
  if (text == "int8") return Quantization::kInt8;
  if (text == "int4") return Quantization::kInt4;
  return Error::make(ErrorKind::kInvalidArgument, "quantization '{}' is not one of none, int8, int4", text);
}

QuantizedMatrix quantize_matrix(const float* w, uint32_t n, uint32_t k, uint32_t bits, uint32_t group,
                                DType scale_dtype) {
  const int32_t qmax = bits == 8 ? 127 : 7;
  const uint32_t groups = k / group;
  QuantizedMatrix out;
  out.codes.assign(size_t{n} * k * bits / 8, 0);
  out.scales.resize(size_t{n} * groups);
  for (uint32_t r = 0; r < n; ++r) {
    const float* row = w + size_t{r} * k;
    uint8_t* codes = out.codes.data() + size_t{r} * k * bits / 8;
    for (uint32_t g = 0; g < groups; ++g) {
      float amax = 0.0f;
      for (uint32_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(row[c]));
      const uint16_t stored = to_scale(amax / static_cast<float>(qmax), scale_dtype);
      out.scales[size_t{r} * groups + g] = stored;
      const float s = from_scale(stored, scale_dtype);
      for (uint32_t c = g * group; c < (g + 1) * group; ++c) {
        int32_t q = 0;
        if (s != 0.0f) {
          // nearbyint rounds half to even in the default mode, as torch.round does.
          const float v = std::nearbyint(row[c] / s);
          q = static_cast<int32_t>(std::clamp(v, static_cast<float>(-qmax), static_cast<float>(qmax)));
        }
        if (bits == 8) {
          codes[c] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const auto nibble = static_cast<uint8_t>(q + 8);
          codes[c / 2] = static_cast<uint8_t>(c % 2 == 0 ? (codes[c / 2] & 0xf0u) | nibble
                                                         : (codes[c / 2] & 0x0fu) | (nibble << 4));
        }
      }
    }
  }
  return out;
}

std::vector<std::string> quantizable_modules(const std::vector<const ir::Graph*>& graphs) {
  std::set<std::string> all;
  for (const ir::Graph* g : graphs) {
    for (const ir::Op& op : g->ops) {
      const auto* gemm = std::get_if<ir::Gemm>(&op);
      if (gemm == nullptr) continue;
      for (std::string& m : modules_of(g->weight(gemm->w))) all.insert(std::move(m));
    }
  }
  return {all.begin(), all.end()};
}

Status quantize_graphs(const std::vector<ir::Graph*>& graphs, const io::QuantConfig& q, std::string_view origin) {
  const std::vector<const ir::Graph*> views(graphs.begin(), graphs.end());
  const std::vector<std::string> allowed = quantizable_modules(views);
  for (const std::string& m : q.modules) {
    if (!std::binary_search(allowed.begin(), allowed.end(), m)) {
      return Error::make(ErrorKind::kUnsupported,
                         "{}: quantization_config.modules names '{}', which is not one of the drafter's own GEMM "
                         "modules (the target's LM head and embedding are never quantized)",
                         origin, m);
    }
  }
  const std::set<std::string> wanted(q.modules.begin(), q.modules.end());
  for (ir::Graph* g : graphs) {
    // Every weight over listed modules, whether an op of this graph reads it or not (the settle graph
    // declares a layer's weights and multiplies by k and v only): its codes replace it, its scales join.
    std::map<uint32_t, ir::WeightId> scales_of;
    const size_t count = g->weights.size();
    for (uint32_t i = 0; i < count; ++i) {
      const ir::WeightRef ref = g->weights[i];
      const std::vector<std::string> modules = modules_of(ref);
      const auto listed = static_cast<size_t>(std::count_if(modules.begin(), modules.end(), [&](const std::string& m) {
        return wanted.contains(m);
      }));
      if (listed == 0) continue;
      if (listed != modules.size()) {
        return Error::make(ErrorKind::kUnsupported, "{}: modules {} run as one GEMM {}: quantize all of them or none",
                           origin, fmt::join(modules, " and "), shape_string(ref.shape));
      }
      if (ref.shape.size() != 2) {
        return Error::make(ErrorKind::kShape, "{}: module '{}' is {}, not a matrix", origin, modules[0],
                           shape_string(ref.shape));
      }
      const uint64_t n = ref.shape[0];
      const uint64_t k = ref.shape[1];
      if (k % q.group_size != 0) {
        return Error::make(ErrorKind::kShape,
                           "{}: quantization_config.group_size {} does not divide the {} in-features of module '{}' "
                           "{}", origin, q.group_size, k, modules[0], shape_string(ref.shape));
      }
      ir::WeightRef codes{{}, {n, k * q.bits / 8}, true, ref.part_rows};  // [q | k | v] parts keep their rows
      std::vector<std::string> scale_parts;
      for (const std::string& m : modules) {
        codes.parts.push_back(m + ".qweight");
        scale_parts.push_back(m + ".scales");
      }
      g->weights[i] = std::move(codes);
      scales_of[i] = g->add_stacked_weight(std::move(scale_parts), ref.part_rows, {n, k / q.group_size});
    }
    for (ir::Op& op : g->ops) {
      const auto* gemm = std::get_if<ir::Gemm>(&op);
      if (gemm == nullptr) continue;
      const auto it = scales_of.find(gemm->w.index);
      if (it == scales_of.end()) continue;
      if (gemm->first_rows) {  // the target's head under a draft vocabulary: never a drafter module
        return Error::make(ErrorKind::kUnsupported, "{}: {} is read by its first rows only and cannot be quantized",
                           origin, g->weight(gemm->w).name());
      }
      const ir::Gemm old = *gemm;
      op = ir::QGemm{old.a, old.w, it->second, q.bits, q.group_size, old.b, old.epilogue, old.out};
    }
  }
  return {};
}

bool quantizes_qkv_alike(const io::QuantConfig& q, uint32_t layers) {
  static constexpr const char* kQkv[] = {"q_proj", "k_proj", "v_proj"};
  const std::set<std::string> listed(q.modules.begin(), q.modules.end());
  for (uint32_t l = 0; l < layers; ++l) {
    const std::string attn = "layers." + std::to_string(l) + ".self_attn.";
    const auto n = std::count_if(std::begin(kQkv), std::end(kQkv), [&](const char* p) {
      return listed.contains(attn + p);
    });
    if (n != 0 && n != 3) return false;
  }
  return true;
}

Status check_quantized_dtypes(const WeightSource& own, const io::QuantConfig& q, std::string_view origin) {
  const DType codes = q.bits == 8 ? DType::kI8 : DType::kU8;
  for (const std::string& m : q.modules) {
    for (const auto& [name, want] : {std::pair{m + ".qweight", codes}, std::pair{m + ".scales", q.scale_dtype}}) {
      if (!own.contains(name)) continue;  // check_weights names what is missing, with its shape
      TANDEM_ASSIGN(const TensorView t, own.tensor(name));
      if (t.dtype != want) {
        return Error::make(ErrorKind::kFormat, "{}: tensor '{}' {} is {}, expected {} (int{} group {} with {} scales)",
                           origin, name, shape_string(t.shape), to_string(t.dtype), to_string(want), q.bits,
                           q.group_size, to_string(q.scale_dtype));
      }
    }
    if (own.contains(m + ".weight")) {
      TANDEM_ASSIGN(const TensorView t, own.tensor(m + ".weight"));
      return Error::make(ErrorKind::kFormat,
                         "{}: tensor '{}.weight' {} is present, but quantization_config lists module '{}' (a "
                         "quantized module has '{}.qweight' and '{}.scales' only)",
                         origin, m, shape_string(t.shape), m, m, m);
    }
  }
  return {};
}

Result<std::shared_ptr<const WeightSource>> quantize_source(std::shared_ptr<const WeightSource> own,
                                                            const io::QuantConfig& q, std::string_view origin) {
  io::HostTensors made;
  std::set<std::string, std::less<>> hidden;
  for (const std::string& m : q.modules) {
    const std::string name = m + ".weight";
    TANDEM_ASSIGN(const TensorView t, own->tensor(name));
    if (t.shape.size() != 2 || dtype_is_integer(t.dtype)) {
      return Error::make(ErrorKind::kShape, "{}: tensor '{}' {} {} is no float matrix to quantize", origin, name,
                         to_string(t.dtype), shape_string(t.shape));
    }
    const auto n = static_cast<uint32_t>(t.shape[0]);
    const auto k = static_cast<uint32_t>(t.shape[1]);
    if (k % q.group_size != 0) {
      return Error::make(ErrorKind::kShape, "{}: group size {} does not divide the {} in-features of '{}' {}", origin,
                         q.group_size, k, name, shape_string(t.shape));
    }
    const std::vector<float> w = t.to_f32();
    QuantizedMatrix qm = quantize_matrix(w.data(), n, k, q.bits, q.group_size, q.scale_dtype);
    io::HostTensor codes{m + ".qweight", q.bits == 8 ? DType::kI8 : DType::kU8, {n, uint64_t{k} * q.bits / 8}, {}};
    codes.bytes.assign(qm.codes.begin(), qm.codes.end());
    io::HostTensor scales{m + ".scales", q.scale_dtype, {n, k / q.group_size}, {}};
    scales.bytes.resize(qm.scales.size() * 2);
    std::memcpy(scales.bytes.data(), qm.scales.data(), scales.bytes.size());
    made.add(std::move(codes));
    made.add(std::move(scales));
    hidden.insert(name);
  }
  return std::shared_ptr<const WeightSource>(
      std::make_shared<QuantizedSource>(std::move(own), std::move(hidden), std::move(made)));
}

Result<std::optional<io::QuantConfig>> resolve_quantization(const io::DFlashConfig& cfg,
                                                            std::optional<Quantization> asked,
                                                            const DrafterGraphs& graphs, std::string_view origin) {
  if (cfg.quantization) {
    const io::QuantConfig& q = *cfg.quantization;
    const Quantization stored = q.bits == 8 ? Quantization::kInt8 : Quantization::kInt4;
    if (asked && *asked != stored) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: quantization '{}' was asked, but the checkpoint is quantized as {} (group {}, "
                         "quantization_config in config.json) and loads only as what it is; tandem does not {} it",
                         origin, to_string(*asked), to_string(stored), q.group_size,
                         *asked == Quantization::kNone ? "dequantize" : "requantize");
    }
    return cfg.quantization;
  }
  if (!asked || *asked == Quantization::kNone) return std::optional<io::QuantConfig>();
  io::QuantConfig q;
  q.bits = *asked == Quantization::kInt8 ? 8 : 4;
  q.group_size = kLoadGroupSize;
  q.scale_dtype = DType::kF16;
  q.modules = quantizable_modules({&graphs.settle, &graphs.block});
  return std::optional<io::QuantConfig>(std::move(q));
}

}  // namespace tandem::models::dflash
