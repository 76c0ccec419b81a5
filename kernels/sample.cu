// Seeded token sampling (graph.h Sample; engine/ir/sampling.h sample_token): argmax at temperature 0,
// else softmax(x / T) in f64 cut to the top-p nucleus, then the inverse CDF in ascending id order at
// the draw uniform(seed, position, kTarget), or kDraft for a drafter's block rows (SampleArgs::stream and
// fill). One 256-thread block per pick row; every sum is f64 with a
// fixed per-thread order and a fixed tree, so a row's token never depends on the batch.
//
// Passes over the row, none of which sorts the vocabulary:
//  0. the max (with the argmax id), the smallest finite value, and whether a NaN is present;
//  1. (top_p < 1) p = exp((x − max) / T) for every id: their sum S, and the mass and count of 8 ranges
//     of x (a fixed ladder below the max). The nucleus is a prefix of the order (x desc, id asc): the
//     range where the mass from the top reaches top_p · S holds its boundary;
//  2. (while that range holds more than kSampleCandidates ids) split the range in 8 again, computing p
//     only for the ids inside it;
//  3. gather the range's ids and p into shared memory, sort them (p desc, id asc: the reference's
//     order) and find the boundary by a block prefix sum; a range of one value too crowded to gather
//     (an exact tie) takes the boundary's id by rank instead;
//  4. the inverse CDF: per-thread chunks of ascending ids sum the nucleus' p, a block prefix sum finds
//     the chunk where the draw falls, and that thread's warp walks it.
// The search, its block collectives and the walk live in nucleus.cuh (through the prelude), which
// reject_sample.cu shares.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::choice;
using namespace tandem::kernels::nucleus;

namespace {

__device__ __forceinline__ void sample_row(const SampleArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsPicks)) return;  // the whole block leaves together
  // INVARIANT: row < the real picks <= the bucket picks lowering sized x (ld wide) and out for; the index
  // tables hold the batch ir::check validated, so the sequence found below and its tables are in range.
  const float* x = a.x + static_cast<unsigned long long>(row) * a.ld;
  const unsigned s = sequence_of_pick(a.pcu, a.n[kRowsSeqs], row);
  const RowSampling sampling = sampling_of(a.sampling, s);
  const unsigned position = a.start[s] + (a.prow[row] - a.cu[s]) + a.fill;

  __shared__ Shared sh;
  const RowScan scan = a.parts > 1 ? gather_scan(a.scans + static_cast<unsigned long long>(row) * a.parts * 2, a.parts)
                                   : scan_row(x, a.ld, a.columns, sh.scratch);
  const unsigned argmax = scan.argmax(x);
  unsigned token;
  if (sampling.temperature == 0.0f) {
    token = argmax;
  } else if (scan.undefined_p(sampling.temperature)) {
    token = sampling.top_p < 1.0f ? 0u : a.columns - 1;
  } else {
    Row r{x, a.ld, a.columns, key_float(scan.top_key()), static_cast<double>(sampling.temperature)};
    const Nucleus nu =
        sampling.top_p < 1.0f ? find_nucleus(r, sampling.top_p, key_float(scan.min_key), sh) : Nucleus{};
    token = draw_token(r, nu, draw_uniform(sampling.seed, position, a.stream), argmax, sh);
  }
  if (threadIdx.x == 0) a.out[row] = token;
}

// Part blockIdx.y of pick row blockIdx.x: its scan into scans (sample_f32_u32 then gathers the parts).
// INVARIANT: as sample_row's; with parts > 1, scans holds parts × 2 words a bucket pick (checked at lowering).
__device__ __forceinline__ void scan_part(const SampleArgs& a) {
  const unsigned row = blockIdx.x, part = blockIdx.y;
  if (row >= real_rows(a.n, kRowsPicks)) return;
  const ColumnPart p = column_part(a.columns, a.parts, part);
  __shared__ Scratch scratch;
  const RowScan r = scan_range(a.x + static_cast<unsigned long long>(row) * a.ld, a.ld, p.begin, p.count, scratch);
  if (threadIdx.x == 0) {
    unsigned long long* out = a.scans + (static_cast<unsigned long long>(row) * a.parts + part) * 2;
    out[0] = r.best;
    out[1] = r.min_key | static_cast<unsigned long long>(r.nan) << 32;
  }
}

}  // namespace

// Two blocks per multiprocessor: one streams its row while the other sorts or scans.
extern "C" __global__ void __launch_bounds__(kThreads, 2) sample_f32_u32(SampleArgs a) {
  enter_grid();
  sample_row(a);
}
extern "C" __global__ void __launch_bounds__(kThreads) sample_scan_parts_f32(SampleArgs a) {
  enter_grid();
  scan_part(a);
}
