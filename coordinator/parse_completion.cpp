// /v1/completions and /v1/chat/completions bodies (parse_completion.h). Optional fields may be null
// (as some OpenAI clients send them) and then take their defaults; required ones may not.
#include "coordinator/parse_completion.h"

#include <initializer_list>

#include <fmt/format.h>

#include "coordinator/json_body_impl.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

// The value under `key` unless absent or null.
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> read_bool(const json& obj, const char* key, bool& out) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(key, *v, "a boolean");
  out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& obj, const char* key, std::optional<std::string>& out) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return wrong_type(key, *v, "a string");
  out = v->get<std::string>();
  return std::nullopt;
}

// A number within [lo, hi], or (lo, hi] when `open_low`.
std::optional<ApiError> read_number(const json& obj, const char* key, double lo, double hi, bool open_low, float& out) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, *v, "a number");
  const double d = v->get<double>();
  if (d > hi || d < lo || (open_low && d == lo)) {
    return bad_request(fmt::format("{} = {} is outside {}{}, {}]", key, json_shown(*v), open_low ? "(" : "[", lo, hi),
                       std::string(key));
  }
  out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> read_max_tokens(const json& obj, const char* key, const CompletionLimits& limits,
                                        std::optional<uint32_t>& out) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return wrong_type(key, *v, "an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > limits.max_context) {
    return unprocessable(fmt::format("{} = {} exceeds the model's context of {} tokens (max_context)", key,
                                     json_shown(*v), limits.max_context),
                         std::string(key));
  }
  if (!v->is_number_unsigned() || v->get<uint64_t>() < 1) {
    return bad_request(fmt::format("{} = {} must be at least 1", key, json_shown(*v)), std::string(key));
  }
  out = static_cast<uint32_t>(v->get<uint64_t>());
  return std::nullopt;
}

// Token ids below the vocabulary, at `path`.
ApiResult<std::vector<uint32_t>> token_ids(const json& j, const std::string& path, uint32_t vocab) {
  if (!j.is_array()) return wrong_type(path, j, "an array of token ids");
  std::vector<uint32_t> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& v = j[i];
    if (!v.is_number_integer()) return wrong_type(at(path, i), v, "a token id (an integer)");
    if (!v.is_number_unsigned() || v.get<uint64_t>() >= vocab) {
      return bad_request(fmt::format("{} = {} is not a token id: the vocabulary has {} (0..{})", at(path, i),
                                     json_shown(v), vocab, vocab - 1),
                         at(path, i));
    }
    out.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
  }
  return out;
}

// A sampling control tandem does not implement, accepted only at a value that turns it off (clients and
// benchmark scripts send vLLM's and OpenAI's neutral defaults explicitly); any other value is refused, never
// ignored.
std::optional<ApiError> read_off(const json& obj, const char* key, std::initializer_list<double> off,
                                 const char* off_said) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, *v, "a number");
  for (const double o : off) {
    if (v->get<double>() == o) return std::nullopt;
  }
  return bad_request(fmt::format("{} = {} is not supported (only {}: tandem samples with temperature and top_p)",
                                 key, json_shown(*v), off_said),
                     std::string(key));
}

