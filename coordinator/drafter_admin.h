// The seam between the admin routes (admin_api.h: POST /admin/drain, /admin/undrain) and what they act
// on: the round scheduler's drafter ranks. Draining takes a live drafter rank out of service without
// losing a request or its speculation: its requests' contexts move to another drafter of the same target
// (README "Draining a drafter rank").
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "coordinator/api_types.h"

namespace tandem::coordinator {

// A drafter rank's place in service.
enum class DrainState : uint8_t { kServing, kDraining, kDrained };
const char* to_string(DrainState state);  // "serving", "draining", "drained"

struct DrainView {
  int rank = -1;
  int target = -1;
  DrainState state = DrainState::kServing;
  uint32_t moving = 0;  // requests moving off it (the drain's answer)
  std::vector<int> to;  // the drafters they move to (none: they decode plainly)
};

class DrafterAdmin {
 public:
  virtual ~DrafterAdmin() = default;
  // Takes drafter rank `rank` out of service: no new request drafts on it, and with its target's next
  // round each of its requests moves to the least loaded other drafter of that target in service, its
  // context handed over as it is. The last drafter in service of its target is refused (409) unless
  // `force`: its requests then decode plainly on the target. 400 a rank that is not a drafter; 409 one
  // dead or already out of service.
  virtual std::variant<DrainView, ApiError> drain(int rank, bool force) = 0;
  // Puts a drained drafter back in service (new requests may draft on it); requests that moved stay.
  // 409 for one that is in service or dead.
  virtual std::variant<DrainView, ApiError> undrain(int rank) = 0;
  // The drafter ranks out of service (draining or drained), for /health.
  virtual std::vector<DrainView> out_of_service() const = 0;
};

}  // namespace tandem::coordinator
