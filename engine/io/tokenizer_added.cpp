// Added and special tokens: HF's id assignment and extract_and_normalize (tokenizer_added_impl.h).
#include "engine/io/tokenizer_added_impl.h"

#include <algorithm>

#include "engine/io/tokenizer_regex_impl.h"
#include "engine/io/tokenizer_utf8_impl.h"

namespace tandem::io::tok {
namespace {

size_t char_start_before(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

// Where the run of White_Space that ends `text` begins (Rust's `\s*$` match start).
size_t trailing_space_begin(std::string_view text) {
  size_t pos = text.size();
  while (pos > 0) {
    const size_t start = char_start_before(text, pos);
    if (!is_white_space(utf8_decode_at(text, start))) break;
    pos = start;
  }
  return pos;
}

// Bytes of White_Space that begin `text` (Rust's `^\s*` match end).
size_t leading_space_len(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size() && is_white_space(utf8_decode_at(text, pos))) {
    pos += utf8_char_len(static_cast<unsigned char>(text[pos]));
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view pattern, uint32_t id) {
  if (pattern.empty()) return;
  uint32_t node = 0;
  for (const char ch : pattern) {
    const auto b = static_cast<unsigned char>(ch);
    auto& children = nodes_[node].children;
    const auto it = std::lower_bound(children.begin(), children.end(), b,
                                     [](const auto& c, unsigned char key) { return c.first < key; });
    if (it != children.end() && it->first == b) {
      node = it->second;
    } else {
      const auto next = static_cast<uint32_t>(nodes_.size());
      children.insert(it, {b, next});
      nodes_.emplace_back();  // invalidates `children`; not used again this iteration
      node = next;
    }
  }
  // With two equal patterns the first one given wins, as in aho-corasick.
  if (!nodes_[node].id) nodes_[node].id = id;
  first_byte_[static_cast<unsigned char>(pattern.front())] = true;
}

const AddedVocabulary::Trie::Node* AddedVocabulary::Trie::child(const Node& node, unsigned char b) const {
  const auto it = std::lower_bound(node.children.begin(), node.children.end(), b,
                                   [](const auto& c, unsigned char key) { return c.first < key; });
  if (it == node.children.end() || it->first != b) return nullptr;
  return &nodes_[it->second];
}

bool AddedVocabulary::Trie::find(std::string_view text, size_t from, size_t& begin, size_t& end,
                                 uint32_t& id) const {
  for (size_t s = from; s < text.size(); ++s) {
    if (!first_byte_[static_cast<unsigned char>(text[s])]) continue;
    const Node* node = &nodes_[0];
    size_t best_end = 0;
    for (size_t i = s; i < text.size(); ++i) {
      node = child(*node, static_cast<unsigned char>(text[i]));
      if (node == nullptr) break;
      if (node->id) {
        best_end = i + 1;
        id = *node->id;
      }
    }
    if (best_end != 0) {
      begin = s;
      end = best_end;
      return true;
    }
  }
  return false;
}

std::optional<uint32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  if (const auto it = content_to_id_.find(content); it != content_to_id_.end()) return it->second;
  if (model_ != nullptr) return model_->token_to_id(content);
  return std::nullopt;
}

const std::string* AddedVocabulary::id_to_token(uint32_t id) const {
  const auto it = id_to_added_.find(id);
  return it == id_to_added_.end() ? nullptr : &it->second.content;
}

bool AddedVocabulary::is_special(uint32_t id) const {
  const auto it = id_to_added_.find(id);
  return it != id_to_added_.end() && special_set_.count(it->second.content) != 0;
}

uint32_t AddedVocabulary::id_end() const {
  uint32_t end = 0;
  for (const auto& [id, token] : id_to_added_) end = std::max(end, id + 1);
  return end;
}

std::optional<uint32_t> AddedVocabulary::add(const AddedToken& token, const Bpe& model) {
  model_ = &model;
  if (token.content.empty()) return std::nullopt;
  if (token.special && special_set_.insert(token.content).second) special_.push_back(token);
  for (const auto& [id, existing] : id_to_added_) {
    if (existing == token) return id;  // HF ignores an exact repeat
  }
  std::optional<uint32_t> id = token_to_id(token.content);
  if (!id) {
    const auto model_size = static_cast<uint32_t>(model.size());
    if (content_to_id_.empty()) {
      id = model_size;
    } else {
      uint32_t max = 0;
      for (const auto& [content, v] : content_to_id_) max = std::max(max, v);
      id = (max >= model_size || model_size == 0) ? max + 1 : model_size;
    }
  }
  content_to_id_.insert_or_assign(token.content, *id);
  id_to_added_.insert_or_assign(*id, token);
  if (special_set_.count(token.content) == 0) added_.push_back(token);
  return id;
}

Status AddedVocabulary::finish(const Normalizer& normalizer) {
  raw_trie_ = Trie();
  normalized_trie_ = Trie();
  for (const std::vector<AddedToken>* list : {&special_, &added_}) {
    for (const AddedToken& token : *list) {
      const uint32_t id = *token_to_id(token.content);  // every listed token was given an id in add()
      if (!token.normalized) {
        raw_trie_.insert(token.content, id);
        continue;
      }
      TANDEM_ASSIGN(const std::string pattern, normalizer.normalize(token.content));
      normalized_trie_.insert(pattern, id);
    }
  }
  return ok_status();
}

std::vector<AddedVocabulary::Match> AddedVocabulary::find_matches(std::string_view sentence, const Trie& trie,
                                                                  bool split_special) const {
  std::vector<Match> splits;
  size_t start_offset = 0;
  size_t from = 0;
  size_t begin = 0;
  size_t end = 0;
  uint32_t id = 0;
  while (trie.find(sentence, from, begin, end, id)) {
    from = end;  // matching resumes after the match itself, whatever is skipped or stripped below
    const auto found = id_to_added_.find(id);
    if (found == id_to_added_.end()) continue;  // cannot happen: every trie id was given by add()
    const AddedToken& token = found->second;
    // HF tests the content against its special set, so a token listed special is skipped also where a
    // non-special entry shares its content.
    if (split_special && special_set_.count(token.content) != 0) continue;
    if (token.single_word) {
      const bool space_before = begin == 0 || !is_word_char(utf8_decode_before(sentence, begin));
      const bool space_after = end == sentence.size() || !is_word_char(utf8_decode_at(sentence, end));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) begin = std::max(trailing_space_begin(sentence.substr(0, begin)), start_offset);
    if (token.rstrip) end += leading_space_len(sentence.substr(end));
    // HF panics when a whitespace token sits inside the previous token's rstrip; keep the match empty.
    begin = std::min(begin, end);
    if (start_offset < begin) splits.push_back({std::nullopt, start_offset, begin});
    splits.push_back({id, begin, end});
    start_offset = end;
  }
  if (start_offset != sentence.size()) splits.push_back({std::nullopt, start_offset, sentence.size()});
  return splits;
}

void AddedVocabulary::split_with(std::string_view text, const Trie& trie, bool split_special,
                                 std::vector<Piece>& out) const {
  for (const Match& m : find_matches(text, trie, split_special)) {
    if (m.end <= m.begin) continue;  // HF drops empty splits
    out.push_back(Piece{std::string(text.substr(m.begin, m.end - m.begin)), m.id});
  }
}

Status AddedVocabulary::split(std::string_view text, const Normalizer& normalizer, bool split_special,
                              std::vector<Piece>& out) const {
  std::vector<Piece> raw;
  split_with(text, raw_trie_, split_special, raw);
  for (Piece& piece : raw) {
    if (piece.id) {
      out.push_back(std::move(piece));
      continue;
    }
    TANDEM_ASSIGN(const std::string normalized, normalizer.normalize(piece.text));
    split_with(normalized, normalized_trie_, split_special, out);
  }
  return ok_status();
}

}  // namespace tandem::io::tok
