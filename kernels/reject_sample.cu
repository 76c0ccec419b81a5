// Rejection sampling of verify blocks on the device (graph.h RejectSample; engine/ir/reject.h defines the
// rule, dflash.md §1.8), in place on Sample's ids. reject_sample_f32_u32: one 256-thread block per draft
// row, independently (a row's test needs only its own p and q): p = the tempered top-p distribution of the
// target's row (nucleus.cuh, as Sample computes it), q_i(d) from the proposals (v1: softmax of the
// drafter's logits row / T; v2: the candidate's q), the accept test u·q(d) < p(d) with the kAccept draw,
// and for a rejected row the inverse CDF of max(p − q, 0) with the kResidual draw (p itself where no mass
// is left). reject_commit_u32: one thread per sequence keeps the drafts up to the first rejection.
//
// Every sum is f64 in a fixed per-thread order and tree, so results never depend on the batch; the host
// reference sums in id order instead, so the two differ only where a draw falls within rounding (about
// 1e-16 relative) of a threshold: the accept test's u·q(d) against p(d), or a boundary of the inverse CDF.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::choice;
using namespace tandem::kernels::nucleus;

namespace {

constexpr unsigned kAcceptStream = 2, kResidualStream = 3;  // ir::Stream::kAccept, kResidual
constexpr unsigned kNoMass = 0xffffffffu;                    // draw_by_mass found no residual mass

// A draft row's proposal q over the vocabulary.
struct Proposal {
  bool dense = true;
  const float* y = nullptr;  // dense: the drafter's logits row (width ids); sparse: q of each candidate
  unsigned width = 0;
  unsigned ld = 0;
  float top = 0.0f;          // dense: the row's max
  double sum = 1.0;          // dense: Σ exp((y − top) / T)
  double t = 1.0;
  const unsigned* sorted_ids = nullptr;  // sparse: the candidates ascending, with their q
  const double* sorted_q = nullptr;

  TK_DEV double q(unsigned id) const {
    if (dense) return id < width ? exp((static_cast<double>(y[id]) - static_cast<double>(top)) / t) / sum : 0.0;
    unsigned lo = 0, hi = width;  // the first candidate >= id
    while (lo < hi) {
      const unsigned mid = (lo + hi) / 2;
      if (sorted_ids[mid] < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < width && sorted_ids[lo] == id ? sorted_q[lo] : 0.0;
  }
};

struct RejectShared {
  unsigned cand[kTopKMax];
  double q[kTopKMax];
};

// Σ f(v, id) over the row's ids in the fixed chunk order and tree.
template <class F>
TK_DEV double block_sum(const float* x, unsigned ld, unsigned columns, const F& f, Shared& sh) {
  double mine = 0.0;
  visit_chunk(x, ld, columns, [&](float v, unsigned id) { mine += f(v, id); });
  double total;
  block_exclusive(mine, sh.scratch, total);
  return total;
}

__device__ __forceinline__ void reject_row(const RejectSampleArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsPicks)) return;  // the whole block leaves together
  const unsigned s = sequence_of_pick(a.pcu, a.n[kRowsSeqs], row);
  const unsigned* words = a.proposals + kProposalWords * s;
  const unsigned kind = words[7];
  const unsigned i = a.prow[row] - a.cu[s];     // every row of such a sequence is picked (ir::check)
  const unsigned drafts = a.cu[s + 1] - a.cu[s] - 1;
  if (kind == kProposalNone || i >= drafts) return;  // block-uniform: no proposals, or the bonus row
  // INVARIANT: row < the real picks <= the bucket picks lowering sized x (ld wide) and ids for; ir::check
  // gave this sequence one proposal row per draft (i < drafts) of `width` f32 values (and u32 candidates)
  // at the addresses the index holds, on this device (CudaPlan::check_batch), valid while the drafter's
  // block plan does not run again; the draft d is a batch id, below the vocabulary.
  const RowSampling sampling = sampling_of(a.sampling, s);
  const float temperature = sampling.temperature, top_p = sampling.top_p;
  const unsigned long long seed = sampling.seed;
  const unsigned d = a.tokens[a.cu[s] + i + 1];
  const unsigned position = a.start[s] + i + 1;
  const float* x = a.x + static_cast<unsigned long long>(row) * a.ld;
  const unsigned long long values = static_cast<unsigned long long>(words[0]) |
                                    (static_cast<unsigned long long>(words[1]) << 32);
  const unsigned long long cands = static_cast<unsigned long long>(words[4]) |
                                   (static_cast<unsigned long long>(words[5]) << 32);

