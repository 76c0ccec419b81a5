// The rejection-sampling rule of a verify block (reject.h).
#include "engine/ir/reject.h"

#include <algorithm>

namespace tandem::ir {

Distribution residual(const Distribution& p, const Distribution& q) {
  std::vector<std::pair<uint32_t, double>> qs;
  qs.reserve(q.ids.size());
  for (size_t i = 0; i < q.ids.size(); ++i) qs.emplace_back(q.ids[i], q.probs[i]);
  std::sort(qs.begin(), qs.end());
  Distribution r;
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

RejectVerdict reject_block(std::span<const float> logits, size_t stride, uint32_t columns,
                           std::span<const uint32_t> drafts, std::span<const Distribution> proposals,
                           const SamplingParams& sampling, uint32_t start) {
  const auto row = [&](size_t i) { return logits.subspan(i * stride, columns); };
  RejectVerdict v;
  for (uint32_t i = 0; i < drafts.size(); ++i) {
    const uint32_t position = start + i + 1;
    const Distribution p = tempered(row(i), sampling.temperature, sampling.top_p);
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
  v.committed.push_back(sample_token(row(n), sampling, start + n + 1));
  return v;
}

}  // namespace tandem::ir
