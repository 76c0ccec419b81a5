// generate(): prefill and settle, then rounds of draft, verify and settle (or plain decoding steps) until
// every request has finished (dflash.md §1.6 for a batch of requests).
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
  TANDEM_TRY(prefill(target, active, route, drafter));
  drop_finished();
  const uint32_t block = drafter ? (options.block ? options.block : drafter->block_size()) : 1;
  // Rejection sampling's proposals stay on the drafter's device until the verify reads them, so a round
  // runs in groups whose blocks run together (Drafter::block_seqs). Each group settles right after its
  // verify, before another target run overwrites the device taps it left.
  size_t group = std::max<size_t>(active.size(), 1);
  if (drafter && route == TapRoute::kDevice && options.mode == VerifyMode::kReject) {
    group = std::max<uint32_t>(drafter->block_seqs(block), 1);
  }
  if (drafter && !active.empty()) TANDEM_TRY(settle(*drafter, active));
  std::vector<Draft> drafts;
  while (!active.empty()) {
    for (size_t at = 0; at < active.size(); at += group) {
      const std::span<Request* const> g(active.data() + at, std::min(group, active.size() - at));
      if (drafter) {
        TANDEM_TRY(draft(*drafter, g, block, options.mode, drafts, route));
      } else {
        drafts.assign(g.size(), Draft{});
      }
      TANDEM_TRY(verify(target, g, drafts, options.mode, options.trace, route));
      if (drafter) TANDEM_TRY(settle(*drafter, g));
    }
    drop_finished();
  }
  return {};
}

}  // namespace tandem::spec