  __shared__ Shared sh;
  __shared__ RejectShared rs;
  const RowScan scan = scan_row(x, a.ld, a.columns, sh.scratch);
  if (scan.undefined_p(temperature)) {
    // Every comparison with the reference's NaN p fails: the draft is rejected and, as Sample does for
    // such a row, id 0 under a nucleus, else the last id is drawn.
    if (threadIdx.x == 0) a.ids[row] = top_p < 1.0f ? 0u : a.columns - 1;
    return;
  }
  const Row r{x, a.ld, a.columns, key_float(scan.top_key()), static_cast<double>(temperature)};
  const Nucleus nu = top_p < 1.0f ? find_nucleus(r, top_p, key_float(scan.min_key), sh) : Nucleus{};
  const double kept = block_sum(x, a.ld, a.columns, [&](float v, unsigned id) { return nu.mass(r, v, id); }, sh);

  Proposal q;
  q.width = words[3];
  q.ld = words[2];
  q.t = static_cast<double>(temperature);
  if (kind == kProposalDense) {
    // INVARIANT: the values hold `drafts` rows of q.ld floats (ir::check), i < drafts.
    q.y = reinterpret_cast<const float*>(values) + static_cast<unsigned long long>(i) * q.ld;
    unsigned top = 0;
    visit_row(q.y, q.ld, q.width, [&](float v, unsigned) { top = max_u(top, order_key(v)); });
    q.top = key_float(block_reduce(top, Max{}, sh.scratch));
    const Proposal& qc = q;
    q.sum = block_sum(q.y, q.ld, q.width, [&](float v, unsigned) {
      return exp((static_cast<double>(v) - static_cast<double>(qc.top)) / qc.t);
    }, sh);
  } else {
    q.dense = false;
    if (threadIdx.x == 0) {  // at most kTopKMax candidates (a TopK's: distinct ids), sorted by id
      // INVARIANT: candidates and q hold `drafts` rows (ir::check) of width <= kTopKMax (CudaPlan::check_batch).
      const unsigned* c = reinterpret_cast<const unsigned*>(cands) + static_cast<unsigned long long>(i) * words[6];
      const float* qv = reinterpret_cast<const float*>(values) + static_cast<unsigned long long>(i) * q.ld;
      for (unsigned k = 0; k < q.width; ++k) {
        unsigned at = k;
        for (; at > 0 && rs.cand[at - 1] > c[k]; --at) {
          rs.cand[at] = rs.cand[at - 1];
          rs.q[at] = rs.q[at - 1];
        }
        rs.cand[at] = c[k];
        rs.q[at] = static_cast<double>(qv[k]);
      }
    }
    __syncthreads();
    q.sorted_ids = rs.cand;
    q.sorted_q = rs.q;
  }

  const double pd = d < a.columns ? nu.mass(r, x[d], d) / kept : 0.0;
  const double qd = q.q(d);
  unsigned token;
  if (draw_uniform(seed, position, kAcceptStream) * qd < pd) {
    token = kRejectAccepted;
  } else {
    const double u = draw_uniform(seed, position, kResidualStream);
    const auto residual = [&](float v, unsigned id) {
      const double m = nu.mass(r, v, id) / kept - q.q(id);
      return m > 0.0 ? m : 0.0;
    };
    token = draw_by_mass(r, residual, u, kNoMass, sh);
    if (token == kNoMass) token = draw_token(r, nu, u, a.columns - 1, sh);  // p == q: the reference draws from p
  }
  if (threadIdx.x == 0) a.ids[row] = token;
}

// Each sequence with proposals: its drafts up to the first row that rejected, that row's token, then
// kRejectNone; the last row keeps Sample's bonus when every draft stayed.
__device__ __forceinline__ void commit(const RejectSampleArgs& a) {
  const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= real_rows(a.n, kRowsSeqs) || a.proposals[kProposalWords * s + 7] == kProposalNone) return;
  // INVARIANT: s < the real sequences; such a sequence picks all its rows (ir::check), so its pick rows
  // pcu[s] .. pcu[s] + drafts are its rows, inside ids.
  const unsigned drafts = a.cu[s + 1] - a.cu[s] - 1;
  unsigned* ids = a.ids + a.pcu[s];
  bool ended = false;
  for (unsigned i = 0; i < drafts; ++i) {
    if (ended) {
      ids[i] = kRejectNone;
    } else if (ids[i] == kRejectAccepted) {
      ids[i] = a.tokens[a.cu[s] + i + 1];
    } else {
      ended = true;
    }
  }
  if (ended) ids[drafts] = kRejectNone;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kSampleThreads, 2) reject_sample_f32_u32(RejectSampleArgs a) {
  enter_grid();
  reject_row(a);
}
extern "C" __global__ void __launch_bounds__(32) reject_commit_u32(RejectSampleArgs a) {
  enter_grid();
  commit(a);
}
