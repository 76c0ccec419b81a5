// Pieces of seeded token sampling over a logits row that sample.cu and reject_sample.cu share
// (engine/ir/sampling.h defines the results): the draw, p = exp((x − max) / T) in f64, block collectives
// with fixed trees, the top-p nucleus search and the inverse CDF, each for one 256-thread block per row.
// sample.cu's top comment describes the passes.
#pragma once

// Included by prelude.cuh, after choice_keys.cuh, whose keys and shuffles it uses.

namespace tandem::kernels::nucleus {

using namespace tandem::kernels::choice;


constexpr unsigned kThreads = kSampleThreads;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kParts = 8;  // ranges per search pass
constexpr unsigned kCap = kSampleCandidates;
constexpr unsigned kPerThread = kCap / kThreads;  // sorted candidates per thread in the boundary scan
constexpr unsigned kAllKeys = 0xffffffffu;        // above every order key of a non-NaN float
constexpr unsigned kKeyNegInf = 0x007fffffu, kKeyPosInf = 0xff800000u;

// ---- reductions (keys and shuffles: choice_keys.cuh) ----

struct Min {
  template <class T>
  TK_DEV T operator()(T a, T b) const { return a < b ? a : b; }
};
struct Max {
  template <class T>
  TK_DEV T operator()(T a, T b) const { return a > b ? a : b; }
};

// ---- the draw and p, exactly as engine/ir/sampling.h computes them ----

TK_DEV unsigned long long mix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// uniform(seed, position, stream, 0): 53 random bits in [0, 1).
TK_DEV double draw_uniform(unsigned long long seed, unsigned long long position, unsigned stream) {
  unsigned long long h = mix64(seed);
  h = mix64(h ^ position);
  h = mix64(h ^ (static_cast<unsigned long long>(stream) << 32));  // (stream << 32) | index 0
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}
TK_DEV double prob(float x, float top, double t) {
  return exp((static_cast<double>(x) - static_cast<double>(top)) / t);
}

// ---- walking the row ----

// Every id once, spread over the block (a pass is one block per SM streaming its row): 16-byte loads
// where the row's stride allows them.
template <class F>
TK_DEV void visit_row(const float* x, unsigned ld, unsigned columns, F&& f) {
  choice::visit_strided<kThreads>(x, (ld & 3u) == 0 ? columns & ~3u : 0, columns, static_cast<F&&>(f));
}

// Thread t's chunk of consecutive ids [begin, end): chunks ascend with the thread, and start at
// multiples of 4 when rows are 16-byte aligned.
TK_DEV void chunk_of(unsigned t, unsigned ld, unsigned columns, unsigned& begin, unsigned& end) {
  unsigned len = (columns + kThreads - 1) / kThreads;
  if ((ld & 3u) == 0) len = (len + 3) & ~3u;
  begin = min_u(columns, t * len);
  end = min_u(columns, begin + len);
}

// This thread's chunk, ascending.
template <class F>
TK_DEV void visit_chunk(const float* x, unsigned ld, unsigned columns, F&& f) {
  const bool vec = (ld & 3u) == 0;
  unsigned begin, end;
  chunk_of(threadIdx.x, ld, columns, begin, end);
  unsigned c = begin;
  if (vec) {
    for (; c + 4 <= end; c += 4) {
      // INVARIANT: begin and len are multiples of 4 when ld is, so x + c is 16-byte aligned.
      TK_ASSERT_ALIGNED(x + c, 16);
      const V4 v = *reinterpret_cast<const V4*>(x + c);
      f(v.x, c);
      f(v.y, c + 1);
      f(v.z, c + 2);
      f(v.w, c + 3);
    }
  }
  for (; c < end; ++c) f(x[c], c);
}

// ---- block collectives: fixed trees, every thread gets the result, each ends ready for reuse ----

struct Scratch {
  double f64[kWarps];
  unsigned u32[kWarps];
  unsigned long long u64[kWarps];
  TK_DEV unsigned long long* of(unsigned long long) { return u64; }
  TK_DEV unsigned* of(unsigned) { return u32; }
  double part_m[kWarps][kParts];
  unsigned part_c[kWarps][kParts], part_min[kWarps][kParts], part_max[kWarps][kParts];
  double total_m[kParts];
  unsigned total_c[kParts], total_min[kParts], total_max[kParts];
};

// A thread's share of a search pass, per range: the mass and count of its ids there, and their
// smallest and largest keys.
struct Parts {
  double m[kParts];
  unsigned c[kParts], min[kParts], max[kParts];
};

TK_DEV unsigned lane() { return threadIdx.x & 31u; }
TK_DEV unsigned warp() { return threadIdx.x >> 5; }

template <class T, class Op>
TK_DEV T warp_reduce(T v, Op op) {
  for (int m = 16; m > 0; m >>= 1) v = op(v, shfl_xor_bits(v, m));
  return v;
}
// Inclusive prefix sums over the warp's lanes.
TK_DEV double warp_inclusive(double v) {
  for (unsigned d = 1; d < 32; d <<= 1) {
    const double o = shfl_bits(v, lane() >= d ? lane() - d : lane());
    if (lane() >= d) v += o;
  }
  return v;
}

template <class T, class Op>
TK_DEV T block_reduce(T v, Op op, Scratch& s) {
  v = warp_reduce(v, op);
  if (lane() == 0) s.of(v)[warp()] = v;
  __syncthreads();
  for (unsigned w = 0; w < kWarps; ++w) v = op(v, s.of(v)[w]);
  __syncthreads();
  return v;
}

// Exclusive prefix sums in thread order, and the total.
TK_DEV unsigned block_exclusive(unsigned v, Scratch& s, unsigned& total) {
  unsigned inc = v;
  for (unsigned d = 1; d < 32; d <<= 1) {
    const unsigned o = shfl_bits(inc, lane() >= d ? lane() - d : lane());
    if (lane() >= d) inc += o;
  }
  if (lane() == 31) s.u32[warp()] = inc;
  __syncthreads();
  unsigned off = 0;
  total = 0;
  for (unsigned w = 0; w < kWarps; ++w) {
    if (w == warp()) off = total;
    total += s.u32[w];
  }
  __syncthreads();
  return off + inc - v;
}

TK_DEV double block_exclusive(double v, Scratch& s, double& total) {
  const double inc = warp_inclusive(v);
  const double before = shfl_bits(inc, lane() > 0 ? lane() - 1 : 0);
  if (lane() == 31) s.f64[warp()] = inc;
  __syncthreads();
  double off = 0.0;
  total = 0.0;
  for (unsigned w = 0; w < kWarps; ++w) {
    if (w == warp()) off = total;
    total += s.f64[w];
  }
  __syncthreads();
  return lane() > 0 ? off + before : off;
}

// The ranges' masses, counts and key bounds over the block into s.total_* (read them before the next
// collective).
TK_DEV void block_sum_parts(const Parts& p, Scratch& s) {
#pragma unroll
  for (unsigned j = 0; j < kParts; ++j) {
    double m = p.m[j];
    unsigned c = p.c[j], lo = p.min[j], hi = p.max[j];
    for (int k = 16; k > 0; k >>= 1) {
      m += shfl_xor_bits(m, k);
      c += shfl_xor_bits(c, k);
      lo = min_u(lo, shfl_xor_bits(lo, k));
      hi = max_u(hi, shfl_xor_bits(hi, k));
    }
    if (lane() == 0) {
      s.part_m[warp()][j] = m;
      s.part_c[warp()][j] = c;
      s.part_min[warp()][j] = lo;
      s.part_max[warp()][j] = hi;
    }
  }
  __syncthreads();
  if (threadIdx.x < kParts) {
    const unsigned j = threadIdx.x;
    double m = 0.0;
    unsigned c = 0, lo = kAllKeys, hi = 0;
    for (unsigned w = 0; w < kWarps; ++w) {
      m += s.part_m[w][j];
      c += s.part_c[w][j];
      lo = min_u(lo, s.part_min[w][j]);
      hi = max_u(hi, s.part_max[w][j]);
    }
    s.total_m[j] = m;
    s.total_c[j] = c;
    s.total_min[j] = lo;
    s.total_max[j] = hi;
  }
  __syncthreads();
}

// ---- a pick row: its request's parameters, and pass 0 ----

// The sequence whose picks hold pick row `row`: pcu[s] <= row < pcu[s + 1], of `seqs` sequences.
TK_DEV unsigned sequence_of_pick(const unsigned* pcu, unsigned seqs, unsigned row) {
  unsigned s = 0, hi = seqs;
  while (hi - s > 1) {
    const unsigned mid = (s + hi) / 2;
    if (pcu[mid] <= row) {
      s = mid;
    } else {
      hi = mid;
    }
  }
  return s;
}

// Sequence s's sampling words (4 per sequence: temperature and top_p as float bits, the seed's two halves).
struct RowSampling {
  float temperature, top_p;
  unsigned long long seed;
};
TK_DEV RowSampling sampling_of(const unsigned* words, unsigned s) {
  const unsigned* w = words + 4 * s;
  return {bits_float(w[0]), bits_float(w[1]),
          static_cast<unsigned long long>(w[2]) | (static_cast<unsigned long long>(w[3]) << 32)};
}

// Pass 0 over a row, block-wide: the largest choice key (the max and, ties to the lower id, the argmax),
// the smallest finite value's key, and whether a NaN is present.
struct RowScan {
  unsigned long long best = 0;
  unsigned min_key = kAllKeys;
  unsigned nan = 0;
  TK_DEV unsigned top_key() const { return static_cast<unsigned>(best >> 32); }
  TK_DEV unsigned argmax(const float* x) const {
    return x[0] != x[0] ? 0u : 0xffffffffu - static_cast<unsigned>(best);
  }
  // Where the reference's p are NaN (a NaN, no finite max, or T not > 0): Sample keeps id 0 under a
  // nucleus, else the last id, and rejection sampling rejects the draft and does the same.
  TK_DEV bool undefined_p(float temperature) const {
    return nan != 0 || top_key() <= kKeyNegInf || top_key() >= kKeyPosInf || !(temperature > 0.0f);
  }
};
// The scan of columns [begin, begin + count) of row x (begin a multiple of 4), every thread getting it.
TK_DEV RowScan scan_range(const float* x, unsigned ld, unsigned begin, unsigned count, Scratch& s) {
  RowScan r;
  visit_row(x + begin, ld, count, [&](float v, unsigned id) {
    r.best = Max{}(r.best, choice_key(v, begin + id));
    if (v != v) {
      r.nan = 1;
    } else if (order_key(v) > kKeyNegInf && order_key(v) < kKeyPosInf) {
      r.min_key = min_u(r.min_key, order_key(v));
    }
  });
  r.best = block_reduce(r.best, Max{}, s);
  r.min_key = block_reduce(r.min_key, Min{}, s);
  r.nan = block_reduce(r.nan, Max{}, s);
  return r;
}
TK_DEV RowScan scan_row(const float* x, unsigned ld, unsigned columns, Scratch& s) {
  return scan_range(x, ld, 0, columns, s);
}
// The row's scan from its parts' (SampleArgs::scans), combined in their order by every thread.
TK_DEV RowScan gather_scan(const unsigned long long* parts, unsigned count) {
  RowScan r;
  for (unsigned p = 0; p < count; ++p) {
    r.best = Max{}(r.best, parts[2 * p]);
    r.min_key = min_u(r.min_key, static_cast<unsigned>(parts[2 * p + 1]));
    r.nan = Max{}(r.nan, static_cast<unsigned>(parts[2 * p + 1] >> 32));
  }
  return r;
}

// ---- the nucleus search ----

struct Row {
  const float* x;
  unsigned ld, columns;
  float top;
  double t;
};

// Range j of [lo, hi) under descending thresholds th: j = 0 is [th[0], hi), j = kParts − 1 is [lo, th[6]).
TK_DEV unsigned part_of(unsigned key, const unsigned (&th)[kParts - 1]) {
  unsigned j = 0;
#pragma unroll
  for (unsigned q = 0; q < kParts - 1; ++q) j += key < th[q] ? 1u : 0u;
  return j;
}

// One search pass over the ids with keys in [lo, hi): this thread's share of each range.
TK_DEV void split_pass(const Row& r, unsigned lo, unsigned hi, const unsigned (&th)[kParts - 1], Parts& p) {
#pragma unroll
  for (unsigned j = 0; j < kParts; ++j) {
    p.m[j] = 0.0;
    p.c[j] = 0;
    p.min[j] = kAllKeys;
    p.max[j] = 0;
  }
  visit_row(r.x, r.ld, r.columns, [&](float v, unsigned) {
    const unsigned key = order_key(v);
    if (key < lo || key >= hi) return;
    const double q = prob(v, r.top, r.t);
    const unsigned part = part_of(key, th);
#pragma unroll
    for (unsigned j = 0; j < kParts; ++j) {
      if (j == part) {
        p.m[j] += q;
        p.c[j] += 1;
        p.min[j] = min_u(p.min[j], key);
        p.max[j] = max_u(p.max[j], key);
      }
    }
  });
}

// Thresholds strictly inside [lo, hi) (hi − lo >= 2), descending: evenly spaced in value for the first
// passes, in key order after (which shrinks the range 8-fold per pass whatever the values).
TK_DEV void split_thresholds(unsigned lo, unsigned hi, float xmin, float top, bool by_value,
                             unsigned (&th)[kParts - 1]) {
  const float lo_v = lo <= order_key(xmin) ? xmin : key_float(lo);
  const float hi_v = hi > order_key(top) ? top : key_float(hi - 1);
  by_value = by_value && lo_v < hi_v && lo_v - lo_v == 0.0f && hi_v - hi_v == 0.0f;  // both finite
  for (unsigned q = 0; q < kParts - 1; ++q) {
    unsigned k;
    if (by_value) {
      const double at = static_cast<double>(hi_v) -
                        (static_cast<double>(hi_v) - static_cast<double>(lo_v)) * (q + 1) / kParts;
      k = order_key(static_cast<float>(at));
    } else {
      k = hi - static_cast<unsigned>((static_cast<unsigned long long>(hi - lo) * (q + 1)) / kParts);
    }
    th[q] = min_u(max_u(k, lo + 1), hi - 1);
  }
}

// a[j] of a register array, indexed by constants only (a runtime index would put it in local memory).
template <unsigned N>
TK_DEV unsigned select(const unsigned (&a)[N], unsigned j) {
  unsigned out = 0;
#pragma unroll
  for (unsigned q = 0; q < N; ++q) out = q == j ? a[q] : out;
  return out;
}

// Candidates before-or-equal in the reference's order: p descending, then the lower id.
TK_DEV bool ahead(double p, unsigned id, double q, unsigned qid) { return p > q || (p == q && id < qid); }

struct Shared {
  double cand_p[kCap];
  unsigned cand_id[kCap];
  unsigned result;
  Scratch scratch;
};

// Bitonic sort of the candidates [0, len) into the reference's order (len a power of two).
TK_DEV void sort_candidates(Shared& sh, unsigned len) {
  for (unsigned size = 2; size <= len; size <<= 1) {
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      for (unsigned i = threadIdx.x; i < len / 2; i += kThreads) {
        const unsigned lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const double p = sh.cand_p[lo], q = sh.cand_p[hi];
        const unsigned pid = sh.cand_id[lo], qid = sh.cand_id[hi];
        if (ahead(q, qid, p, pid) == ((lo & size) == 0)) {
          sh.cand_p[lo] = q;
          sh.cand_p[hi] = p;
          sh.cand_id[lo] = qid;
          sh.cand_id[hi] = pid;
        }
      }
      __syncthreads();
    }
  }
}

