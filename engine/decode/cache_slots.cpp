// CacheSlots: creating a decoder's caches and cropping a slot.
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

}  // namespace tandem::decode
