// Tokenizer: HF's encode pipeline (added tokens, normalizer, pre-tokenizer, BPE) and decode over the
// parts read from tokenizer.json (tokenizer.h). Const calls share only read-only state and the BPE cache.
#include "engine/io/tokenizer.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "engine/io/json_parse_impl.h"
#include "engine/io/tokenizer_byte_level_impl.h"
#include "engine/io/tokenizer_json_impl.h"
#include "engine/io/tokenizer_utf8_impl.h"

namespace tandem::io {
namespace {

// The largest tokenizer.json shipped today is tens of MiB; a file far past that is not one.
constexpr size_t kMaxTokenizerBytes = size_t{512} << 20;

// Runs `body` so that no exception leaves the tokenizer: the libraries below report through return
// codes, so what remains is the standard library's (allocation on an enormous input).
template <typename Body>
auto guarded(std::string_view what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Error::make(ErrorKind::kCapacity, "{}: out of memory", what);
  } catch (const std::exception& e) {
    return Error::make(ErrorKind::kInternal, "{}: {}", what, e.what());
  }
}

Result<std::vector<uint32_t>> encode_text(const tok::TokenizerParts& p, std::string_view text, SpecialTokens special) {
  if (const size_t bad = tok::utf8_first_invalid(text); bad != tok::kUtf8Valid) {
    return Error::make(ErrorKind::kInvalidArgument, "text is not valid UTF-8: byte 0x{:02X} at byte offset {}",
                       static_cast<unsigned>(static_cast<unsigned char>(text[bad])), bad);
  }
  std::vector<tok::Piece> pieces;
  TANDEM_TRY(p.added.split(text, p.normalizer, special == SpecialTokens::kSplit, pieces));
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<std::string> words;
  for (tok::Piece& piece : pieces) {
    if (piece.id) {
      ids.push_back(*piece.id);
      continue;
    }
    words.clear();
    words.push_back(std::move(piece.text));
    TANDEM_TRY(p.pre_tokenizer.run(words));
    for (const std::string& word : words) TANDEM_TRY(p.model->tokenize(word, ids));
  }
  return ids;
}

Result<std::string> decode_ids(const tok::TokenizerParts& p, const std::vector<uint32_t>& ids,
                               uint32_t vocab_size, bool raw) {
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string* token = p.added.id_to_token(ids[i]);
    if (token == nullptr) token = p.model->id_to_token(ids[i]);
    if (token == nullptr) {
      return Error::make(ErrorKind::kInvalidArgument, "ids[{}] = {} is outside the vocabulary ({} ids)", i, ids[i],
                         vocab_size);
    }
    tokens.emplace_back(*token);
  }
  switch (p.decoder) {
    case tok::DecoderKind::kByteLevel:
      return raw ? tok::byte_level_bytes(tokens) : tok::byte_level_decode(tokens);
    case tok::DecoderKind::kNone:
      break;
  }
  // Without a decoder HF joins the tokens with spaces.
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<tok::TokenizerParts> parts;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  TANDEM_ASSIGN(const std::string text, read_file_capped(path, kMaxTokenizerBytes));
  return parse(text, path);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::parse(std::string_view json, const std::string& origin) {
  return guarded(origin, [&]() -> Result<std::unique_ptr<Tokenizer>> {
    TANDEM_ASSIGN(auto parts, tok::parse_tokenizer_json(json, origin));
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    t->impl_->parts = std::move(parts);
    return t;
  });
}

Result<std::vector<uint32_t>> Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  return guarded("encode", [&] { return encode_text(*impl_->parts, text, special); });
}

Result<std::string> Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  return guarded("decode", [&] { return decode_ids(*impl_->parts, ids, vocab_size(), false); });
}

Result<std::string> Tokenizer::decode_bytes(const std::vector<uint32_t>& ids) const {
  return guarded("decode", [&] { return decode_ids(*impl_->parts, ids, vocab_size(), true); });
}

std::optional<uint32_t> Tokenizer::token_id(std::string_view token) const {
  const tok::TokenizerParts& p = *impl_->parts;
  if (const auto id = p.added.token_to_id(token)) return id;
  return p.model->token_to_id(token);
}

bool Tokenizer::is_special(uint32_t id) const { return impl_->parts->added.is_special(id); }

uint32_t Tokenizer::vocab_size() const {
  // Every id is below this: with HF's contiguous ids it is the vocabulary plus the added tokens.
  return std::max(impl_->parts->model->id_end(), impl_->parts->added.id_end());
}

}  // namespace tandem::io
