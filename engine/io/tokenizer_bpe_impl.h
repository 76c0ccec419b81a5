// HF's BPE model: vocabulary, merges ranked by their order, the merge loop of models/bpe/word.rs
// (lowest rank first, leftmost on ties), unk_token / fuse_unk, ignore_merges, and a cache of merged
// words shared by concurrent encodes. No dropout, byte_fallback or subword prefix/suffix.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/result.h"

namespace tandem::io::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

class Bpe {
 public:
  // Errors name the offending entry: `merges[12]: "ab" + "c": "abc" is not in the vocabulary`.
  static Result<std::unique_ptr<Bpe>> make(StringMap<uint32_t> vocab,
                                           const std::vector<std::pair<std::string, std::string>>& merges,
                                           BpeOptions options);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  Status tokenize(std::string_view word, std::vector<uint32_t>& out) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(uint32_t id) const;  // nullptr when unknown
  size_t size() const { return vocab_.size(); }
  uint32_t id_end() const { return id_end_; }  // one past the largest id

 private:
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  Bpe() = default;
  Status merge_word(std::string_view word, std::vector<uint32_t>& ids) const;
  const Merge* find_merge(uint32_t left, uint32_t right) const;

  StringMap<uint32_t> vocab_;
  std::unordered_map<uint32_t, std::string> vocab_r_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left << 32 | right) -> rank, merged id
  BpeOptions options_;
  std::optional<uint32_t> unk_id_;
  uint32_t id_end_ = 0;

  // Merged words, in shards so concurrent encodes rarely meet on one lock; a full shard is cleared so a
  // long-running server keeps adapting to its traffic.
  struct CacheShard {
    std::shared_mutex mutex;
    StringMap<std::vector<uint32_t>> words;
  };
  static constexpr size_t kCacheShards = 16;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace tandem::io::tok
