// The settle step (dflash.md §1.6-1.7): committed rows' taps into the drafter's context caches.
#include "engine/spec/spec.h"

namespace tandem::spec {

Status settle(models::dflash::Drafter& drafter, std::span<Request* const> requests) {
  std::vector<models::dflash::SettleRows> rows;
  for (Request* r : requests) {
    // Drops the previous block's transient rows; a context shorter than `settled` is a broken invariant.
    TANDEM_TRY(drafter.context().crop(r->slot, r->settled));
    const size_t want = size_t{r->start - r->settled} * drafter.tap_width();
    if (r->taps.size() != want) {
      return Error::make(ErrorKind::kInternal, "slot {}: {} pending tap values for positions {}..{} (expected {})",
                         r->slot, r->taps.size(), r->settled, r->start, want);
    }
    if (r->taps.empty()) continue;
    rows.push_back({r->slot, r->taps});
  }
  TANDEM_TRY(drafter.settle(rows));
  for (Request* r : requests) {
    r->settled = r->start;
    r->taps.clear();
  }
  return {};
}

}  // namespace tandem::spec