TK_DEV unsigned pow2_at_least(unsigned v) {
  unsigned p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The nucleus: every id (all), or the ids with keys at or above hi and those in [lo, hi) at or ahead of
// the boundary (p_b, id_b) in the reference's order.
struct Nucleus {
  bool all = true;
  unsigned lo = 0, hi = 0;
  double p_b = 0.0;
  unsigned id_b = 0;
  // The id's p if it is in the nucleus, else 0 (without an exp for ids below the boundary's range).
  TK_DEV double mass(const Row& r, float v, unsigned id) const {
    if (all) return prob(v, r.top, r.t);
    const unsigned key = order_key(v);
    if (key < lo) return 0.0;
    const double p = prob(v, r.top, r.t);
    return key >= hi || p > p_b || (p == p_b && id <= id_b) ? p : 0.0;
  }
};

// Sorts the gathered range and returns the boundary: the first candidate whose mass from the top reaches
// the target (the last one kept), else the last candidate.
TK_DEV void boundary_of_candidates(Shared& sh, unsigned count, double above, double target, Nucleus& nu) {
  const unsigned len = pow2_at_least(count);
  for (unsigned i = count + threadIdx.x; i < len; i += kThreads) {
    sh.cand_p[i] = -1.0;  // below every p, so padding sorts last
    sh.cand_id[i] = 0xffffffffu;
  }
  __syncthreads();
  sort_candidates(sh, len);
  double local[kPerThread];
  double sum = 0.0;
#pragma unroll
  for (unsigned i = 0; i < kPerThread; ++i) {
    const unsigned at = threadIdx.x * kPerThread + i;
    if (at < count) sum += sh.cand_p[at];
    local[i] = sum;
  }
  double total;
  const double before = block_exclusive(sum, sh.scratch, total);
  unsigned first = kCap;
#pragma unroll
  for (unsigned i = 0; i < kPerThread; ++i) {
    const unsigned at = threadIdx.x * kPerThread + i;
    if (at < count && first == kCap && above + (before + local[i]) >= target) first = at;
  }
  first = block_reduce(first, Min{}, sh.scratch);
  const unsigned b = first < count ? first : count - 1;
  nu.p_b = sh.cand_p[b];
  nu.id_b = sh.cand_id[b];
  __syncthreads();  // the candidates may be rewritten
}

// The id of the c-th (from 1) smallest id whose key is `key`, by a prefix count over ascending chunks.
TK_DEV unsigned id_by_rank(const Row& r, unsigned key, unsigned c, Shared& sh) {
  unsigned mine = 0;
  visit_chunk(r.x, r.ld, r.columns, [&](float v, unsigned) { mine += order_key(v) == key ? 1u : 0u; });
  unsigned total;
  const unsigned before = block_exclusive(mine, sh.scratch, total);
  if (before < c && c <= before + mine) {
    unsigned seen = before;
    visit_chunk(r.x, r.ld, r.columns, [&](float v, unsigned id) {
      if (order_key(v) == key && ++seen == c) sh.result = id;
    });
  }
  __syncthreads();
  const unsigned id = sh.result;
  __syncthreads();
  return id;
}

// The nucleus of top_p < 1 (dflash.md §1.8): a search over ranges of x, then the boundary.
TK_DEV Nucleus find_nucleus(const Row& r, float top_p, float xmin, Shared& sh) {
  Nucleus nu;
  nu.all = false;
  // Pass 1's ranges: x >= max − T·c for these c (p >= e^-c), then the rest.
  const double ladder[kParts - 1] = {0.5, 1.5, 3.0, 4.5, 6.0, 8.0, 11.0};
  unsigned lo = 0, hi = kAllKeys, th[kParts - 1];
  for (unsigned q = 0; q < kParts - 1; ++q) {
    th[q] = order_key(static_cast<float>(static_cast<double>(r.top) - r.t * ladder[q]));
  }
  double above = 0.0, target = 0.0;
  Parts mine;
  for (unsigned pass = 0;; ++pass) {
    split_pass(r, lo, hi, th, mine);
    block_sum_parts(mine, sh.scratch);
    const double* mt = sh.scratch.total_m;
    const unsigned* ct = sh.scratch.total_c;
    if (pass == 0) {
      double sum = 0.0;
#pragma unroll
      for (unsigned j = 0; j < kParts; ++j) sum += mt[j];
      target = static_cast<double>(top_p) * sum;
    }
    // The first range from the top holding ids whose mass reaches the target; rounding short of it:
    // the last range holding ids. Either way the range holds the ids the pass counted in it.
    unsigned pick = kParts, last = 0;
    double cum = above;
#pragma unroll
    for (unsigned j = 0; j < kParts; ++j) {
      if (ct[j] > 0) {
        last = j;
        if (pick == kParts && cum + mt[j] >= target) pick = j;
      }
      cum += mt[j];
    }
    if (pick == kParts) pick = last;
#pragma unroll
    for (unsigned j = 0; j < kParts; ++j) above += j < pick ? mt[j] : 0.0;  // + 0.0 changes nothing
    // The range narrows to its ids' keys (so a range of one value shows at once).
    lo = sh.scratch.total_min[pick];
    hi = sh.scratch.total_max[pick] + 1;
    const unsigned count = ct[pick];
    __syncthreads();  // the totals are read: the next collective may rewrite them
    if (count <= kCap) {
      unsigned total;
      unsigned at = block_exclusive(select(mine.c, pick), sh.scratch, total);
      visit_row(r.x, r.ld, r.columns, [&](float v, unsigned id) {
        const unsigned key = order_key(v);
        if (key < lo || key >= hi) return;
        sh.cand_p[at] = prob(v, r.top, r.t);
        sh.cand_id[at] = id;
        ++at;
      });
      boundary_of_candidates(sh, count, above, target, nu);
      break;
    }
    if (hi - lo == 1) {  // one value, too many ids to gather: its ids are kept in ascending order
      const float xb = key_float(lo);
      nu.p_b = prob(xb, r.top, r.t);
      unsigned keep = count;
      if (nu.p_b > 0.0) {
        const double need = ceil((target - above) / nu.p_b);
        keep = need < 1.0 ? 1u : (need >= static_cast<double>(count) ? count : static_cast<unsigned>(need));
      }
      nu.id_b = id_by_rank(r, lo, keep, sh);
      break;
    }
    split_thresholds(lo, hi, xmin, r.top, pass < 2, th);
  }
  nu.lo = lo;
  nu.hi = hi;
  return nu;
}

// The inverse CDF over weights mass(x, id) >= 0 in ascending id order at the draw u: the first id whose
// prefix mass passes u · total. Threads sum their chunks and a block prefix sum finds the chunk it falls
// in; that thread's warp splits the chunk into 32 slices and finds the slice the same way, and one lane
// walks it. Where rounding leaves the goal past a total, the last id with mass takes it, as in the
// reference; with no mass at all, `fallback`.
template <class Mass>
TK_DEV unsigned draw_by_mass(const Row& r, const Mass& mass, double u, unsigned fallback, Shared& sh) {
  double sum = 0.0;
  unsigned last = 0;  // 1 + the largest id with mass, 0 for none
  visit_chunk(r.x, r.ld, r.columns, [&](float v, unsigned id) {
    const double w = mass(v, id);
    sum += w;
    if (w > 0.0) last = id + 1;
  });
  double kept;
  const double before = block_exclusive(sum, sh.scratch, kept);
  const double goal = u * kept;
  const unsigned first = block_reduce(before + sum > goal ? threadIdx.x : kThreads, Min{}, sh.scratch);
  last = block_reduce(last, Max{}, sh.scratch);
  if (threadIdx.x == 0) sh.result = last > 0 ? last - 1 : fallback;
  __syncthreads();
  if (first < kThreads && warp() == first / 32) {  // the whole warp, so its shuffles see every lane
    const double base = shfl_bits(before, first % 32);
    unsigned begin, end;
    chunk_of(first, r.ld, r.columns, begin, end);
    const unsigned slice = (end - begin + 31) / 32;
    const unsigned lo = min_u(end, begin + lane() * slice), hi = min_u(end, lo + slice);
    double mine = 0.0;
    for (unsigned i = lo; i < hi; ++i) mine += mass(r.x[i], i);
    const double inc = warp_inclusive(mine);
    const double excl = shfl_bits(inc, lane() > 0 ? lane() - 1 : 0);
    const unsigned cross = warp_reduce(base + inc > goal ? lane() : 32u, Min{});
    const unsigned massive = warp_reduce(mine > 0.0 ? lane() + 1 : 0u, Max{});  // 1 + the last lane with mass
    const unsigned walker = cross < 32 ? cross : (massive > 0 ? massive - 1 : 32u);
    if (lane() == walker) {
      double run = lane() > 0 ? excl : 0.0;
      unsigned pick = kAllKeys, heavy = kAllKeys;
      for (unsigned i = lo; i < hi; ++i) {
        const double w = mass(r.x[i], i);
        run += w;
        if (w > 0.0) {
          heavy = i;
          if (pick == kAllKeys && base + run > goal) pick = i;
        }
      }
      if (pick != kAllKeys) {
        sh.result = pick;
      } else if (heavy != kAllKeys) {
        sh.result = heavy;
      }
    }
  }
  __syncthreads();
  return sh.result;
}

// The inverse CDF over the nucleus (its p, not normalized) at the draw u.
TK_DEV unsigned draw_token(const Row& r, const Nucleus& nu, double u, unsigned fallback, Shared& sh) {
  return draw_by_mass(r, [&](float v, unsigned id) { return nu.mass(r, v, id); }, u, fallback, sh);
}

}  // namespace tandem::kernels::nucleus
