// generate(): prefill, then rounds of settle, draft and verify (or plain decoding steps) until every
// request has finished (dflash.md §1.6 for a batch of requests).
#include <algorithm>

#include "engine/spec/spec.h"

namespace tandem::spec {

TapRoute tap_route(const models::qwen3::Target& target, const models::dflash::Drafter* drafter) {
  if (drafter == nullptr || &drafter->backend() != &target.backend()) return TapRoute::kHost;
  return target.backend().caps().name == "cpu" ? TapRoute::kHost : TapRoute::kDevice;
}

Status generate(models::qwen3::Target& target, models::dflash::Drafter* drafter, std::span<Request> requests,
                const GenerateOptions& options) {
  std::vector<Request*> active;
  for (Request& r : requests) active.push_back(&r);
  const auto drop_finished = [&] {
    active.erase(std::remove_if(active.begin(), active.end(), [](const Request* r) { return !r->active(); }),
                 active.end());
  };
  const TapRoute route = tap_route(target, drafter);
  TANDEM_TRY(prefill(target, active, route));
  drop_finished();
  const uint32_t block = drafter ? (options.block ? options.block : drafter->block_size()) : 1;
  std::vector<Draft> drafts;
  while (!active.empty()) {
    if (drafter) {
      TANDEM_TRY(settle(*drafter, active));
      TANDEM_TRY(draft(*drafter, active, block, options.mode, drafts));
    } else {
      drafts.assign(active.size(), Draft{});
    }
    TANDEM_TRY(verify(target, active, drafts, options.mode, options.trace, route));
    drop_finished();
  }
  return {};
}

}  // namespace tandem::spec