// The fields both endpoints share.
std::optional<ApiError> read_common(const json& j, const CompletionLimits& limits, CompletionRequest& r) {
  if (auto e = read_string(j, "model", r.model)) return e;
  if (auto e = read_string(j, "user", r.user)) return e;
  if (auto e = read_number(j, "temperature", 0, 2, false, r.temperature)) return e;
  if (auto e = read_number(j, "top_p", 0, 1, true, r.top_p)) return e;
  if (auto e = read_off(j, "top_k", {-1, 0}, "-1 or 0")) return e;
  if (auto e = read_off(j, "min_p", {0}, "0")) return e;
  if (auto e = read_off(j, "presence_penalty", {0}, "0")) return e;
  if (auto e = read_off(j, "frequency_penalty", {0}, "0")) return e;
  if (auto e = read_off(j, "repetition_penalty", {1}, "1")) return e;
  if (const json* v = field(j, "seed")) {
    if (!v->is_number_integer()) return wrong_type("seed", *v, "an integer");
    if (!v->is_number_unsigned()) {
      return bad_request(fmt::format("seed = {} is negative; a seed is an integer in 0..2^64-1", json_shown(*v)),
                         "seed");
    }
    r.seed = v->get<uint64_t>();
  }
  if (const json* v = field(j, "n")) {
    if (!v->is_number_integer()) return wrong_type("n", *v, "an integer");
    if (!v->is_number_unsigned() || v->get<uint64_t>() != 1) {
      return bad_request(fmt::format("n = {} is not supported: one choice per request (n = 1)", json_shown(*v)), "n");
    }
  }
  if (const json* v = field(j, "logprobs")) {
    if (!(v->is_boolean() && !v->get<bool>())) {
      return bad_request(fmt::format("logprobs = {} is not supported (only null or false)", json_shown(*v)),
                         "logprobs");
    }
  }
  if (const json* v = field(j, "stop")) {
    if (v->is_string()) {
      if (v->get<std::string>().empty()) return bad_request("stop is an empty string", "stop");
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > 4) {
        return bad_request(fmt::format("stop has {} sequences; at most 4 are allowed", v->size()), "stop");
      }
      for (size_t i = 0; i < v->size(); ++i) {
        const json& s = (*v)[i];
        if (!s.is_string()) return wrong_type(at("stop", i), s, "a string");
        if (s.get<std::string>().empty()) return bad_request(fmt::format("stop[{}] is an empty string", i), at("stop", i));
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return wrong_type("stop", *v, "a string or an array of up to 4 strings");
    }
  }
  if (const json* v = field(j, "stop_token_ids")) {
    auto ids = token_ids(*v, "stop_token_ids", limits.vocab);
    if (!ids.ok()) return ids.error();
    r.stop_token_ids = std::move(ids.value());
  }
  if (auto e = read_bool(j, "stream", r.stream)) return e;
  if (const json* v = field(j, "stream_options")) {
    if (!r.stream) return bad_request("stream_options is only allowed when stream is true", "stream_options");
    if (!v->is_object()) return wrong_type("stream_options", *v, "an object");
    if (auto e = check_keys(*v, "stream_options", {"include_usage"})) return e;
    if (const json* u = field(*v, "include_usage")) {
      if (!u->is_boolean()) return wrong_type("stream_options.include_usage", *u, "a boolean");
      r.include_usage = u->get<bool>();
    }
  }
  if (auto e = read_bool(j, "return_token_ids", r.return_token_ids)) return e;
  if (auto e = read_bool(j, "ignore_eos", r.ignore_eos)) return e;
  if (auto e = read_bool(j, "speculative", r.speculative)) return e;
  return std::nullopt;
}

std::optional<ApiError> read_prompt(const json& j, const CompletionLimits& limits, CompletionRequest& r) {
  auto it = j.find("prompt");
  if (it == j.end()) return bad_request("prompt is required", std::string("prompt"));
  const json& p = *it;
  const char* expected = "a string, an array of token ids, or an array with one of either";
  if (p.is_string()) {
    if (p.get<std::string>().empty()) return bad_request("prompt is empty", std::string("prompt"));
    r.prompt_text = p.get<std::string>();
    return std::nullopt;
  }
  if (!p.is_array()) return wrong_type("prompt", p, expected);
  if (p.empty()) return bad_request("prompt is empty", std::string("prompt"));
  if (p[0].is_string() || p[0].is_array()) {
    if (p.size() > 1) {
      return bad_request(fmt::format("prompt holds {} prompts; batched prompts are not supported (send one per "
                                     "request)",
                                     p.size()),
                         std::string("prompt"));
    }
    if (p[0].is_string()) {
      if (p[0].get<std::string>().empty()) return bad_request("prompt[0] is empty", std::string("prompt[0]"));
      r.prompt_text = p[0].get<std::string>();
      return std::nullopt;
    }
    if (p[0].empty()) return bad_request("prompt[0] is empty", std::string("prompt[0]"));
    auto ids = token_ids(p[0], "prompt[0]", limits.vocab);
    if (!ids.ok()) return ids.error();
    r.prompt_ids = std::move(ids.value());
    return std::nullopt;
  }
  auto ids = token_ids(p, "prompt", limits.vocab);
  if (!ids.ok()) return ids.error();
  r.prompt_ids = std::move(ids.value());
  return std::nullopt;
}

