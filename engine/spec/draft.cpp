// The draft step (dflash.md §1.5, §3.3): a block per request, then draft tokens from its rows: v1 picks
// per row (the device's argmax, or a sample of softmax(logits / T) under rejection sampling), v2's
// selector walk runs in the block graph (on the drafter's backend). Under rejection sampling the
// proposals q stay on the drafter's device for the target's RejectSample (TapRoute::kDevice: v1 samples
// its drafts there too), or come to the host (kHost: v1's logits rows, v2's candidates and q).
#include "engine/spec/request_impl.h"
#include "engine/spec/sampling_impl.h"

namespace tandem::spec {
namespace {

bool samples_proposals(const Request& r, VerifyMode mode) {
  return mode == VerifyMode::kReject && r.params.sampling.temperature > 0.0f;
}

Draft draft_v1(const Request& r, const models::dflash::BlockOut& out, VerifyMode mode) {
  Draft d;
  // Greedy drafts are the device's picks (the argmax of each row over the draft vocabulary).
  if (!samples_proposals(r, mode)) {
    d.tokens = out.ids;
    return d;
  }
  const ir::Tensor2& logits = out.logits;
  for (uint32_t row = 0; row < logits.rows; ++row) {
    const auto values = std::span<const float>(logits.data).subspan(size_t{row} * logits.width, logits.width);
    // Block row row+1 drafts position start + row + 1.
    const SamplingParams& s = r.params.sampling;
    Proposal q = tempered(values, s.temperature, 1.0f);
    d.tokens.push_back(sample(q, uniform(s.seed, r.start + row + 1, Stream::kDraft)));
    d.proposals.push_back(std::move(q));
  }
  return d;
}

}  // namespace

Status draft(models::dflash::Drafter& drafter, std::span<Request* const> requests, uint32_t block, VerifyMode mode,
             std::vector<Draft>& drafts, TapRoute route) {
  std::vector<models::dflash::BlockRows> rows;
  const bool v2 = drafter.version() == 2;
  const bool device = route == TapRoute::kDevice;
  // Proposals come to the host only for a host accept rule: v1's logits rows, v2's candidates and q.
  bool sampled = false;
  for (Request* r : requests) {
    sampled = sampled || samples_proposals(*r, mode);
    TANDEM_TRY(check_round_ready(*r));
    if (r->settled != r->start) {
      return Error::make(ErrorKind::kInternal, "slot {}: the drafter context reaches {} but the block starts at {}",
                         r->slot, r->settled, r->start);
    }
    // The block samples greedily unless its proposals are sampled there: v2's walk always, v1's rows when
    // they stay on the device (on the host, v1 samples from the fetched logits).
    ir::SamplingParams walk;
    if (samples_proposals(*r, mode) && (v2 || device)) {
      walk = {r->params.sampling.temperature, 1.0f, r->params.sampling.seed};
    }
    rows.push_back({r->slot, r->tokens.back(), walk});
  }
  std::vector<models::dflash::BlockOut> out;
  TANDEM_TRY(drafter.draft(rows, block, out, sampled && !v2 && !device, sampled && v2 && !device, sampled && device));
  drafts.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    Draft& d = drafts[i];
    if (!v2 && !device) {
      d = draft_v1(r, out[i], mode);
      continue;
    }
    d.tokens = std::move(out[i].ids);  // v2's walk, or v1's picks on the device
    if (!samples_proposals(r, mode)) continue;
    if (device) {
      d.device = out[i].proposals;
      continue;
    }
    const ir::Tensor2& cand = out[i].candidates;
    const ir::Tensor2& q = out[i].proposal;
    for (uint32_t row = 0; row < cand.rows; ++row) {
      Proposal p;
      for (uint32_t k = 0; k < cand.width; ++k) {
        p.ids.push_back(cand.id(row, k));
        p.probs.push_back(q.at(row, k));
      }
      d.proposals.push_back(std::move(p));
    }
  }
  return {};
}

}  // namespace tandem::spec
