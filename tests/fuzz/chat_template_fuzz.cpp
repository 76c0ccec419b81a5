// libFuzzer target: a chat template (tokenizer_config.json's chat_template comes with a checkpoint),
// parsed and, when accepted, rendered with a small conversation. Refusals are fine; crashes, hangs and
// ASan/UBSan reports are not (loops and output are bounded by the renderer's own limits).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "coordinator/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::ordered_json;
  const std::string_view source(reinterpret_cast<const char*>(data), size);  // NOLINT: bytes as text
  auto t = tandem::coordinator::ChatTemplate::parse(source);
  if (!t.ok()) return 0;
  static const ordered_json context = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Hi <think>\n"}},
        {{"role", "assistant"}, {"content", "<think>\nhm\n</think>\n\nHello"}},
        {{"role", "user"}, {"content", "bye"}}}},
      {"add_generation_prompt", true},
      {"tools", nullptr},
      {"bos_token", "<s>"},
      {"eos_token", "<|endoftext|>"},
      {"enable_thinking", false}};
  (void)t.value().render(context);
  return 0;
}
