// Request body parsing (parse_request.h) with nlohmann::json through its SAX interface, so no exception
// is raised at all and a parse failure names its field. Unknown fields are errors, not ignored: a typo
// must not silently change an answer.
#include "coordinator/parse_request.h"

#include <nlohmann/json.hpp>

#include <array>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "coordinator/json_body_impl.h"
#include "engine/io/laya_config.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

ApiResult<std::optional<std::string>> optional_string(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return std::optional<std::string>();
  if (!it->is_string()) return wrong_type(key, *it, "a string");
  return std::optional<std::string>(it->get<std::string>());
}

// A list of integers in [0, bound); `what` says what the bound is in the message.
ApiResult<std::vector<uint32_t>> uint_list(const json& j, const std::string& path, uint64_t bound,
                                           const std::string& what) {
  if (!j.is_array()) return wrong_type(path, j, "an array of integers");
  std::vector<uint32_t> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const json& v = j[i];
    if (!v.is_number_integer()) return wrong_type(at(path, i), v, "an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() < bound) {
      out.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
      continue;
    }
    return bad_request(fmt::format("{} = {} is outside {}", at(path, i), json_shown(v), what), at(path, i));
  }
  return out;
}

ApiResult<uint8_t> qtype_of(const json& j, const std::string& path) {
  int q = -1;
  if (j.is_string()) q = question_type(j.get<std::string>());
  if (j.is_number_unsigned() && j.get<uint64_t>() < io::kQuestionTypes.size()) q = static_cast<int>(j.get<uint64_t>());
  if (q < 0) {
    return bad_request(fmt::format("{} = {} is not a question type; allowed: \"choice\", \"score\", \"noul\" (or 0, 1, 2)",
                                   path, json_shown(j)),
                       path);
  }
  return static_cast<uint8_t>(q);
}

ApiResult<SequenceInput> sequence_of(const json& j, const std::string& path, const RequestLimits& limits) {
  if (!j.is_object()) return wrong_type(path, j, "an object with ids, markers and qtype");
  if (auto e = check_keys(j, path, {"ids", "markers", "qtype"})) return *e;
  for (const char* key : {"ids", "markers", "qtype"}) {
    if (!j.contains(key)) return bad_request(fmt::format("{} is required", at(path, key)), at(path, key));
  }
  SequenceInput s;
  auto ids = uint_list(j["ids"], at(path, "ids"), limits.vocab,
                       fmt::format("the vocabulary of {} tokens", limits.vocab));
  if (!ids.ok()) return ids.error();
  s.ids = std::move(ids.value());
  if (limits.max_model_tokens != 0 && s.ids.size() > limits.max_model_tokens) {
    return unprocessable(fmt::format("{} has {} tokens; the model takes at most {} ({})", at(path, "ids"),
                                     s.ids.size(), limits.max_model_tokens, limits.model_limit),
                         at(path, "ids"));
  }
  if (s.ids.size() > limits.max_sequence_tokens) {
    return unprocessable(fmt::format("{} has {} tokens; a sequence may have at most {}", at(path, "ids"), s.ids.size(),
                                     limits.max_sequence_tokens),
                         at(path, "ids"));
  }
  auto markers = uint_list(j["markers"], at(path, "markers"), s.ids.size(),
                           fmt::format("the sequence of {} tokens", s.ids.size()));
  if (!markers.ok()) return markers.error();
  s.markers = std::move(markers.value());
  if (s.markers.size() > limits.max_sequence_markers) {
    return unprocessable(fmt::format("{} has {} markers; a sequence may have at most {}", at(path, "markers"),
                                     s.markers.size(), limits.max_sequence_markers),
                         at(path, "markers"));
  }
  auto q = qtype_of(j["qtype"], at(path, "qtype"));
  if (!q.ok()) return q.error();
  s.qtype = q.value();
  return s;
}

