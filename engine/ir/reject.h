// Rejection sampling of a verify block (dflash.md §1.8) as every backend computes it: engine/spec's host
// accept rule and the RejectSample op (graph.h) on the CPU run these functions; the CUDA kernel
// (kernels/reject_sample.cu) follows them, its f64 sums in another order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/ir/sampling.h"

namespace tandem::ir {

// RejectSample's mark on the pick rows past a sequence's committed tokens.
inline constexpr uint32_t kNoToken = 0xffffffffu;

// norm(max(p − q, 0)) over p's ids (ascending; q's need not be); where rounding leaves no mass (p == q), p.
Distribution residual(const Distribution& p, const Distribution& q);

struct RejectVerdict {
  uint32_t accepted = 0;            // leading drafts kept
  std::vector<uint32_t> committed;  // d_1 .. d_accepted, then the residual sample or the bonus token
};

// Rows 0..n of the target's logits (`logits`, rows `stride` floats apart, the first `columns` of each read)
// for [tok, d_1 .. d_n] at positions start..; row i fills position start + i + 1. For i < n: p =
// tempered(row i, T, top_p); d_{i+1} is kept iff uniform(seed, position, kAccept) · q_i(d) < p(d), else the
// row's token is sample(residual(p, q_i), uniform(seed, position, kResidual)) and the block ends; past
// every draft the bonus is sample_token(row n) (kTarget). proposals.size() == drafts.size() == n; T > 0.
RejectVerdict reject_block(std::span<const float> logits, size_t stride, uint32_t columns,
                           std::span<const uint32_t> drafts, std::span<const Distribution> proposals,
                           const SamplingParams& sampling, uint32_t start);

}  // namespace tandem::ir
