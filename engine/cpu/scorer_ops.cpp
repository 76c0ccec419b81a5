// The scorer's ActFeatures (scorer.md §2): per sequence, in the order of its markers, with the softmax
// and its statistics in f64.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {

void act_features(const ir::Batch& batch, Mat h, Mat logits, Mat out) {
  const size_t d = h.width;
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    float* o = out.row(s);
    if (batch.seq_len(s) > 0) {
      std::memcpy(o, h.row(batch.cu[s]), d * sizeof(float));
    } else {
      std::fill(o, o + d, 0.0f);
    }
    const uint32_t m0 = batch.pcu[s];
    const uint32_t k = batch.pcu[s + 1] - m0;
    const uint32_t kf = std::max<uint32_t>(k, 2);
    double top1 = 0.0, top2 = 0.0, entropy = 0.0;
    if (k > 0) {
      double top = -INFINITY;
      for (uint32_t m = 0; m < k; ++m) top = std::max(top, double{logits.row(m0 + m)[0]});
      double sum = 0.0;
      for (uint32_t m = 0; m < k; ++m) sum += std::exp(double{logits.row(m0 + m)[0]} - top);
      for (uint32_t m = 0; m < k; ++m) {
        const double q = std::exp(double{logits.row(m0 + m)[0]} - top) / sum;
        if (q > top1) {
          top2 = top1;
          top1 = q;
        } else if (q > top2) {
          top2 = q;  // a tie with top1 lands here and makes the margin 0
        }
        entropy -= q * std::log(std::max(q, 1e-9));
      }
      entropy /= std::log(static_cast<double>(kf));
    }
    o[d] = static_cast<float>(top1);
    o[d + 1] = static_cast<float>(top1 - top2);
    o[d + 2] = static_cast<float>(entropy);
    o[d + 3] = static_cast<float>(kf) / 255.0f;
  }
}

}  // namespace tandem::cpu
