// The draft step (dflash.md §1.5, §3.3): a block per request, then draft tokens from its rows: v1 picks
// per row (the device's argmax, or a sample of softmax(logits / T) under rejection sampling), v2 walks
// the selector on the host.
#include "engine/spec/request_impl.h"
#include "engine/spec/sampling_impl.h"
#include "engine/spec/selector_impl.h"

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
             std::vector<Draft>& drafts) {
  std::vector<models::dflash::BlockRows> rows;
  // The logits come to the host only for a host step: the v2 walk, or v1 proposals to sample from.
  bool fetch_logits = drafter.version() == 2;
  for (Request* r : requests) {
    fetch_logits = fetch_logits || samples_proposals(*r, mode);
    TANDEM_TRY(check_round_ready(*r));
    if (r->settled != r->start) {
      return Error::make(ErrorKind::kInternal, "slot {}: the drafter context reaches {} but the block starts at {}",
                         r->slot, r->settled, r->start);
    }
    rows.push_back({r->slot, r->tokens.back()});
  }
  std::vector<models::dflash::BlockOut> out;
  TANDEM_TRY(drafter.draft(rows, block, out, fetch_logits));
  drafts.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    if (drafter.version() == 1) {
      drafts[i] = draft_v1(r, out[i], mode);
      continue;
    }
    const float t = samples_proposals(r, mode) ? r.params.sampling.temperature : 0.0f;
    Walk w = select(out[i].logits, out[i].selector, r.tokens.back(), *drafter.codebooks(),
                    selector_params(drafter.setup().cfg), t, r.params.sampling.seed, r.start);
    drafts[i].tokens = std::move(w.path);
    if (t > 0.0f) drafts[i].proposals = std::move(w.proposals);
  }
  return {};
}

}  // namespace tandem::spec
