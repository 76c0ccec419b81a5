// The DFlash 2 selector walk (graph.h SelectorWalk; engine/ir/selector.h defines each step exactly, in f64
// with every product and sum rounded once): one block per sequence walks its pick rows in order, since
// each row's predecessor is the previous row's pick. Per row the block forms bonus[j] = P[prev, j]·sel[j]
// (exact in f64), a warp per candidate sums bonus · C[candidate] over the rank in the reference's lane
// order and butterfly, and thread 0 picks (greedy, or the Gumbel draw of (seed, position, kGumbel, k))
// and writes the pick and q = softmax(E / T).
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::choice;

namespace {

constexpr unsigned kThreads = kSelectorThreads;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kMaxRank = 1024;  // bonus rows in shared memory; larger ranks are read in tiles
constexpr unsigned kGumbel = 5;      // ir::Stream::kGumbel

TK_DEV unsigned lane() { return threadIdx.x & 31u; }
TK_DEV unsigned warp() { return threadIdx.x >> 5; }

TK_DEV unsigned long long mix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// uniform_open(seed, position, Stream::kGumbel, index): 53 random bits in (0, 1).
TK_DEV double gumbel_uniform(unsigned long long seed, unsigned long long position, unsigned index) {
  unsigned long long h = mix64(seed);
  h = mix64(h ^ position);
  h = mix64(h ^ ((static_cast<unsigned long long>(kGumbel) << 32) | index));
  return mul_rn(static_cast<double>(h >> 11) + 0.5, 0x1.0p-53);
}

// ir::selector_cap.
TK_DEV double cap(float value, float softcap, float multiplier) {
  const double scaled = mul_rn(static_cast<double>(multiplier), static_cast<double>(value));
  if (!(softcap > 0.0f)) return scaled;
  return mul_rn(static_cast<double>(softcap), tanh(scaled / static_cast<double>(softcap)));
}

struct Shared {
  double bonus[kMaxRank];
  double energy[kTopKMax];
  unsigned prev;
};

__device__ __forceinline__ void walk(const SelectorWalkArgs& a) {
  const unsigned s = blockIdx.x;
  if (s >= real_rows(a.n, kRowsSeqs)) return;  // the whole block leaves together
  // INVARIANT: s < the real sequences, whose picks lie below the bucket picks lowering sized ids, q, cand,
  // values (k wide) and sel (rank wide) for; the first token and every candidate are below the codebooks'
  // rows (the drafter checks the anchor; candidates come from a TopK over at most that many columns).
  __shared__ Shared sh;
  const float temperature = bits_float(a.sampling[4 * s]);
  const unsigned long long seed = static_cast<unsigned long long>(a.sampling[4 * s + 2]) |
                                 (static_cast<unsigned long long>(a.sampling[4 * s + 3]) << 32);
  if (threadIdx.x == 0) sh.prev = a.tokens[a.cu[s]];
  __syncthreads();
  for (unsigned p = a.pcu[s]; p < a.pcu[s + 1]; ++p) {
    const unsigned prev = sh.prev;
    const float* pred = a.pred + static_cast<unsigned long long>(prev) * a.rank;
    const float* sel = a.sel + static_cast<unsigned long long>(p) * a.rank;
    const unsigned* cand = a.cand + static_cast<unsigned long long>(p) * a.k;
    // Lane l's partial sum over j = l, l + 32, ..., in tiles of kMaxRank bonus values.
    double partial[kTopKMax / kWarps];
#pragma unroll
    for (unsigned i = 0; i < kTopKMax / kWarps; ++i) partial[i] = 0.0;
    for (unsigned tile = 0; tile < a.rank; tile += kMaxRank) {
      const unsigned len = min_u(kMaxRank, a.rank - tile);
      for (unsigned j = threadIdx.x; j < len; j += kThreads) {
        sh.bonus[j] = mul_rn(static_cast<double>(pred[tile + j]), static_cast<double>(sel[tile + j]));
      }
      __syncthreads();
#pragma unroll
      for (unsigned i = 0; i < kTopKMax / kWarps; ++i) {
        const unsigned c = warp() + i * kWarps;
        if (c < a.k) {
          const float* succ = a.succ + static_cast<unsigned long long>(cand[c]) * a.rank + tile;
          for (unsigned j = lane(); j < len; j += 32) {
            partial[i] = add_rn(partial[i], mul_rn(sh.bonus[j], static_cast<double>(succ[j])));
          }
        }
      }
      __syncthreads();  // the bonus tile is rewritten
    }
#pragma unroll
    for (unsigned i = 0; i < kTopKMax / kWarps; ++i) {
      const unsigned c = warp() + i * kWarps;
      double v = partial[i];
      for (int m = 16; m > 0; m >>= 1) v = add_rn(v, shfl_xor_bits(v, m));
      if (c < a.k && lane() == 0) {
        sh.energy[c] = add_rn(cap(a.values[static_cast<unsigned long long>(p) * a.k + c], a.softcap, a.multiplier), v);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // ir::selector_pick over at most kTopKMax energies
      float* q = a.q + static_cast<unsigned long long>(p) * a.k;
      unsigned pick = 0;
      if (temperature == 0.0f) {
        for (unsigned c = 1; c < a.k; ++c) {
          if (sh.energy[c] > sh.energy[pick]) pick = c;
        }
        for (unsigned c = 0; c < a.k; ++c) q[c] = 0.0f;
      } else {
        const double t = static_cast<double>(temperature);
        const unsigned position = a.start[s] + (a.prow[p] - a.cu[s]);
        double top = sh.energy[0];
        for (unsigned c = 0; c < a.k; ++c) top = sh.energy[c] > top ? sh.energy[c] : top;
        double sum = 0.0, best = neg_inf();
        for (unsigned c = 0; c < a.k; ++c) {
          const double e = exp((sh.energy[c] - top) / t);
          sum = add_rn(sum, e);
          const double g = -log(-log(gumbel_uniform(seed, position, c)));
          const double score = add_rn(sh.energy[c] / t, g);
          if (score > best) {
            best = score;
            pick = c;
          }
        }
        for (unsigned c = 0; c < a.k; ++c) q[c] = static_cast<float>(exp((sh.energy[c] - top) / t) / sum);
      }
      sh.prev = cand[pick];
      a.ids[p] = cand[pick];
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) selector_walk_f32_u32(SelectorWalkArgs a) {
  enter_grid();
  walk(a);
}
