// libFuzzer target: a /v1/completions or /v1/chat/completions body from the network. Both parsers run
// on every input; a chat body they accept is rendered through the shipped pylm ChatML template and
// Qwen3's, as GenerationApi would. Nothing may crash, hang or trip ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coordinator/chat_template.h"
#include "coordinator/parse_completion.h"

namespace {

using nlohmann::ordered_json;
using tandem::coordinator::ChatTemplate;

const ChatTemplate& chatml() {
  static const ChatTemplate t =
      ChatTemplate::parse(
          "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
          "{%- endif %}")
          .value();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);  // NOLINT: bytes as text
  const tandem::coordinator::CompletionLimits limits{6144, 1024};
  (void)tandem::coordinator::parse_completion_request(body, limits);
  auto chat = tandem::coordinator::parse_chat_request(body, limits);
  if (!chat.ok()) return 0;
  ordered_json messages = ordered_json::array();
  for (const auto& m : chat.value().messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  ordered_json context = {{"messages", std::move(messages)}, {"add_generation_prompt", true}};
  for (auto it = chat.value().template_kwargs.begin(); it != chat.value().template_kwargs.end(); ++it) {
    context[it.key()] = it.value();
  }
  (void)chatml().render(context);
  return 0;
}