ApiResult<Question> question_of(const json& j, const std::string& path, size_t index, const RequestLimits& limits) {
  if (!j.is_object()) return wrong_type(path, j, "an object with qtype, question and options");
  if (auto e = check_keys(j, path, {"id", "qtype", "question", "options"})) return *e;
  for (const char* key : {"qtype", "question", "options"}) {
    if (!j.contains(key)) return bad_request(fmt::format("{} is required", at(path, key)), at(path, key));
  }
  Question q;
  q.id = fmt::format("q{}", index);
  if (j.contains("id")) {
    if (!j["id"].is_string()) return wrong_type(at(path, "id"), j["id"], "a string");
    q.id = j["id"].get<std::string>();
  }
  auto t = qtype_of(j["qtype"], at(path, "qtype"));
  if (!t.ok()) return t.error();
  q.qtype = t.value();
  if (!j["question"].is_string()) return wrong_type(at(path, "question"), j["question"], "a string");
  q.question = j["question"].get<std::string>();
  const json& opts = j["options"];
  const std::string opath = at(path, "options");
  if (!opts.is_array()) return wrong_type(opath, opts, "an array of strings");
  if (opts.empty()) return bad_request(fmt::format("{} is empty; a question needs at least one option", opath), opath);
  if (opts.size() > limits.max_options) {
    return too_large(fmt::format("{} has {} options; at most {} are allowed (limits.max_options)", opath, opts.size(),
                                 limits.max_options),
                     opath);
  }
  for (size_t i = 0; i < opts.size(); ++i) {
    if (!opts[i].is_string()) return wrong_type(at(opath, i), opts[i], "a string");
    q.options.push_back(opts[i].get<std::string>());
  }
  return q;
}

// The list under `key`: present, an array, 1..max entries.
ApiResult<const json*> list_of(const json& body, const char* key, uint32_t max, const char* limit_name) {
  auto it = body.find(key);
  if (it == body.end()) return bad_request(fmt::format("{} is required", key), std::string(key));
  if (!it->is_array()) return wrong_type(key, *it, "an array");
  if (it->empty()) return bad_request(fmt::format("{} is empty", key), std::string(key));
  if (it->size() > max) {
    return too_large(fmt::format("{} has {} entries; at most {} are allowed ({})", key, it->size(), max, limit_name),
                     std::string(key));
  }
  return &*it;
}

}  // namespace

int question_type(std::string_view name) {
  for (size_t i = 0; i < io::kQuestionTypes.size(); ++i) {
    if (name == io::kQuestionTypes[i]) return static_cast<int>(i);
  }
  return -1;
}

ApiResult<ScoreRequest> parse_score_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_json_object(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  if (auto e = check_keys(j, "", {"model", "sequences"})) return *e;
  ScoreRequest r;
  auto model = optional_string(j, "model");
  if (!model.ok()) return model.error();
  r.model = model.value();
  auto list = list_of(j, "sequences", limits.max_sequences, "limits.max_sequences");
  if (!list.ok()) return list.error();
  uint64_t tokens = 0;
  for (size_t i = 0; i < list.value()->size(); ++i) {
    auto s = sequence_of((*list.value())[i], at("sequences", i), limits);
    if (!s.ok()) return s.error();
    tokens += s.value().ids.size();
    r.sequences.push_back(std::move(s.value()));
  }
  if (tokens > limits.max_request_tokens) {
    return too_large(fmt::format("the sequences hold {} tokens; a request may have at most {} "
                                 "(limits.max_request_tokens)",
                                 tokens, limits.max_request_tokens),
                     "sequences");
  }
  return r;
}

ApiResult<DecideRequest> parse_decide_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_json_object(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  if (auto e = check_keys(j, "", {"model", "state", "questions"})) return *e;
  DecideRequest r;
  auto model = optional_string(j, "model");
  if (!model.ok()) return model.error();
  r.model = model.value();
  auto state = j.find("state");
  if (state == j.end()) return bad_request("state is required", "state");
  if (!state->is_string()) return wrong_type("state", *state, "a string");
  r.state = state->get<std::string>();
  auto list = list_of(j, "questions", limits.max_questions, "limits.max_questions");
  if (!list.ok()) return list.error();
  for (size_t i = 0; i < list.value()->size(); ++i) {
    auto q = question_of((*list.value())[i], at("questions", i), i, limits);
    if (!q.ok()) return q.error();
    r.questions.push_back(std::move(q.value()));
  }
  return r;
}

}  // namespace tandem::coordinator
