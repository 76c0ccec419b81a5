// Completion answer bodies and stream events (completion_answer.h).
#include "coordinator/completion_answer.h"

#include <nlohmann/json.hpp>

namespace tandem::coordinator {
namespace {

using nlohmann::ordered_json;

std::string dumped(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

std::string event(const ordered_json& j) { return "data: " + dumped(j) + "\n\n"; }

ordered_json finish_json(const char* reason) { return reason ? ordered_json(reason) : ordered_json(nullptr); }

ordered_json usage_json(const AnswerUsage& u) {
  const SpeculativeStats& s = u.stats;
  // Tokens a round committed on average: its accepted drafts and the target's own one.
  const double mean = s.rounds ? 1.0 + static_cast<double>(s.accepted) / s.rounds : 0.0;
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"speculative",
           {{"rounds", s.rounds},
            {"drafted_tokens", s.drafted},
            {"accepted_tokens", s.accepted},
            {"mean_acceptance_length", mean}}}};
}

ordered_json head(const AnswerIdentity& who, const char* object) {
  return {{"id", who.id}, {"object", object}, {"created", who.created}, {"model", who.model}};
}

}  // namespace

std::string completion_body(const AnswerIdentity& who, const std::string& text, const char* finish_reason,
                            const std::vector<uint32_t>* token_ids, const std::vector<uint32_t>* prompt_ids,
                            const AnswerUsage& usage) {
  ordered_json j = head(who, who.chat ? "chat.completion" : "text_completion");
  ordered_json choice = {{"index", 0}};
  if (who.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["finish_reason"] = finish_json(finish_reason);
  if (token_ids) choice["token_ids"] = *token_ids;
  j["choices"] = ordered_json::array({std::move(choice)});
  if (prompt_ids) j["prompt_token_ids"] = *prompt_ids;
  j["usage"] = usage_json(usage);
  return dumped(j);
}

std::string chunk_event(const AnswerIdentity& who, const std::string& text, const char* finish_reason,
                        const std::vector<uint32_t>* token_ids, bool role) {
  ordered_json j = head(who, who.chat ? "chat.completion.chunk" : "text_completion");
  ordered_json choice = {{"index", 0}};
  if (who.chat) {
    ordered_json delta = ordered_json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["finish_reason"] = finish_json(finish_reason);
  if (token_ids) choice["token_ids"] = *token_ids;
  j["choices"] = ordered_json::array({std::move(choice)});
  return event(j);
}

std::string usage_event(const AnswerIdentity& who, const AnswerUsage& usage) {
  ordered_json j = head(who, who.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = ordered_json::array();
  j["usage"] = usage_json(usage);
  return event(j);
}

std::string error_event(const ApiError& e) {
  ordered_json j;
  j["error"] = {{"message", e.message},
                {"type", e.type},
                {"param", e.param ? ordered_json(*e.param) : ordered_json(nullptr)},
                {"code", e.status}};
  return event(j);
}

}  // namespace tandem::coordinator
