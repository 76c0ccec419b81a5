// Answer bodies (answers.h).
#include "coordinator/answers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "engine/io/laya_config.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

// The shortest decimal that reads back as the same float, as a JSON number: the printing of
// `tandem score`, so both give the same text for the same bits.
double number(float x) { return std::strtod(fmt::format("{}", x).c_str(), nullptr); }

json floats(const std::vector<float>& v) {
  json out = json::array();
  for (float f : v) out.push_back(number(f));
  return out;
}

// The first largest logit (as `tandem score` picks), or null for a sequence without markers.
json pick_of(const std::vector<float>& logits) {
  if (logits.empty()) return nullptr;
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

uint64_t input_tokens(const Job& job) {
  uint64_t n = 0;
  for (size_t i = 0; i < job.size(); ++i) n += job.sequence(i).ids.size();
  return n;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_of(const SequenceInput& s, const QuestionMeta& q, size_t index) {
  json truncated = json::array();
  if (q.question_tokens_used < q.question_tokens) truncated.push_back(fmt::format("questions[{}].question", index));
  for (size_t j = 0; j < q.option_tokens.size(); ++j) {
    if (q.option_tokens_used[j] < q.option_tokens[j]) truncated.push_back(fmt::format("questions[{}].options[{}]", index, j));
  }
  if (q.state_tokens_used < q.state_tokens) truncated.push_back("state");
  return {{"input_tokens", s.ids.size()},
          {"state_tokens", q.state_tokens},
          {"state_tokens_used", q.state_tokens_used},
          {"question_tokens", q.question_tokens},
          {"question_tokens_used", q.question_tokens_used},
          {"option_tokens", q.option_tokens},
          {"option_tokens_used", q.option_tokens_used},
          {"truncated", std::move(truncated)}};
}

}  // namespace

std::string score_answer(const DecisionFrontend& model, const Job& job) {
  json seqs = json::array();
  for (size_t i = 0; i < job.size(); ++i) {
    const SequenceResult& r = job.results()[i];
    const auto probs = model.probabilities(r.logits, job.sequence(i).qtype);
    seqs.push_back({{"logits", floats(r.logits)},
                    {"act", {number(r.act[0]), number(r.act[1])}},
                    {"probs", floats(probs)},
                    {"pick", pick_of(r.logits)}});
  }
  return dump({{"model", model.name()}, {"sequences", std::move(seqs)}, {"usage", {{"input_tokens", input_tokens(job)}}}});
}

std::string decide_answer(const DecisionFrontend& model, const Job& job, const std::vector<QuestionMeta>& questions) {
  json answers = json::array();
  for (size_t i = 0; i < job.size(); ++i) {
    const SequenceResult& r = job.results()[i];
    const SequenceInput& s = job.sequence(i);
    const QuestionMeta& q = questions[i];
    const auto probs = model.probabilities(r.logits, s.qtype);
    const json pick = pick_of(r.logits);
    answers.push_back({{"id", q.id},
                       {"qtype", io::kQuestionTypes[s.qtype]},
                       {"probabilities", floats(probs)},
                       {"pick", pick},
                       {"option", pick.is_null() ? json(nullptr) : json(q.options[pick.get<size_t>()])},
                       {"act", {number(r.act[0]), number(r.act[1])}},
                       {"logits", floats(r.logits)},
                       {"usage", usage_of(s, q, i)}});
  }
  return dump({{"model", model.name()}, {"answers", std::move(answers)}, {"usage", {{"input_tokens", input_tokens(job)}}}});
}

}  // namespace tandem::coordinator
