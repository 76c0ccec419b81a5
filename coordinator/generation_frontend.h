// GenerationFrontend: what rank 0 needs of the target checkpoint to answer /v1/completions and
// /v1/chat/completions without its weights: the tokenizer, the chat template of tokenizer_config.json
// (checked at start-up: one it cannot render is refused, naming the construct), the special tokens the
// template sees, and the end-of-sequence ids of generation_config.json and tokenizer_config.json.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/chat_template.h"
#include "coordinator/completion_types.h"
#include "engine/core/result.h"
#include "engine/io/tokenizer.h"

namespace tandem::coordinator {

class GenerationFrontend {
 public:
  // `dir` holds tokenizer_config.json and generation_config.json (both optional; the Qwen3/HF layout);
  // `tokenizer` is the tokenizer.json to open.
  static Result<std::unique_ptr<GenerationFrontend>> load(const std::string& name, const std::string& dir,
                                                          const std::string& tokenizer);
  // The same from already-open parts (tests): the texts of the two JSON files ("" when absent).
  static Result<std::unique_ptr<GenerationFrontend>> make(const std::string& name,
                                                          std::unique_ptr<io::Tokenizer> tokenizer,
                                                          const std::string& tokenizer_config,
                                                          const std::string& generation_config,
                                                          const std::string& origin);

  const std::string& name() const { return name_; }
  const io::Tokenizer& tokenizer() const { return *tokenizer_; }
  bool has_chat_template() const { return chat_template_.has_value(); }
  // The chat prompt as transformers' apply_chat_template(messages, add_generation_prompt=True,
  // **kwargs) renders it; what the template refuses (raise_exception) is the error.
  Result<std::string> render_chat(const std::vector<ChatMessage>& messages,
                                  const nlohmann::ordered_json& kwargs) const;
  // Ids that end every request: generation_config's eos_token_id (one or a list) and the tokenizer's
  // eos_token.
  const std::vector<uint32_t>& eos_ids() const { return eos_ids_; }

 private:
  GenerationFrontend() = default;
  std::string name_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  nlohmann::ordered_json specials_ = nlohmann::ordered_json::object();  // bos_token, eos_token, ...
  std::vector<uint32_t> eos_ids_;
};

}  // namespace tandem::coordinator
