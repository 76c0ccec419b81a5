// The persistent caches of a decoder (KV, drafter context) with their bookkeeping (dflash.md §1.7): a
// backend State plus each slot's committed length; crop shortens it, release frees the slot's rows
// for the next request; a slot's rows go out and in as f32 (a drafter context changing rank). Shared by
// the target (engine/models/qwen3) and the drafters (engine/models/dflash).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::decode {

class SeqRunner;

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
  // Frees the slot for another sequence (its length becomes 0; its rows are overwritten, never read).
  Status release(uint32_t slot) { return crop(slot, 0); }
  // A slot's first `length` committed positions as f32 rows (ir::State::read_rows), and a slot made to
  // hold exactly such rows: how a sequence's cache moves to another rank's CacheSlots of the same graph.
  uint32_t row_width() const { return state_->row_width(); }
  Status export_rows(uint32_t slot, uint32_t length, std::vector<float>& out) const;
  Status import_rows(uint32_t slot, uint32_t length, std::span<const float> rows);
  // Device bytes of every cache, and per cached position of one slot.
  size_t bytes() const { return state_->bytes(); }
  size_t bytes_per_position() const { return state_->bytes_per_position(); }
  ir::State& state() { return *state_; }

 private:
  friend class SeqRunner;  // commits the rows it ran
  std::unique_ptr<ir::State> state_;
  std::vector<uint32_t> lengths_;
  uint32_t capacity_ = 0;
};

}  // namespace tandem::decode
