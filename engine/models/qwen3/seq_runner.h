// Runs a decoder graph over rows of several sequences at once, each continuing its cache slot (dflash.md
// §1.7): CacheSlots holds the persistent caches with an explicit capacity and committed length per slot
// (crop = shorten that length), SeqRunner packs sequences into batches that fit the stage's buckets.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/executor.h"

namespace tandem::models::qwen3 {

// The persistent caches of a graph (KV or drafter context), `slots` sequences of `capacity` positions.
// Positions [0, length) of a slot are committed; rows past it are stale and get overwritten by the
// next run, never read (attention only sees positions before the rows being run, plus those rows).
class CacheSlots {
 public:
  static Result<CacheSlots> create(ir::Backend& backend, const ir::Graph& graph, uint32_t slots,
                                   uint32_t capacity);

  uint32_t slots() const { return static_cast<uint32_t>(lengths_.size()); }
  uint32_t capacity() const { return capacity_; }
  uint32_t length(uint32_t slot) const { return lengths_[slot]; }
  // Keeps positions [0, length); errors if the slot does not exist or holds fewer positions.
  Status crop(uint32_t slot, uint32_t length);
  ir::State& state() { return *state_; }

 private:
  friend class SeqRunner;  // commits the rows it ran
  std::unique_ptr<ir::State> state_;
  std::vector<uint32_t> lengths_;
  uint32_t capacity_ = 0;
};

// Rows of one sequence for a run. They sit at positions length(slot) .. length(slot) + rows − 1.
struct SeqRows {
  uint32_t slot = 0;
  std::span<const uint32_t> ids;      // the rows' tokens; empty when the graph reads only features
  std::span<const float> features;    // rows × feature width, for graphs with an Input op
  std::span<const uint32_t> markers;  // ascending rows whose marker-row outputs are wanted
  bool commit = true;                 // advance the slot's length past the rows (false: transient rows)
};

// One sequence's share of each graph output, in Graph::outputs order: its token rows, or its marker rows.
using SeqOutputs = std::vector<ir::Tensor2>;

class SeqRunner {
 public:
  // `split`: a sequence too long for one bucket runs in chunks (causal graphs only; a block-mode graph
  // must see all its rows at once). Graph, weights and table must outlive the runner.
  SeqRunner(ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph, const ir::BucketTable& table,
            std::string stage, uint32_t vocab, bool split);

  // Runs every sequence's rows (each slot at most once); `out` gets one entry per sequence.
  Status run(std::span<const SeqRows> seqs, CacheSlots& caches, std::vector<SeqOutputs>& out);

 private:
  struct Chunk {
    size_t seq;
    uint32_t begin;
    uint32_t rows;
  };
  Status check_seqs(std::span<const SeqRows> seqs, const CacheSlots& caches) const;
  uint32_t rows_of(const SeqRows& s) const;
  uint32_t markers_in(const SeqRows& s, uint32_t begin, uint32_t end) const;
  bool fits(uint32_t tokens, uint32_t seqs, uint32_t markers) const;
  Status run_chunks(std::span<const SeqRows> seqs, const std::vector<Chunk>& chunks,
                    const std::vector<uint32_t>& starts, CacheSlots& caches, std::vector<SeqOutputs>& out);

  ir::Executor exec_;
  const ir::BucketTable& table_;
  std::string stage_;
  uint32_t vocab_;
  bool split_;
  ir::Batch batch_;
  ir::Outputs outputs_;
};

}  // namespace tandem::models::qwen3
