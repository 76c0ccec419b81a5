// The DFlash 2 selector walk's argument pack (graph.h SelectorWalk; engine/ir/selector.h defines each
// step), apart from args.cuh so that only selector_walk.cu and the backend's launch table include it.
#pragma once

#include "args.cuh"

namespace tandem::kernels {

// ---- the DFlash 2 selector walk (graph.h SelectorWalk; engine/ir/selector.h defines each step) ----

// One block of kSelectorThreads per sequence walks its pick rows in order: a warp per candidate sums
// its energy's low-rank term; k <= kTopKMax candidates, any rank.
enum : unsigned { kSelectorThreads = 256 };

// ids[p] = cand[p, pick], q[p, :k] = softmax(E / T) (zeros at T = 0) for the picks p of sequence s
// (pcu[s] <= p < pcu[s + 1]), the first one's predecessor tokens[cu[s]], each later one's the previous pick.
struct SelectorWalkArgs {
  unsigned* ids;             // [picks]
  float* q;                  // [picks, k]
  const unsigned* cand;      // [picks, k]
  const float* values;       // [picks, k]
  const float* sel;          // [picks, rank]
  const float* pred;         // [vocab, rank]
  const float* succ;         // [vocab, rank]
  const unsigned* tokens;    // [tokens]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* pcu;       // [seqs + 1]
  const unsigned* prow;      // [picks]
  const unsigned* start;     // [seqs]
  const unsigned* sampling;  // [seqs][4]: temperature and top_p as f32 bits, the seed's low and high words
  const unsigned* n;
  unsigned k;                // 1 <= k <= kTopKMax
  unsigned rank;
  float softcap;             // 0: no soft-capping
  float multiplier;
};

}  // namespace tandem::kernels
