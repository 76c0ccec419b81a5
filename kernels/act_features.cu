// Act-head features (scorer.md §2 ActFeatures): per sequence, its CLS row then top1, top1 − top2, the
// normalized entropy of softmax(logits) and max(k,2)/255. One block per sequence; the statistics run
// sequentially on thread 0 in float64, in the reference's order, so they do not depend on the batch.
#include "prelude.cuh"

using namespace tandem::kernels;

extern "C" __global__ void __launch_bounds__(256) act_features_f32_f32(ActFeaturesArgs a) {
  enter_grid();
  const unsigned s = blockIdx.x;
  if (s >= real_rows(a.n, kRowsSeqs)) return;
  const unsigned lo = a.cu[s], hi = a.cu[s + 1];
  // INVARIANT: s < the real seqs; cu and pcu bound rows and markers that exist (ir::check).
  float* out = a.out + static_cast<unsigned long long>(s) * (a.width + 4);
  const float* cls = a.h + static_cast<unsigned long long>(lo) * a.width;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) out[c] = lo < hi ? cls[c] : 0.0f;
  if (threadIdx.x != 0) return;
  const unsigned m0 = a.pcu[s], m1 = a.pcu[s + 1];
  const unsigned k = m1 - m0;
  const unsigned kf = k > 2 ? k : 2;
  double top1 = 0.0, margin = 0.0, entropy = 0.0;
  if (k > 0) {
    double mx = a.logits[m0];
    for (unsigned i = m0 + 1; i < m1; ++i) mx = fmax(mx, static_cast<double>(a.logits[i]));
    double sum = 0.0;
    for (unsigned i = m0; i < m1; ++i) sum += exp(static_cast<double>(a.logits[i]) - mx);
    double t1 = 0.0, t2 = 0.0;
    for (unsigned i = m0; i < m1; ++i) {
      const double q = exp(static_cast<double>(a.logits[i]) - mx) / sum;
      if (q > t1) {
        t2 = t1;
        t1 = q;
      } else if (q > t2) {
        t2 = q;
      }
      entropy -= q * log(fmax(q, 1e-9));
    }
    top1 = t1;
    margin = t1 - t2;
    entropy /= log(static_cast<double>(kf));
  }
  out[a.width] = static_cast<float>(top1);
  out[a.width + 1] = static_cast<float>(margin);
  out[a.width + 2] = static_cast<float>(entropy);
  out[a.width + 3] = static_cast<float>(kf) / 255.0f;
}
