// CacheSlots: creating a decoder's caches, cropping a slot, and a slot's rows out and in.
#include "engine/decode/cache_slots.h"

namespace tandem::decode {

Result<CacheSlots> CacheSlots::create(ir::Backend& backend, const ir::Graph& graph, uint32_t slots,
                                      uint32_t capacity) {
  if (slots == 0 || capacity == 0) {
    return Error::make(ErrorKind::kInvalidArgument, "a cache needs at least one slot and one position, got {} x {}",
                       slots, capacity);
  }
  CacheSlots c;
  TANDEM_ASSIGN(c.state_, backend.create_state(graph, slots, capacity));
  c.lengths_.assign(slots, 0);
  c.capacity_ = capacity;
  return c;
}

Status CacheSlots::crop(uint32_t slot, uint32_t length) {
  if (slot >= lengths_.size()) {
    return Error::make(ErrorKind::kInvalidArgument, "cache slot {} does not exist ({} slots)", slot, lengths_.size());
  }
  if (length > lengths_[slot]) {
    return Error::make(ErrorKind::kInvalidArgument, "cannot crop cache slot {} to {} positions: it holds {}", slot,
                       length, lengths_[slot]);
  }
  lengths_[slot] = length;
  return {};
}

Status CacheSlots::export_rows(uint32_t slot, uint32_t length, std::vector<float>& out) const {
  if (slot >= lengths_.size() || length > lengths_[slot]) {
    return Error::make(ErrorKind::kInvalidArgument, "cannot export {} positions of cache slot {}: it holds {}", length,
                       slot, slot < lengths_.size() ? lengths_[slot] : 0);
  }
  out.resize(size_t{length} * state_->row_width());
  return state_->read_rows(slot, 0, length, out);
}

Status CacheSlots::import_rows(uint32_t slot, uint32_t length, std::span<const float> rows) {
  if (slot >= lengths_.size() || length > capacity_ || rows.size() != size_t{length} * state_->row_width()) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "cannot import {} values as {} positions into cache slot {} ({} slots of {} positions, {} "
                       "values a position)",
                       rows.size(), length, slot, lengths_.size(), capacity_, state_->row_width());
  }
  lengths_[slot] = 0;  // nothing of the slot is committed until every row is in
  TANDEM_TRY(state_->write_rows(slot, 0, length, rows));
  lengths_[slot] = length;
  return {};
}

}  // namespace tandem::decode
