// Top-k token choice (graph.h TopK; engine/ir/sampling.h top_k): the k largest values of each row in
// descending order, ties to the lower id. One 512-thread block per row, or (TopKArgs::parts) per part of a
// row and then one a row to merge the parts' keys; keys are 64-bit (value order, then the lower id), so every
// step is exact and the result never depends on the batch or the split.
//
// A pass keeps each thread's kTopKKeep largest keys below `limit`. A thread that saw more than it kept
// may hide keys below its last kept one, so every key at or above the largest such bound was kept:
// sorting the kept keys (a bitonic sort in shared memory) yields them in order. One pass does for
// random rows; rows that crowd the top into few threads take at most ⌈k / kTopKKeep⌉ passes.
#include "prelude.cuh"

using namespace tandem::kernels;
using namespace tandem::kernels::choice;

namespace {

constexpr unsigned kThreads = kTopKThreads;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kKeep = kTopKKeep;
constexpr unsigned kSlots = kThreads * kKeep;

// The block's largest value; every thread gets it. `scratch` holds kWarps values.
TK_DEV unsigned long long block_max(unsigned long long v, unsigned long long* scratch) {
  for (int m = 16; m > 0; m >>= 1) v = max_u64(v, shfl_xor_bits(v, m));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  for (unsigned w = 0; w < kWarps; ++w) v = max_u64(v, scratch[w]);
  __syncthreads();  // scratch is reused
  return v;
}

// Keeps the kKeep largest keys seen, descending.
TK_DEV void keep_key(unsigned long long (&keep)[kKeep], unsigned long long key) {
  if (key <= keep[kKeep - 1]) return;
  keep[kKeep - 1] = key;
#pragma unroll
  for (unsigned i = kKeep - 1; i > 0; --i) {
    if (keep[i] > keep[i - 1]) {
      const unsigned long long t = keep[i];
      keep[i] = keep[i - 1];
      keep[i - 1] = t;
    }
  }
}

// Bitonic sort of s[0, len) into descending order (len a power of two); ends with a barrier.
TK_DEV void sort_desc(unsigned long long* s, unsigned len) {
  for (unsigned size = 2; size <= len; size <<= 1) {
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      for (unsigned i = threadIdx.x; i < len / 2; i += kThreads) {
        const unsigned lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const unsigned long long p = s[lo], q = s[hi];
        if ((p < q) == ((lo & size) == 0)) {
          s[lo] = q;
          s[hi] = p;
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

// The k largest keys among columns [begin, begin + count) of row x, descending, each passed to emit(i, key)
// (every thread calls it for some i < k). k <= count. Rows that give each thread at most one id fill only the
// first `len` slots.
template <class Emit>
TK_DEV void top_k_keys(const float* x, unsigned begin, unsigned count, bool vec, unsigned k, Emit&& emit) {
  __shared__ unsigned long long slots[kSlots];
  __shared__ unsigned long long scratch[kWarps];
  __shared__ unsigned taken;
  const unsigned vec_end = vec ? count & ~3u : 0;
  const unsigned len = vec_end == 0 && count <= kThreads ? pow2_at_least(count) : kSlots;
  unsigned found = 0;
  unsigned long long limit = ~0ull;  // keys at or above it are placed
  while (found < k) {
    unsigned long long keep[kKeep] = {};
    unsigned seen = 0;
    const auto visit = [&](float v, unsigned id) {
      const unsigned long long key = choice_key(v, begin + id);
      if (key >= limit) return;
      ++seen;
      keep_key(keep, key);
    };
    // INVARIANT: begin is a multiple of 4 and the row 16-byte aligned wherever vec is set.
    visit_strided<kThreads>(x + begin, vec_end, count, visit);
    // Keys this thread did not keep lie below its last kept one; below the block's largest such bound
    // the kept keys are incomplete, at or above it they are every key there is (below limit).
    const unsigned long long bound = block_max(seen > kKeep ? keep[kKeep - 1] : 0, scratch);
    for (unsigned j = 0; j < kKeep; ++j) {
      if (j * kThreads + threadIdx.x < len) slots[j * kThreads + threadIdx.x] = keep[j];
    }
    if (threadIdx.x == 0) taken = 0;
    __syncthreads();
    sort_desc(slots, len);
    const unsigned long long floor = bound > 0 ? bound : 1;  // empty slots hold 0
    for (unsigned i = threadIdx.x; i < len; i += kThreads) {
      if (slots[i] >= floor && (i + 1 == len || slots[i + 1] < floor)) taken = i + 1;
    }
    __syncthreads();
    const unsigned take = min_u(taken, k - found);
    if (take == 0) return;  // unreachable: keys below limit remain while found < k <= count
    for (unsigned i = threadIdx.x; i < take; i += kThreads) emit(found + i, slots[i]);
    limit = slots[take - 1];
    found += take;
    __syncthreads();  // slots and taken are rewritten by the next pass
  }
}

// Row r's ids and values from its keys, as top_k_f32_u32 and the merge write them.
TK_DEV void put_choice(const TopKArgs& a, unsigned row, const float* x, unsigned i, unsigned long long key) {
  const unsigned id = key_id(key);
  a.ids[static_cast<unsigned long long>(row) * a.k + i] = id;
  a.values[static_cast<unsigned long long>(row) * a.k + i] = x[id];
}

// INVARIANT (the entries below): row < the real rows <= the bucket rows lowering sized x (ld wide), ids and
// values (k wide) and keys (parts × k a row) for; k <= min(columns, kTopKMax), columns <= ld, and with parts
// > 1 every part holds at least kChoicePartColumns >= kTopKMax columns (checked at lowering).
__device__ __forceinline__ void top_k_row(const TopKArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, a.kind)) return;  // the whole block leaves together
  const float* x = a.x + static_cast<unsigned long long>(row) * a.ld;
  top_k_keys(x, 0, a.columns, (a.ld & 3u) == 0, a.k,
             [&](unsigned i, unsigned long long key) { put_choice(a, row, x, i, key); });
}

// Part blockIdx.y of row blockIdx.x: its k largest keys (zeros past its columns).
__device__ __forceinline__ void top_k_part(const TopKArgs& a) {
  const unsigned row = blockIdx.x, part = blockIdx.y;
  if (row >= real_rows(a.n, a.kind)) return;
  const ColumnPart p = column_part(a.columns, a.parts, part);
  unsigned long long* keys = a.keys + (static_cast<unsigned long long>(row) * a.parts + part) * a.k;
  const unsigned k = min_u(a.k, p.count);
  for (unsigned i = k + threadIdx.x; i < a.k; i += kThreads) keys[i] = 0;
  if (k == 0) return;
  top_k_keys(a.x + static_cast<unsigned long long>(row) * a.ld, p.begin, p.count, (a.ld & 3u) == 0, k,
             [&](unsigned i, unsigned long long key) { keys[i] = key; });
}

// Row blockIdx.x's k largest of its parts' keys: parts × k <= kSlots keys sorted in shared memory.
__device__ __forceinline__ void top_k_merge(const TopKArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, a.kind)) return;
  __shared__ unsigned long long slots[kSlots];
  const unsigned n = a.parts * a.k, len = pow2_at_least(n);
  const unsigned long long* keys = a.keys + static_cast<unsigned long long>(row) * n;
  for (unsigned i = threadIdx.x; i < len; i += kThreads) slots[i] = i < n ? keys[i] : 0;
  __syncthreads();
  sort_desc(slots, len);
  const float* x = a.x + static_cast<unsigned long long>(row) * a.ld;
  for (unsigned i = threadIdx.x; i < a.k; i += kThreads) put_choice(a, row, x, i, slots[i]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) top_k_f32_u32(TopKArgs a) {
  enter_grid();
  top_k_row(a);
}
extern "C" __global__ void __launch_bounds__(kThreads) top_k_parts_f32(TopKArgs a) {
  enter_grid();
  top_k_part(a);
}
extern "C" __global__ void __launch_bounds__(kThreads) top_k_merge_f32_u32(TopKArgs a) {
  enter_grid();
  top_k_merge(a);
}
