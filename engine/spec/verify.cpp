// The verify step (dflash.md §1.6): one causal target forward over [tok, d_1 .. d_n] per request, the
// accept rule, commits, the KV crop to the new start and the committed rows' taps for the drafter.
#include "engine/spec/accept_impl.h"
#include "engine/spec/request_impl.h"

#include <algorithm>

namespace tandem::spec {
namespace {

// Appends the first `kept` verify rows' taps to the request's pending ones: host rows first, then device
// rows (a view of the kept ones). settle() ran before this round, so nothing else is pending on the device.
Status keep_taps(Request& r, const models::qwen3::TargetOut& out, uint32_t kept, size_t width) {
  if (width == 0) return {};
  if (r.device_taps.rows != 0) {
    return Error::make(ErrorKind::kInternal, "slot {}: {} tap rows from an earlier target run were never settled",
                       r.slot, r.device_taps.rows);
  }
  const uint32_t host = std::min(kept, out.taps.rows);
  const std::vector<float>& taps = out.taps.data;
  r.taps.insert(r.taps.end(), taps.begin(), taps.begin() + static_cast<ptrdiff_t>(host * width));
  const uint32_t device = kept - host;
  if (device == 0) return {};
  if (out.device_taps.rows < device) {
    return Error::make(ErrorKind::kInternal, "slot {}: {} tap rows kept but the run left {} on the host and {} on "
                       "the device", r.slot, kept, out.taps.rows, out.device_taps.rows);
  }
  r.device_taps = out.device_taps;
  r.device_taps.rows = device;
  return {};
}

}  // namespace

Status verify(models::qwen3::Target& target, std::span<Request* const> requests, std::span<const Draft> drafts,
              VerifyMode mode, bool trace, TapRoute route) {
  if (drafts.size() != requests.size()) {
    return Error::make(ErrorKind::kInvalidArgument, "{} drafts for {} requests", drafts.size(), requests.size());
  }
  std::vector<std::vector<uint32_t>> ids(requests.size());
  std::vector<models::qwen3::TargetRows> rows;
  // Rejection sampling of a request's drafts: on the target's device where its proposals are there (the
  // verdict comes back in place of the ids), else on the host.
  enum class Rule : uint8_t { kMatch, kHost, kDevice };
  std::vector<Rule> rule(requests.size(), Rule::kMatch);
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    const Draft& d = drafts[i];
    TANDEM_TRY(check_round_ready(r));
    if (mode == VerifyMode::kReject && r.params.sampling.temperature > 0.0f && !d.tokens.empty()) {
      rule[i] = d.device.empty() ? Rule::kHost : Rule::kDevice;
    }
    if (rule[i] == Rule::kHost && d.proposals.size() != d.tokens.size()) {
      return Error::make(ErrorKind::kInvalidArgument, "slot {}: {} proposals for {} drafts (rejection sampling)",
                         r.slot, d.proposals.size(), d.tokens.size());
    }
    if (rule[i] == Rule::kHost && !target.host_logits()) {
      return Error::make(ErrorKind::kInvalidArgument, "slot {}: rejection sampling of proposals on the host needs the "
                         "target's logits there (TargetOptions::host_logits)", r.slot);
    }
    if (rule[i] == Rule::kDevice && d.device.values.rows != d.tokens.size()) {
      return Error::make(ErrorKind::kInvalidArgument, "slot {}: {} device proposal rows for {} drafts (rejection "
                         "sampling)", r.slot, d.device.values.rows, d.tokens.size());
    }
    TANDEM_TRY(target.cache().crop(r.slot, r.start));
    ids[i].push_back(r.tokens.back());
    ids[i].insert(ids[i].end(), drafts[i].tokens.begin(), drafts[i].tokens.end());
    rows.push_back({r.slot, ids[i], models::qwen3::LogitRows::kAll, r.params.sampling,
                    rule[i] == Rule::kDevice ? d.device : ir::ProposalRows{}});
  }
  // The verify rows' taps wait for the drafter on the host or the device (TapRoute); rows past the
  // accepted ones are dropped.
  std::vector<models::qwen3::TargetOut> out;
  if (route == TapRoute::kDevice) {
    TANDEM_TRY(target.forward_keeping_taps(rows, out));
  } else {
    TANDEM_TRY(target.forward_fetching_taps(rows, out));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    const Draft& d = drafts[i];
    Verdict v;
    switch (rule[i]) {
      case Rule::kMatch: v = accept_match(out[i].ids.ids, d.tokens); break;
      case Rule::kHost: v = accept_reject(out[i].logits, d.tokens, d.proposals, r.params.sampling, r.start); break;
      case Rule::kDevice: {
        auto device = accept_device(out[i].ids.ids, d.tokens);
        if (!device.ok()) return std::move(device).error().context(fmt::format("slot {}", r.slot));
        v = std::move(device).value();
        break;
      }
    }
    ++r.rounds;
    r.drafted += static_cast<uint32_t>(d.tokens.size());
    r.accepted += v.accepted;
    r.accept_lengths.push_back(v.accepted + 1);
    if (trace) r.trace.push_back({r.start, d.tokens, v.accepted});
    // Rows 0..accepted (the anchor and the accepted drafts) are committed in the KV cache; the rest go.
    const uint32_t kept = v.accepted + 1;
    if (r.keeps_taps) {
      TANDEM_TRY(keep_taps(r, out[i], kept, target.tap_width()));
    }
    r.start += kept;
    if (!r.keeps_taps) r.settled = r.start;  // no drafter: nothing is pending
    TANDEM_TRY(target.cache().crop(r.slot, r.start));
    for (uint32_t token : v.committed) {
      if (!commit_token(r, token)) break;
    }
  }
  return {};
}

}  // namespace tandem::spec
