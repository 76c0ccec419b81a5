// The prefill step (dflash.md §1.6): the prompt through the target, the first token, the prompt's taps.
#include "engine/spec/request_impl.h"

namespace tandem::spec {

Status prefill(models::qwen3::Target& target, std::span<Request* const> requests, TapRoute route) {
  std::vector<models::qwen3::TargetRows> rows;
  for (Request* r : requests) {
    TANDEM_TRY(target.cache().crop(r->slot, 0));
    rows.push_back({r->slot, std::span<const uint32_t>(r->tokens).first(r->prompt_len),
                    models::qwen3::LogitRows::kLast, r->params.sampling});
  }
  // The prompt's taps wait for the drafter on the host, or on the device (TapRoute).
  std::vector<models::qwen3::TargetOut> out;
  if (route == TapRoute::kDevice) {
    TANDEM_TRY(target.forward_keeping_taps(rows, out));
  } else {
    TANDEM_TRY(target.forward_fetching_taps(rows, out));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    r.tokens.resize(r.prompt_len);
    r.start = r.prompt_len;
    r.settled = 0;
    r.taps = std::move(out[i].taps.data);
    r.device_taps = out[i].device_taps;
    // ids holds the last row's token: ir::sample_token for position prompt_len.
    commit_token(r, out[i].ids.ids.at(0));
  }
  return {};
}

}  // namespace tandem::spec
