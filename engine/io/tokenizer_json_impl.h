// tokenizer.json to the tokenizer's parts. What tandem does not implement is refused with the JSON path
// at fault (`key "model.type": "WordPiece" is not supported ...`); truncation, padding and the
// post-processor are read past, since encode() returns ids without the post-processor's tokens.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/core/result.h"
#include "engine/io/tokenizer_added_impl.h"
#include "engine/io/tokenizer_bpe_impl.h"
#include "engine/io/tokenizer_normalizer_impl.h"
#include "engine/io/tokenizer_pretokenizer_impl.h"

namespace tandem::io::tok {

enum class DecoderKind { kNone, kByteLevel };

struct TokenizerParts {
  Normalizer normalizer = Normalizer::none();
  PreTokenizer pre_tokenizer;
  std::unique_ptr<Bpe> model;
  AddedVocabulary added;  // refers to *model
  DecoderKind decoder = DecoderKind::kNone;
};

// `origin` (the file name) starts every error message.
Result<std::unique_ptr<TokenizerParts>> parse_tokenizer_json(std::string_view text, const std::string& origin);

}  // namespace tandem::io::tok