ApiResult<ChatMessage> message_of(const json& m, const std::string& path) {
  if (!m.is_object()) return wrong_type(path, m, "an object with role and content");
  if (auto e = check_keys(m, path, {"role", "content", "name"})) return *e;
  ChatMessage out;
  auto role = m.find("role");
  if (role == m.end()) return bad_request(fmt::format("{} is required", at(path, "role")), at(path, "role"));
  if (!role->is_string()) return wrong_type(at(path, "role"), *role, "a string");
  out.role = role->get<std::string>();
  if (out.role != "system" && out.role != "user" && out.role != "assistant") {
    return bad_request(fmt::format("{} = {} is not supported; allowed: \"system\", \"user\", \"assistant\"",
                                   at(path, "role"), json_shown(*role)),
                       at(path, "role"));
  }
  auto content = m.find("content");
  const std::string cpath = at(path, "content");
  if (content == m.end()) return bad_request(fmt::format("{} is required", cpath), cpath);
  if (content->is_string()) {
    out.content = content->get<std::string>();
  } else if (content->is_array()) {
    for (size_t i = 0; i < content->size(); ++i) {
      const json& part = (*content)[i];
      const std::string ppath = at(cpath, i);
      if (!part.is_object()) return wrong_type(ppath, part, "an object with type and text");
      auto type = part.find("type");
      if (type == part.end() || !type->is_string()) {
        return bad_request(fmt::format("{} must be a string", at(ppath, "type")), at(ppath, "type"));
      }
      if (*type != "text") {
        return bad_request(fmt::format("{} = {} is not supported; only text parts are", at(ppath, "type"),
                                       json_shown(*type)),
                           at(ppath, "type"));
      }
      if (auto e = check_keys(part, ppath, {"type", "text"})) return *e;
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) {
        return bad_request(fmt::format("{} must be a string", at(ppath, "text")), at(ppath, "text"));
      }
      if (i > 0) out.content += '\n';
      out.content += text->get<std::string>();
    }
  } else {
    return wrong_type(cpath, *content, "a string or an array of text parts");
  }
  if (auto name = m.find("name"); name != m.end()) {
    if (!name->is_string()) return wrong_type(at(path, "name"), *name, "a string");
    out.name = name->get<std::string>();
  }
  return out;
}

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(std::string_view body, const CompletionLimits& limits) {
  auto parsed = parse_json_object(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  if (auto e = check_keys(j, "", {"model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop",
                                  "stop_token_ids", "stream", "stream_options", "return_token_ids", "n", "user",
                                  "logprobs", "speculative", "ignore_eos", "top_k", "min_p", "presence_penalty",
                                  "frequency_penalty", "repetition_penalty"})) {
    return *e;
  }
  CompletionRequest r;
  if (auto e = read_prompt(j, limits, r)) return *e;
  if (auto e = read_max_tokens(j, "max_tokens", limits, r.max_tokens)) return *e;
  if (auto e = read_common(j, limits, r)) return *e;
  return r;
}

ApiResult<CompletionRequest> parse_chat_request(std::string_view body, const CompletionLimits& limits) {
  auto parsed = parse_json_object(body);
  if (!parsed.ok()) return parsed.error();
  const json& j = parsed.value();
  if (auto e = check_keys(j, "", {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                                  "seed", "stop", "stop_token_ids", "stream", "stream_options", "return_token_ids",
                                  "n", "user", "logprobs", "speculative", "chat_template_kwargs", "ignore_eos",
                                  "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"})) {
    return *e;
  }
  CompletionRequest r;
  r.chat = true;
  auto messages = j.find("messages");
  if (messages == j.end()) return bad_request("messages is required", std::string("messages"));
  if (!messages->is_array()) return wrong_type("messages", *messages, "an array of messages");
  if (messages->empty()) return bad_request("messages is empty", std::string("messages"));
  for (size_t i = 0; i < messages->size(); ++i) {
    auto m = message_of((*messages)[i], at("messages", i));
    if (!m.ok()) return m.error();
    r.messages.push_back(std::move(m.value()));
  }
  if (field(j, "max_tokens") && field(j, "max_completion_tokens")) {
    return bad_request("give max_tokens or max_completion_tokens, not both", std::string("max_completion_tokens"));
  }
  if (auto e = read_max_tokens(j, "max_tokens", limits, r.max_tokens)) return *e;
  if (auto e = read_max_tokens(j, "max_completion_tokens", limits, r.max_tokens)) return *e;
  if (field(j, "max_completion_tokens")) r.max_tokens_field = "max_completion_tokens";
  if (const json* k = field(j, "chat_template_kwargs")) {
    if (!k->is_object()) return wrong_type("chat_template_kwargs", *k, "an object");
    for (const char* reserved : {"messages", "add_generation_prompt", "tools", "documents"}) {
      if (k->contains(reserved)) {
        return bad_request(fmt::format("chat_template_kwargs.{} is set by the server", reserved),
                           at("chat_template_kwargs", std::string_view(reserved)));
      }
    }
    r.template_kwargs = nlohmann::ordered_json::parse(k->dump());
  }
  if (auto e = read_common(j, limits, r)) return *e;
  return r;
}

}  // namespace tandem::coordinator
