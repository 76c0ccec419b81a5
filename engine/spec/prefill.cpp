// The prefill step (dflash.md §1.6): the prompt through the target, the first token, the prompt's taps.
#include "engine/spec/request_impl.h"

namespace tandem::spec {

Status prefill(models::qwen3::Target& target, std::span<Request* const> requests, TapRoute route,
               models::dflash::Drafter* drafter) {
  std::vector<models::qwen3::TargetRows> rows;
  for (Request* r : requests) {
    TANDEM_TRY(target.cache().crop(r->slot, 0));
    // Early chunks settle into the drafter from position 0 (a reused slot's context starts afresh).
    if (drafter != nullptr && route == TapRoute::kDevice && r->keeps_taps) {
      TANDEM_TRY(drafter->context().crop(r->slot, 0));
    }
    rows.push_back({r->slot, std::span<const uint32_t>(r->tokens).first(r->prompt_len),
                    models::qwen3::LogitRows::kLast, r->params.sampling});
  }
  // The prompt's taps wait for the drafter on the host, or on the device (TapRoute).
  std::vector<models::qwen3::TargetOut> out;
  std::vector<uint32_t> settled(requests.size(), 0);  // rows settled from the device during the call
  if (route == TapRoute::kDevice) {
    std::vector<ir::Tensor2> fetched(requests.size());
    ir::Tensor2 chunk;
    // A long prompt's earlier chunks, before the call's next run overwrites them: nowhere for plain
    // decoding, into the drafter device to device where it shares the target's backend, else to the host.
    const models::qwen3::TapSink early = [&](size_t seq, uint32_t first, const ir::DeviceRows& taps) -> Status {
      Request& r = *requests[seq];
      if (!r.keeps_taps) return {};
      if (drafter == nullptr) {
        TANDEM_TRY(target.backend().fetch(taps, 0, taps.rows, chunk));
        fetched[seq].width = chunk.width;
        fetched[seq].rows += chunk.rows;
        fetched[seq].data.insert(fetched[seq].data.end(), chunk.data.begin(), chunk.data.end());
        return {};
      }
      if (first != settled[seq]) {
        return Error::make(ErrorKind::kInternal, "slot {}: prompt rows from {} arrived with {} settled", r.slot, first,
                           settled[seq]);
      }
      const models::dflash::SettleRows settle[] = {{r.slot, {}, taps}};
      if (Status s = drafter->settle(settle); !s.ok()) {
        return std::move(s).error().context(fmt::format("slot {}: settling prompt rows {}..{} from the device",
                                                        r.slot, first, first + taps.rows));
      }
      settled[seq] += taps.rows;
      return {};
    };
    TANDEM_TRY(target.forward_keeping_taps(rows, out, early));
    for (size_t i = 0; i < requests.size(); ++i) {
      if (fetched[i].rows != 0) out[i].taps = std::move(fetched[i]);
    }
  } else {
    TANDEM_TRY(target.forward_fetching_taps(rows, out));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    r.tokens.resize(r.prompt_len);
    r.start = r.prompt_len;
    r.settled = settled[i];
    r.taps = r.keeps_taps ? std::move(out[i].taps.data) : std::vector<float>{};
    r.device_taps = r.keeps_taps ? out[i].device_taps : ir::DeviceRows{};
    if (!r.keeps_taps) r.settled = r.start;  // nothing pending: no drafter reads its rows
    // ids holds the last row's token: ir::sample_token for position prompt_len.
    commit_token(r, out[i].ids.ids.at(0));
  }
  return {};
}

}  // namespace tandem::spec
