// KV cache append (graph.h CacheAppend; dflash.md §1.7): each token row's k and v go to (the slot of its
// sequence, its absolute position) of one cache of the bound State, whose addresses the index lists.
// One block per token row; the row's width elements move as 16-byte vectors when the width and the source
// addresses allow. k and v may be column ranges of wider rows (ld_k, ld_v).
#include "prelude.cuh"

using namespace tandem::kernels;

namespace {

template <class T>
__device__ __forceinline__ void cache_append(const CacheAppendArgs& a) {
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsTokens)) return;
  const unsigned capacity = a.n[kHeaderCapacity];
  // INVARIANT: ir::check kept start + rows <= capacity and slot < slots for every sequence, so the
  // destination lies inside the cache's [slots][capacity][width] array; row < the real tokens.
  const unsigned long long at =
      (static_cast<unsigned long long>(a.slot[a.seq[row]]) * capacity + a.pos[row]) * a.width;
  const CacheTable t = a.caches[a.cache];
  T* k = reinterpret_cast<T*>(t.k) + at;
  T* v = reinterpret_cast<T*>(t.v) + at;
  const T* ks = static_cast<const T*>(a.k) + static_cast<unsigned long long>(row) * a.ld_k;
  const T* vs = static_cast<const T*>(a.v) + static_cast<unsigned long long>(row) * a.ld_v;
  const unsigned bytes = a.width * static_cast<unsigned>(sizeof(T));
  // 16-byte vectors when the row and both sources allow (a fused row's k and v start at any column).
  if (((bytes | static_cast<unsigned>(reinterpret_cast<unsigned long long>(ks)) |
        static_cast<unsigned>(reinterpret_cast<unsigned long long>(vs))) & 15u) == 0) {
    const unsigned words = bytes / 16;
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
      reinterpret_cast<U4*>(k)[i] = reinterpret_cast<const U4*>(ks)[i];
      reinterpret_cast<U4*>(v)[i] = reinterpret_cast<const U4*>(vs)[i];
    }
  } else {
    for (unsigned i = threadIdx.x; i < a.width; i += blockDim.x) {
      k[i] = ks[i];
      v[i] = vs[i];
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128) cache_append_f32(CacheAppendArgs a) {
  enter_grid();
  cache_append<float>(a);
}
extern "C" __global__ void __launch_bounds__(128) cache_append_f16(CacheAppendArgs a) {
  enter_grid();
  cache_append<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(128) cache_append_bf16(CacheAppendArgs a) {
  enter_grid();
  cache_append<bf16_t>(a);
}
