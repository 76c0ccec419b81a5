// ChatTemplate: a Hugging Face chat template (tokenizer_config.json's `chat_template`) rendered exactly as
// transformers' apply_chat_template renders it (Jinja2 with trim_blocks and lstrip_blocks, HF's tojson
// and raise_exception), for the subset of Jinja2 that chat templates use. Debian has no Jinja2 for C++,
// so this is tandem's own; a template with anything outside the subset is refused by parse(), naming it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"

namespace tandem::coordinator {

namespace jinja {
struct Node;
}  // namespace jinja

class ChatTemplate {
 public:
  // Refuses (kUnsupported) a statement, filter, test, method or function it does not implement, and
  // malformed syntax, with the template line: "line 3: the filter 'selectattr' is not supported".
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders with the variables of `context` (a JSON object: messages, add_generation_prompt, bos_token,
  // ...). A template's raise_exception() is kInvalidArgument with its message; a value this renderer
  // cannot reproduce exactly (printing a list, lower() of non-ASCII text) is kUnsupported. Never a
  // partial or approximate rendering.
  Result<std::string> render(const nlohmann::ordered_json& context) const;

 private:
  struct Program;
  std::shared_ptr<const Program> program_;
};

}  // namespace tandem::coordinator
