// The prefill step (dflash.md §1.6): the prompt through the target, the first token, the prompt's taps.
#include "engine/spec/request_impl.h"

namespace tandem::spec {
namespace {

// A long prompt's earlier chunks, taken as each run ends, before the call's next run overwrites them:
// nowhere for plain decoding, into the drafter device to device where it shares the target's backend,
// else to the host (`fetched`, joined in order).
class EarlyChunks {
 public:
  EarlyChunks(ir::Backend& backend, std::span<Request* const> requests, models::dflash::Drafter* drafter)
      : fetched(requests.size()), settled(requests.size(), 0), backend_(backend), requests_(requests),
        drafter_(drafter) {}

  std::vector<ir::Tensor2> fetched;  // per request: rows fetched to the host
  std::vector<uint32_t> settled;     // per request: rows settled from the device

  Status take(size_t seq, uint32_t first, const ir::DeviceRows& taps) {
    Request& r = *requests_[seq];
    if (!r.keeps_taps) return {};
    if (drafter_ == nullptr) {
      TANDEM_TRY(backend_.fetch(taps, 0, taps.rows, chunk_));
      fetched[seq].width = chunk_.width;
      fetched[seq].rows += chunk_.rows;
      fetched[seq].data.insert(fetched[seq].data.end(), chunk_.data.begin(), chunk_.data.end());
      return {};
    }
    if (first != settled[seq]) {
      return Error::make(ErrorKind::kInternal, "slot {}: prompt rows from {} arrived with {} settled", r.slot, first,
                         settled[seq]);
    }
    const models::dflash::SettleRows settle[] = {{r.slot, {}, taps}};
    if (Status s = drafter_->settle(settle); !s.ok()) {
      return std::move(s).error().context(fmt::format("slot {}: settling prompt rows {}..{} from the device", r.slot,
                                                      first, first + taps.rows));
    }
    settled[seq] += taps.rows;
    return {};
  }

 private:
  ir::Backend& backend_;
  std::span<Request* const> requests_;
  models::dflash::Drafter* drafter_;
  ir::Tensor2 chunk_;
};

}  // namespace

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
  EarlyChunks early(target.backend(), requests, drafter);
  if (route == TapRoute::kDevice) {
    TANDEM_TRY(target.forward_keeping_taps(rows, out, [&early](size_t seq, uint32_t first, const ir::DeviceRows& taps) {
      return early.take(seq, first, taps);
    }));
    for (size_t i = 0; i < requests.size(); ++i) {
      if (early.fetched[i].rows != 0) out[i].taps = std::move(early.fetched[i]);
    }
  } else {
    TANDEM_TRY(target.forward_fetching_taps(rows, out));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    r.tokens.resize(r.prompt_len);
    r.start = r.prompt_len;
    r.settled = early.settled[i];
    r.taps = r.keeps_taps ? std::move(out[i].taps.data) : std::vector<float>{};
    r.device_taps = r.keeps_taps ? out[i].device_taps : ir::DeviceRows{};
    if (!r.keeps_taps) r.settled = r.start;  // nothing pending: no drafter reads its rows
    // ids holds the last row's token: ir::sample_token for position prompt_len.
    commit_token(r, out[i].ids.ids.at(0));
  }
  return {};
}

}  // namespace tandem::spec
