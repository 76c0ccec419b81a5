// Weight upload for the CPU backend: every checkpoint dtype converted to f32 once, WeightRef parts
// stacked along dim 0 and checked against the shape the graph declares, GEMM weights packed, quantized
// codes kept as their bytes.
#include <algorithm>
#include <cstring>
#include <variant>

#include "engine/cpu/cpu_backend_impl.h"

namespace tandem::cpu {

std::vector<WeightNeeds> weight_needs(const ir::Graph& graph) {
  std::vector<WeightNeeds> needs(graph.weights.size());
  auto plain = [&](ir::WeightId w) { needs[w.index].values = true; };
  for (const ir::Op& op : graph.ops) {
    if (const auto* o = std::get_if<ir::Gemm>(&op)) {
      needs[o->w.index].packed = true;
      if (o->b) plain(*o->b);
    } else if (const auto* q = std::get_if<ir::QGemm>(&op)) {
      needs[q->w.index].code_bits = q->bits;
      plain(q->scales);
      if (q->b) plain(*q->b);
    } else if (const auto* e = std::get_if<ir::Embed>(&op)) {
      plain(e->table);
    } else if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
      plain(ln->w);
      if (ln->b) plain(*ln->b);
    } else if (const auto* rn = std::get_if<ir::RmsNorm>(&op)) {
      plain(rn->w);
    } else if (const auto* at = std::get_if<ir::AddType>(&op)) {
      plain(at->table);
    } else if (const auto* hn = std::get_if<ir::HeadRmsNorm>(&op)) {
      plain(hn->w);
    } else if (const auto* dc = std::get_if<ir::DynConv>(&op)) {
      plain(dc->base);
    } else if (const auto* sw = std::get_if<ir::SelectorWalk>(&op)) {
      plain(sw->predecessor);
      plain(sw->successor);
    }
  }
  return needs;
}

namespace {

// The parts of `ref` stacked along dim 0: converted to f32, or for codes (code_bits 8: I8, 4: U8) copied as
// bytes into `codes`.
Result<std::vector<float>> stack_parts(const WeightSource& source, const ir::WeightRef& ref, uint32_t code_bits,
                                       std::vector<uint8_t>& codes) {
  uint64_t numel = 1;
  for (uint64_t d : ref.shape) numel *= d;
  std::vector<float> out(code_bits ? 0 : numel);
  if (code_bits) codes.resize(numel);
  uint64_t rows = 0;
  uint64_t filled = 0;
  for (const std::string& part : ref.parts) {
    TANDEM_ASSIGN(TensorView view, source.tensor(part));
    const DType want = code_bits == 8 ? DType::kI8 : DType::kU8;
    if (code_bits ? view.dtype != want : dtype_is_integer(view.dtype)) {
      return Error::make(ErrorKind::kFormat, "tensor {} {} is {}, expected {}", part, shape_string(view.shape),
                         to_string(view.dtype), code_bits ? to_string(want) : "F32, F16 or BF16");
    }
    const bool rank_ok = view.shape.size() == ref.shape.size();
    bool trailing_ok = rank_ok;
    for (size_t i = 1; rank_ok && i < ref.shape.size(); ++i) trailing_ok = trailing_ok && view.shape[i] == ref.shape[i];
    if (!trailing_ok || (ref.parts.size() == 1 && view.shape != ref.shape) || filled + view.numel() > numel) {
      if (ref.parts.size() == 1) {
        return Error::make(ErrorKind::kShape, "tensor {} is {}, expected {}", part, shape_string(view.shape),
                           shape_string(ref.shape));
      }
      return Error::make(ErrorKind::kShape, "tensor {} is {}, which does not stack into {} as {}", part,
                         shape_string(view.shape), ref.name(), shape_string(ref.shape));
    }
    if (code_bits) {
      if (view.numel() > 0) std::memcpy(codes.data() + filled, view.data, view.numel());
    } else {
      convert_to_f32(view.dtype, view.data, view.numel(), out.data() + filled);
    }
    filled += view.numel();
    rows += view.shape[0];
  }
  if (rows != ref.shape[0]) {
    return Error::make(ErrorKind::kShape, "tensors {} stack to {} rows, expected {} ({})", ref.name(), rows,
                       ref.shape[0], shape_string(ref.shape));
  }
  return out;
}

}  // namespace

size_t CpuWeights::bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : tensors) {
    total += t.values.size() * sizeof(float) + (t.packed ? t.packed->bytes() : 0) + t.codes.size();
  }
  return total;
}

const CpuTensor* CpuWeights::find(const std::string& name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Result<std::unique_ptr<CpuWeights>> upload_weights(const WeightSource& source,
                                                   std::span<const ir::Graph* const> graphs) {
  // Merge what every graph needs of each weight first, so a tensor is converted once.
  std::map<std::string, std::pair<const ir::WeightRef*, WeightNeeds>> wanted;
  for (const ir::Graph* graph : graphs) {
    const std::vector<WeightNeeds> needs = weight_needs(*graph);
    for (size_t i = 0; i < graph->weights.size(); ++i) {
      const ir::WeightRef& ref = graph->weights[i];
      auto [it, added] = wanted.try_emplace(ref.name(), &ref, needs[i]);
      if (!added) {
        if (it->second.first->shape != ref.shape) {
          return Error::make(ErrorKind::kShape, "weight {} is {} in one graph and {} in another", ref.name(),
                             shape_string(it->second.first->shape), shape_string(ref.shape));
        }
        it->second.second.values |= needs[i].values;
        it->second.second.packed |= needs[i].packed;
        uint32_t& bits = it->second.second.code_bits;
        if (bits != 0 && needs[i].code_bits != 0 && bits != needs[i].code_bits) {
          return Error::make(ErrorKind::kInvalidArgument, "weight {} is used as {}-bit codes in one graph and {} in "
                             "another", ref.name(), bits, needs[i].code_bits);
        }
        bits = std::max(bits, needs[i].code_bits);
        if (it->second.first->codes != ref.codes) {
          return Error::make(ErrorKind::kInvalidArgument, "weight {} is quantized codes in one graph only", ref.name());
        }
      }
    }
  }
  auto weights = std::make_unique<CpuWeights>();
  for (const auto& [name, entry] : wanted) {
    const auto& [ref, needs] = entry;
    if (ref->parts.empty() || ref->shape.empty()) {
      return Error::make(ErrorKind::kInternal, "weight '{}' names no tensor or has no dims", name);
    }
    CpuTensor t;
    t.shape = ref->shape;
    if (ref->codes && needs.code_bits == 0) {  // declared by a graph that multiplies by other weights only
      weights->tensors.emplace(name, std::move(t));
      continue;
    }
    TANDEM_ASSIGN(std::vector<float> values, stack_parts(source, *ref, needs.code_bits, t.codes));
    if (needs.packed) {
      if (ref->shape.size() != 2) {
        return Error::make(ErrorKind::kShape, "GEMM weight {} is {}, expected 2 dims", name, shape_string(ref->shape));
      }
      t.packed = PackedMatrix::pack(values.data(), static_cast<uint32_t>(ref->shape[0]),
                                    static_cast<uint32_t>(ref->shape[1]));
    }
    if (needs.values) t.values = std::move(values);
    weights->tensors.emplace(name, std::move(t));
  }
  return weights;
}

}  // namespace tandem::cpu
