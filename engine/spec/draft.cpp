// The draft step (dflash.md §1.5, §3.3): a block per request, then draft tokens from its rows: v1 picks
// per row (argmax, or a sample of softmax(logits / T) under rejection sampling), v2 walks the selector.
#include "engine/spec/request_impl.h"
#include "engine/spec/sampling_impl.h"
#include "engine/spec/selector_impl.h"

namespace tandem::spec {
namespace {

bool samples_proposals(const Request& r, VerifyMode mode) {
  return mode == VerifyMode::kReject && r.params.sampling.temperature > 0.0f;
}

Draft draft_v1(const Request& r, const ir::Tensor2& logits, VerifyMode mode) {
  Draft d;
  for (uint32_t row = 0; row < logits.rows; ++row) {
    const auto values = std::span<const float>(logits.data).subspan(size_t{row} * logits.width, logits.width);
    if (!samples_proposals(r, mode)) {
      d.tokens.push_back(argmax(values));
      continue;
    }
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
  for (Request* r : requests) {
    TANDEM_TRY(check_round_ready(*r));
    if (r->settled != r->start) {
      return Error::make(ErrorKind::kInternal, "slot {}: the drafter context reaches {} but the block starts at {}",
                         r->slot, r->settled, r->start);
    }
    rows.push_back({r->slot, r->tokens.back()});
  }
  std::vector<models::dflash::BlockOut> out;
  TANDEM_TRY(drafter.draft(rows, block, out));
  drafts.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    if (drafter.version() == 1) {
      drafts[i] = draft_v1(r, out[i].logits, mode);
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
