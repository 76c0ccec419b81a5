// Buckets: the fixed shapes plans are lowered for (scorer.md §2), and the table of them, read from a
// data file ("stage tokens seqs picks" per line; the default is embedded buckets.txt).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/graph.h"

namespace tandem::ir {

struct Bucket {
  uint32_t tokens = 0;
  uint32_t seqs = 0;
  uint32_t picks = 0;  // rows picked from the tokens (scorer markers, decoder logit rows)

  uint32_t rows(Rows r) const {
    switch (r) {
      case Rows::kTokens: return tokens;
      case Rows::kSeqs: return seqs;
      case Rows::kPicks: return picks;
    }
    return 0;
  }
  bool holds(uint32_t t, uint32_t s, uint32_t p) const { return t <= tokens && s <= seqs && p <= picks; }
  friend bool operator==(const Bucket&, const Bucket&) = default;
  friend auto operator<=>(const Bucket&, const Bucket&) = default;
};

std::string to_string(const Bucket& b);  // "512/128/512"

class BucketTable {
 public:
  // Parses the table; `origin` names the file in errors ("buckets.txt:3: ...").
  static Result<BucketTable> parse(std::string_view text, std::string_view origin);
  static Result<BucketTable> load(const std::string& path);
  // The embedded default (20 compat buckets, scorer.md §2).
  static const BucketTable& defaults();

  // Buckets of a stage sorted by (tokens, seqs, picks); empty if the stage is unknown.
  const std::vector<Bucket>& stage(std::string_view name) const;
  // The smallest bucket of the stage that holds the counts, or a kCapacity error naming them.
  Result<Bucket> smallest(std::string_view stage, uint32_t tokens, uint32_t seqs, uint32_t picks) const;
  // Per-count maxima over the stage (the batcher's ceiling on one batch).
  std::optional<Bucket> ceiling(std::string_view stage) const;
  std::vector<std::string> stages() const;

 private:
  std::vector<std::pair<std::string, std::vector<Bucket>>> stages_;
};

}  // namespace tandem::ir
