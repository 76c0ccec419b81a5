// The settle step (dflash.md §1.6-1.7): committed rows' taps into the drafter's context caches.
#include "engine/spec/spec.h"

namespace tandem::spec {

Status settle(models::dflash::Drafter& drafter, std::span<Request* const> requests) {
  // Host rows come before device rows in each request, so the host ones settle first; a settle call
  // takes one kind (the device rows of one call share the target's last run output).
  std::vector<models::dflash::SettleRows> host, device;
  for (Request* r : requests) {
    // Drops the previous block's transient rows; a context shorter than `settled` is a broken invariant.
    TANDEM_TRY(drafter.context().crop(r->slot, r->settled));
    const size_t width = drafter.tap_width();
    const size_t want = size_t{r->start - r->settled} * width;
    const size_t have = r->taps.size() + size_t{r->device_taps.rows} * width;
    if (have != want || (r->device_taps.rows != 0 && r->device_taps.width != width)) {
      return Error::make(ErrorKind::kInternal, "slot {}: {} pending tap values ({} on the host, {} device rows of {}) "
                         "for positions {}..{} (expected {})", r->slot, have, r->taps.size(), r->device_taps.rows,
                         r->device_taps.width, r->settled, r->start, want);
    }
    if (!r->taps.empty()) host.push_back({r->slot, r->taps, {}});
    if (r->device_taps.rows != 0) device.push_back({r->slot, {}, r->device_taps});
  }
  if (!host.empty()) TANDEM_TRY(drafter.settle(host));
  if (!device.empty()) TANDEM_TRY(drafter.settle(device));
  for (Request* r : requests) {
    r->settled = r->start;
    r->taps.clear();
    r->device_taps = {};
  }
  return {};
}

}  // namespace tandem::spec
