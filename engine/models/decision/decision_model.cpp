// Loading a Laya-compat DecisionModel (scorer.md §1): configs, every checkpoint tensor checked by name
// and shape against the graph the configs describe (all problems in one error), the temperature buffer
// and the special token ids.
#include "engine/models/decision/decision_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/models/decision/compat_graph_impl.h"

namespace tandem::models::decision {
namespace {

// ModernBERT configs carry no mask id; its tokenizer's [MASK] is 50284 in the 50,368-token vocabulary
// (scorer.md §1, from a third-party port).
constexpr uint32_t kModernBertVocab = 50368;
constexpr uint32_t kModernBertMask = 50284;
constexpr const char* kTemperature = "temperature";

std::string shape_or_none(const std::vector<uint64_t>* shape) { return shape ? shape_string(*shape) : "none"; }

// Every tensor of `source` against the graph's weights plus the temperature buffer: missing, extra and
// misshaped tensors, one line each with the expected and the actual shape.
Status check_tensors(const ir::Graph& graph, const WeightSource& source) {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> expected;
  for (const ir::WeightRef& w : graph.weights) expected.emplace_back(w.name(), w.shape);
  expected.emplace_back(kTemperature, std::vector<uint64_t>{3});
  std::set<std::string> names;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected) {
    names.insert(name);
    if (!source.contains(name)) {
      problems.push_back(fmt::format("missing {}: expected {}, found none", name, shape_string(shape)));
      continue;
    }
    Result<TensorView> t = source.tensor(name);
    if (!t.ok()) {
      problems.push_back(fmt::format("unreadable {}: {}", name, t.error().message()));
    } else if (t->shape != shape) {
      problems.push_back(fmt::format("misshaped {}: expected {}, found {}", name, shape_string(shape),
                                     shape_string(t->shape)));
    }
  }
  for (const std::string& name : source.names()) {
    if (names.count(name)) continue;
    Result<TensorView> t = source.tensor(name);
    problems.push_back(fmt::format("extra {}: expected none, found {}", name,
                                   shape_or_none(t.ok() ? &t->shape : nullptr)));
  }
  if (problems.empty()) return {};
  return Error::make(ErrorKind::kShape, "the checkpoint does not match its configs ({} problem{}):\n  {}",
                     problems.size(), problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  "));
}

// The id of the [MASK] (or <mask>) added token of `dir`/tokenizer/tokenizer.json, if the file names one.
std::optional<uint32_t> tokenizer_mask_id(const std::string& dir) {
  const std::string path = dir + "/tokenizer/tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  Result<nlohmann::json> j = io::read_json_file(path);
  if (!j.ok() || !j->is_object()) return std::nullopt;
  const auto added = j->find("added_tokens");
  if (added == j->end() || !added->is_array()) return std::nullopt;
  for (const nlohmann::json& t : *added) {
    if (!t.is_object()) continue;
    const auto content = t.find("content");
    const auto id = t.find("id");
    if (content == t.end() || id == t.end() || !content->is_string() || !id->is_number_unsigned()) continue;
    const std::string& text = content->get_ref<const std::string&>();
    if (text == "[MASK]" || text == "<mask>") return id->get<uint32_t>();
  }
  return std::nullopt;
}

Result<SpecialTokens> special_tokens(const io::ModernBertConfig& enc) {
  SpecialTokens s{enc.cls_token_id, enc.sep_token_id, enc.pad_token_id, 0};
  if (enc.mask_token_id) {
    s.mask = *enc.mask_token_id;
  } else if (enc.vocab_size == kModernBertVocab) {
    s.mask = kModernBertMask;
  } else {
    return Error::make(ErrorKind::kNotFound,
                       "encoder/config.json has no mask_token_id, the tokenizer names no [MASK] token, and "
                       "vocab_size {} is not ModernBERT's {} (whose [MASK] is {}): add mask_token_id",
                       enc.vocab_size, kModernBertVocab, kModernBertMask);
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<DecisionModel>> DecisionModel::load(const std::string& dir) {
  const std::string where = fmt::format("loading decision model {}", dir);
  auto encoder = io::load_modernbert_config(dir + "/encoder/config.json");
  if (!encoder.ok()) return std::move(encoder).error().context(where);
  auto laya = io::load_laya_config(dir + "/rl_agent_config.json");
  if (!laya.ok()) return std::move(laya).error().context(where);
  auto weights = io::Checkpoint::open_dir(dir);
  if (!weights.ok()) return std::move(weights).error().context(where);
  if (!encoder->mask_token_id && encoder->vocab_size != kModernBertVocab) {
    if (auto mask = tokenizer_mask_id(dir); mask && *mask < encoder->vocab_size) encoder->mask_token_id = mask;
  }
  auto model = from_parts(std::move(weights).value(), std::move(encoder).value(), std::move(laya).value());
  if (!model.ok()) return std::move(model).error().context(where);
  (*model)->dir_ = dir;
  return model;
}

Result<std::unique_ptr<DecisionModel>> DecisionModel::from_parts(std::unique_ptr<WeightSource> weights,
                                                                 io::ModernBertConfig encoder,
                                                                 io::LayaAgentConfig laya) {
  TANDEM_ASSIGN(ir::Graph graph, build_compat_graph(encoder, laya));
  TANDEM_TRY(check_tensors(graph, *weights));
  TANDEM_ASSIGN(SpecialTokens special, special_tokens(encoder));
  TANDEM_ASSIGN(TensorView t, weights->tensor(kTemperature));
  const std::vector<float> temperature = t.to_f32();
  std::unique_ptr<DecisionModel> model(new DecisionModel());
  for (size_t i = 0; i < 3; ++i) {
    if (!(temperature[i] > 0.0f) || !std::isfinite(temperature[i])) {
      return Error::make(ErrorKind::kFormat, "tensor temperature[{}] = {} is not a positive temperature", i,
                         temperature[i]);
    }
    model->temperature_[i] = temperature[i];
  }
  model->weights_ = std::move(weights);
  model->encoder_ = std::move(encoder);
  model->laya_ = std::move(laya);
  model->special_ = special;
  model->graph_ = std::move(graph);
  return model;
}

ir::BatchLimits DecisionModel::batch_limits() const {
  ir::BatchLimits limits;
  limits.vocab = encoder_.vocab_size;
  limits.qtypes = 3;
  return limits;
}

uint32_t DecisionModel::max_sequence_tokens() const {
  return std::min(laya_.max_len, encoder_.max_position_embeddings);
}

std::string DecisionModel::max_sequence_source() const {
  return fmt::format("max_len {} in rl_agent_config.json, max_position_embeddings {} in encoder/config.json",
                     laya_.max_len, encoder_.max_position_embeddings);
}

std::vector<float> DecisionModel::probabilities(uint8_t qtype, std::span<const float> logits) const {
  const uint32_t k = static_cast<uint32_t>(logits.size());
  if (qtype == kNoul && k == 1) return {calibrate_statement(logits[0], temperature(qtype, k))};
  return calibrate(logits, temperature(qtype, k));
}

float DecisionModel::temperature(uint8_t qtype, uint32_t options) const {
  if (qtype >= temperature_.size()) return 1.0f;
  const auto& by_options = laya_.temperature_by_options[qtype];
  if (const auto it = by_options.find(options); it != by_options.end()) return it->second;
  return temperature_[qtype];
}

}  // namespace tandem::models::decision
