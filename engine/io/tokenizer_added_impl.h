// HF's AddedVocabulary: added and special tokens, their ids assigned as HF assigns them on load, and
// extract_and_normalize: split the raw text on tokens with normalized=false (leftmost-longest), normalize
// the rest, split that on tokens with normalized=true, honouring single_word, lstrip and rstrip, and
// (encode_special_tokens) skipping the matches of special tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/core/result.h"
#include "engine/io/tokenizer_bpe_impl.h"
#include "engine/io/tokenizer_normalizer_impl.h"

namespace tandem::io::tok {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;

  bool operator==(const AddedToken&) const = default;
};

// A piece of the input: text still to pre-tokenize, or one added token.
struct Piece {
  std::string text;
  std::optional<uint32_t> id;
};

class AddedVocabulary {
 public:
  // Adds one token as HF's add_tokens does and returns the id it gets: the model's or an earlier added
  // token's id for the same content, else the next id past the vocabulary. Empty content is ignored
  // (nullopt), as HF ignores it. `model` must outlive this vocabulary.
  std::optional<uint32_t> add(const AddedToken& token, const Bpe& model);
  // Builds the matchers; call after the last add. Normalized tokens are matched in normalized form.
  Status finish(const Normalizer& normalizer);

  // extract_and_normalize over `text` (valid UTF-8); empty pieces are dropped. With `split_special`, a
  // special token's match is passed over as HF's encode_special_tokens does: its text stays plain text,
  // and matching resumes after it (no shorter token inside it is looked for).
  Status split(std::string_view text, const Normalizer& normalizer, bool split_special,
               std::vector<Piece>& out) const;

  std::optional<uint32_t> token_to_id(std::string_view content) const;
  const std::string* id_to_token(uint32_t id) const;
  bool is_special(uint32_t id) const;
  uint32_t id_end() const;  // one past the largest added id, 0 when there are none

 private:
  // Leftmost-longest literal matching over a byte trie (HF uses aho-corasick in that mode).
  class Trie {
   public:
    void insert(std::string_view pattern, uint32_t id);
    // The next match starting at or after `from`: {begin, end, id}, or nothing.
    bool find(std::string_view text, size_t from, size_t& begin, size_t& end, uint32_t& id) const;

   private:
    struct Node {
      std::vector<std::pair<unsigned char, uint32_t>> children;  // sorted by byte
      std::optional<uint32_t> id;
    };
    const Node* child(const Node& node, unsigned char b) const;
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
  };
  struct Match {
    std::optional<uint32_t> id;
    size_t begin;
    size_t end;
  };
  std::vector<Match> find_matches(std::string_view sentence, const Trie& trie, bool split_special) const;
  void split_with(std::string_view text, const Trie& trie, bool split_special, std::vector<Piece>& out) const;

  const Bpe* model_ = nullptr;
  StringMap<uint32_t> content_to_id_;
  std::unordered_map<uint32_t, AddedToken> id_to_added_;
  std::vector<AddedToken> added_;    // non-special, in the order given
  std::vector<AddedToken> special_;  // special, in the order given
  std::unordered_set<std::string> special_set_;
  Trie raw_trie_;
  Trie normalized_trie_;
};

}  // namespace tandem::io::tok
