// Hugging Face tokenizer.json, byte-level BPE as ModernBERT and Qwen3 ship it: normalizer (NFC or none),
// pre-tokenizer (Split with a Unicode regex, ByteLevel), BPE merges, added and special tokens, and the
// post-processor's special tokens. Must equal HF `tokenizers` on every string of the golden corpus.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace tandem::io {

// Whether added tokens marked `special` are matched in the text (HF's default) or left to the
// normalizer, pre-tokenizer and BPE like any other text (HF's split_special_tokens=True, the Rust
// encode_special_tokens flag). Non-special added tokens are matched either way, as in HF.
enum class SpecialTokens : uint8_t { kMatch, kSplit };

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);  // tokenizer.json
  static Result<std::unique_ptr<Tokenizer>> parse(std::string_view json, const std::string& origin);
  ~Tokenizer();

  // Ids of `text`, without the post-processor's special tokens (add_special_tokens=False in HF).
  // Invalid UTF-8 is an error naming the byte offset. User text that must not inject structure is
  // encoded with SpecialTokens::kSplit.
  Result<std::vector<uint32_t>> encode(std::string_view text, SpecialTokens special = SpecialTokens::kMatch) const;
  // Text of ids (skip_special_tokens = false); ids outside the vocabulary are an error.
  Result<std::string> decode(const std::vector<uint32_t>& ids) const;
  // The bytes decode() repairs into UTF-8 (invalid sequences become U+FFFD there): a byte-level token may
  // hold part of a character, so streaming decodes each token's bytes and emits whole characters.
  Result<std::string> decode_bytes(const std::vector<uint32_t>& ids) const;
  std::optional<uint32_t> token_id(std::string_view token) const;  // vocab or added token
  bool is_special(uint32_t id) const;  // an added token marked special
  uint32_t vocab_size() const;  // including added tokens

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::io
