// Greedy / sample-and-match and rejection-sampling accept rules.
#include "engine/spec/accept_impl.h"

#include <algorithm>

#include "engine/spec/sampling_impl.h"

namespace tandem::spec {
namespace {

std::span<const float> row_of(const ir::Tensor2& t, uint32_t r) {
  return std::span<const float>(t.data).subspan(size_t{r} * t.width, t.width);
}

// norm(max(p − q, 0)); when rounding leaves no mass (p == q), p itself. p's ids ascend; q's need not.
Proposal residual(const Proposal& p, const Proposal& q) {
  std::vector<std::pair<uint32_t, double>> qs;
  qs.reserve(q.ids.size());
  for (size_t i = 0; i < q.ids.size(); ++i) qs.emplace_back(q.ids[i], q.probs[i]);
  std::sort(qs.begin(), qs.end());
  Proposal r;
  double sum = 0.0;
  size_t j = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    while (j < qs.size() && qs[j].first < p.ids[i]) ++j;
    const double qi = j < qs.size() && qs[j].first == p.ids[i] ? qs[j].second : 0.0;
    const double m = std::max(0.0, p.probs[i] - qi);
    if (m > 0.0) {
      r.ids.push_back(p.ids[i]);
      r.probs.push_back(m);
      sum += m;
    }
  }
  if (sum <= 0.0) return p;
  for (double& m : r.probs) m /= sum;
  return r;
}

}  // namespace

Verdict accept_match(std::span<const uint32_t> tokens, std::span<const uint32_t> drafts) {
  Verdict v;
  for (uint32_t i = 0; i < tokens.size(); ++i) {
    v.committed.push_back(tokens[i]);
    if (i >= drafts.size() || drafts[i] != tokens[i]) break;
    ++v.accepted;
  }
  return v;
}

Verdict accept_reject(const ir::Tensor2& logits, std::span<const uint32_t> drafts,
                      std::span<const Proposal> proposals, const SamplingParams& sampling, uint32_t start) {
  Verdict v;
  for (uint32_t i = 0; i < drafts.size(); ++i) {
    const uint32_t position = start + i + 1;
    const Proposal p = tempered(row_of(logits, i), sampling.temperature, sampling.top_p);
    const double pd = p.prob(drafts[i]);
    const double qd = proposals[i].prob(drafts[i]);
    // Accept with probability min(1, p/q): u·q < p avoids dividing by a tiny q.
    if (uniform(sampling.seed, position, Stream::kAccept) * qd < pd) {
      v.committed.push_back(drafts[i]);
      ++v.accepted;
      continue;
    }
    v.committed.push_back(sample(residual(p, proposals[i]), uniform(sampling.seed, position, Stream::kResidual)));
    return v;
  }
  const uint32_t n = static_cast<uint32_t>(drafts.size());
  v.committed.push_back(target_token(row_of(logits, n), sampling, start + n + 1));
  return v;
}

}  // namespace tandem::spec
