// `tandem score`: one decision model on the sequences of a JSON file, printed as JSON with logits, act
// values, calibrated probabilities and picks (scorer.md §1). Input errors name the field at fault
// (`sequences[3].markers[1]`) on stderr and exit non-zero.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"
#include "engine/io/laya_config.h"
#include "engine/backends/backend_factory.h"
#include "engine/models/decision/decision_model.h"
#include "launch/commands.h"

namespace tandem::launch {
namespace {

using nlohmann::json;
using Printed = nlohmann::ordered_json;  // keys print in the order the format lists them
using models::decision::DecisionModel;
using models::decision::Scorer;

// Batches stay within this many tokens unless one sequence alone needs more: past a few hundred rows
// the CPU's GEMMs gain nothing, and smaller plans need less memory.
constexpr uint32_t kBatchTokens = 512;

struct ScoreOptions {
  std::string model;
  std::string input;
  std::string backend = "cpu";
  std::string precision = "f32";
  size_t threads = 0;
  int device = 0;
};

struct Question {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> markers;
  uint8_t qtype = 0;
};

Error field_error(const std::string& field, const std::string& problem) {
  return Error(ErrorKind::kInvalidArgument, fmt::format("{}: {}", field, problem));
}

// A list of integers below `limit`; `what` names the list and `range` the limit ("the vocabulary").
Result<std::vector<uint32_t>> parse_ids(const json& v, const std::string& field, uint64_t limit, const char* what,
                                        const char* range) {
  if (!v.is_array()) return field_error(field, fmt::format("expected a list of {}", what));
  std::vector<uint32_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", field, i);
    if (!v[i].is_number_unsigned()) {
      return field_error(at, fmt::format("{} is not a non-negative integer", v[i].dump()));
    }
    const uint64_t x = v[i].get<uint64_t>();
    if (x >= limit) return field_error(at, fmt::format("{} is outside {} of {} tokens", x, range, limit));
    out.push_back(static_cast<uint32_t>(x));
  }
  return out;
}

Result<uint8_t> parse_qtype(const json& v, const std::string& field) {
  for (uint8_t t = 0; t < io::kQuestionTypes.size(); ++t) {
    if ((v.is_string() && v.get_ref<const std::string&>() == io::kQuestionTypes[t]) ||
        (v.is_number_unsigned() && v.get<uint64_t>() == t)) {
      return t;
    }
  }
  return field_error(field, fmt::format("{} is not one of \"choice\", \"score\", \"noul\", 0, 1, 2", v.dump()));
}

Result<Question> parse_sequence(const json& s, const std::string& field, uint32_t vocab) {
  if (!s.is_object()) return field_error(field, "expected an object with ids, markers and qtype");
  for (const auto& [key, value] : s.items()) {
    if (key != "ids" && key != "markers" && key != "qtype") {
      return field_error(field + "." + key, "unknown key (a sequence has ids, markers and qtype)");
    }
  }
  for (const char* key : {"ids", "markers", "qtype"}) {
    if (!s.contains(key)) return field_error(fmt::format("{}.{}", field, key), "missing");
  }
  Question q;
  TANDEM_ASSIGN(q.ids, parse_ids(s["ids"], field + ".ids", vocab, "token ids", "the vocabulary"));
  TANDEM_ASSIGN(q.markers, parse_ids(s["markers"], field + ".markers", q.ids.size(), "token positions",
                                     "the sequence"));
  TANDEM_ASSIGN(q.qtype, parse_qtype(s["qtype"], field + ".qtype"));
  return q;
}

// The sequences of the file, checked as POST /v1/score checks them: at least one, each within the
// vocabulary and the checkpoint's length limits.
Result<std::vector<Question>> read_questions(const std::string& path, const DecisionModel& model) {
  TANDEM_ASSIGN(const json j, io::read_json_file(path));
  if (!j.is_object() || !j.contains("sequences") || !j["sequences"].is_array()) {
    return field_error(path, "expected an object whose \"sequences\" is a list");
  }
  if (j["sequences"].empty()) return field_error(path, "sequences is empty; give at least one sequence");
  std::vector<Question> out;
  for (size_t i = 0; i < j["sequences"].size(); ++i) {
    const std::string field = fmt::format("sequences[{}]", i);
    auto q = parse_sequence(j["sequences"][i], field, model.vocab());
    if (!q.ok()) return std::move(q).error().context(path);
    if (q->ids.size() > model.max_sequence_tokens()) {
      return field_error(field + ".ids", fmt::format("{} tokens; the model takes at most {} ({})", q->ids.size(),
                                                     model.max_sequence_tokens(), model.max_sequence_source()))
          .context(path);
    }
    out.push_back(std::move(q).value());
  }
  return out;
}

// Consecutive questions packed greedily into batches that a bucket of the stage holds and that stay
// within kBatchTokens; a question that no bucket holds is an error naming it.
Result<std::vector<std::pair<size_t, size_t>>> plan_batches(const std::vector<Question>& qs,
                                                            const ir::BucketTable& table) {
  const std::optional<ir::Bucket> top = table.ceiling("compat");
  if (!top) return Error(ErrorKind::kInternal, "the bucket table has no compat stage");
  std::vector<std::pair<size_t, size_t>> batches;
  size_t begin = 0;
  uint64_t tokens = 0, markers = 0;
  for (size_t i = 0; i < qs.size(); ++i) {
    const uint64_t t = qs[i].ids.size(), m = qs[i].markers.size();
    if (!top->holds(static_cast<uint32_t>(std::min<uint64_t>(t, UINT32_MAX)), 1,
                    static_cast<uint32_t>(std::min<uint64_t>(m, UINT32_MAX)))) {
      return field_error(fmt::format("sequences[{}]", i),
                         fmt::format("{} tokens and {} markers fit no bucket (the largest holds {})", t, m,
                                     ir::to_string(*top)));
    }
    const bool fits = top->holds(static_cast<uint32_t>(tokens + t), static_cast<uint32_t>(i - begin + 1),
                                 static_cast<uint32_t>(markers + m)) &&
                      tokens + t <= kBatchTokens;
    if (i > begin && !fits) {
      batches.push_back({begin, i});
      begin = i;
      tokens = markers = 0;
    }
    tokens += t;
    markers += m;
  }
  if (begin < qs.size()) batches.push_back({begin, qs.size()});
  return batches;
}

// The shortest decimal that reads back as the same float, as a JSON number.
double shortest(float x) { return std::strtod(fmt::format("{}", x).c_str(), nullptr); }

Result<Printed> score(const ScoreOptions& o) {
  TANDEM_ASSIGN(const ir::Precision precision, ir::parse_precision(o.precision));
  TANDEM_ASSIGN(auto model, DecisionModel::load(o.model));
  TANDEM_ASSIGN(const std::vector<Question> qs, read_questions(o.input, *model));
  backends::BackendOptions bo;
  bo.name = o.backend;
  bo.precision = precision;
  bo.device = o.device;
  bo.threads = o.threads;
  TANDEM_ASSIGN(auto backend, backends::make_backend(bo));
  const ir::BucketTable& table = ir::BucketTable::defaults();
  TANDEM_ASSIGN(auto scorer, Scorer::create(*model, *backend, table));
  TANDEM_ASSIGN(const auto batches, plan_batches(qs, table));

  Printed sequences = Printed::array();
  for (const auto& [begin, end] : batches) {
    ir::Batch batch;
    for (size_t i = begin; i < end; ++i) batch.add_sequence(qs[i].ids, qs[i].markers, qs[i].qtype);
    auto out = scorer->score(batch);
    if (!out.ok()) return std::move(out).error().context(fmt::format("sequences[{}..{}]", begin, end - 1));
    for (size_t i = begin; i < end; ++i) {
      const uint32_t s = static_cast<uint32_t>(i - begin);
      const std::vector<float> logits(out->logits.begin() + batch.pcu[s], out->logits.begin() + batch.pcu[s + 1]);
      const uint32_t k = static_cast<uint32_t>(logits.size());
      const std::vector<float> probs = model->probabilities(qs[i].qtype, logits);
      Printed q = {{"logits", Printed::array()},
                   {"act", {shortest(out->act[s][0]), shortest(out->act[s][1])}},
                   {"probs", Printed::array()},
                   {"pick", nullptr}};
      for (float z : logits) q["logits"].push_back(shortest(z));
      for (float p : probs) q["probs"].push_back(shortest(p));
      if (k > 0) q["pick"] = std::max_element(logits.begin(), logits.end()) - logits.begin();
      sequences.push_back(std::move(q));
    }
  }
  return Printed{{"model", o.model},
              {"backend", backend->caps().name},
              {"precision", ir::to_string(precision)},
              {"sequences", std::move(sequences)}};
}

int run_score(const ScoreOptions& o) {
  try {
    Result<Printed> out = score(o);
    if (!out.ok()) {
      std::cerr << "tandem score: " << out.error().message() << "\n";
      return 1;
    }
    std::cout << out->dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {  // allocation failures, JSON type errors: never escape the command
    std::cerr << "tandem score: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void add_score_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ScoreOptions>();
  CLI::App* cmd = app.add_subcommand("score", "Score the sequences of a JSON file with a decision model");
  cmd->add_option("--model", options->model, "Decision model directory (model.safetensors, encoder/, ...)")
      ->required();
  cmd->add_option("--input", options->input,
                  "JSON file: {\"sequences\": [{\"ids\": [..], \"markers\": [..], \"qtype\": \"choice\"}]}")
      ->required();
  cmd->add_option("--backend", options->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", options->precision, "f32 or f16 (cuda)")->check(CLI::IsMember({"f32", "f16"}));
  cmd->add_option("--threads", options->threads, "CPU threads (0: one per hardware thread)");
  cmd->add_option("--device", options->device, "CUDA device index");
  cmd->callback([options, &exit_code] { exit_code = run_score(*options); });
}

}  // namespace tandem::launch
