// KV-cache attention (graph.h CacheAttention; dflash.md §1.5, §1.7): every token row's query heads over its
// sequence's slot of one cache, with FP32 scores, softmax and sums. A SIMT kernel (any element type and
// head_dim), a tensor-core one for 16-bit caches, and the pass that combines split-key partials.
#include "prelude.cuh"

using namespace tandem::kernels;

// Work (args.cuh CacheAttentionArgs): a block takes one query tile (a sequence's rows 16t .. 16t + 15) ×
// one chunk of its keys (flash decoding) for one KV head and up to 64 of the tile's rows × group query
// vectors, so a KV head's whole group shares every K/V load. Blocks stride over the list of (tile, chunk)
// items; every warp walks that list on its own (same values, no shared memory), so no block has to wait
// for another. How a tile splits depends on its sequence's rows and positions only, and each vector's
// keys are visited in the same order whichever block or batch holds it: a row's bits never depend on
// the batch or the bucket. Rows of split tiles leave (o, max, sum) partials that the combine pass folds
// in chunk order; the others write their output directly.
namespace {

// One query tile of a sequence, and how its keys split.
struct CacheTile {
  unsigned seq, lo, n, start, slot;  // the sequence: first row, rows, position of its first row, cache slot
  unsigned row0, rows;               // the tile's rows [row0, row0 + rows)
  unsigned kb, ke;                   // the union of the rows' visible keys
  unsigned stride;                   // partial slots per row: the most chunks a tile of this sequence takes
  unsigned chunk, splits;            // keys per chunk (a multiple of 64), chunks
  TK_DEV unsigned position(unsigned row) const { return start + (row - lo); }
};

// Keys [k0, k1) that the row at position p sees, in a sequence whose rows end before position `end`.
TK_DEV void visible_keys(const CacheAttentionArgs& a, unsigned p, unsigned end, unsigned& k0, unsigned& k1) {
  k0 = 0;
  k1 = a.causal != 0 ? p + 1 : end;
  if (a.window > 0) {
    k0 = p + 1 > a.window ? p + 1 - a.window : 0;
    if (a.window <= k1 - p) k1 = p + a.window;  // |q_pos − k_pos| < window, without overflow
  }
}

TK_DEV CacheTile cache_tile(const CacheAttentionArgs& a, unsigned s, unsigned row0) {
  CacheTile t;
  t.seq = s;
  t.lo = a.cu[s];
  t.n = a.cu[s + 1] - t.lo;
  t.start = a.start[s];
  t.slot = a.slot[s];
  t.row0 = row0;
  t.rows = min_u(kQTileRows, t.lo + t.n - row0);
  unsigned unused;
  visible_keys(a, t.position(row0), t.start + t.n, t.kb, unused);
  visible_keys(a, t.position(row0 + t.rows - 1), t.start + t.n, unused, t.ke);
  t.stride = t.n > kCacheSplitRows ? 1u : min_u(kCacheMaxSplits, kCacheSplitRows / t.n);
  const unsigned len = t.ke > t.kb ? t.ke - t.kb : 0u;
  const unsigned want = min_u(t.stride, max_u(1u, (len + kCacheMinChunk - 1) / kCacheMinChunk));
  t.chunk = max_u(kCacheTcKeys, ((len + want - 1) / want + kCacheTcKeys - 1) / kCacheTcKeys * kCacheTcKeys);
  t.splits = max_u(1u, (len + t.chunk - 1) / t.chunk);
  return t;
}

// The tile whose first row is query tile q's.
TK_DEV CacheTile query_tile(const CacheAttentionArgs& a, unsigned q) {
  const unsigned row0 = a.qtiles[q];
  return cache_tile(a, a.seq[row0], row0);
}

// Counts below 2^24 cross a shuffle exactly as floats.
TK_DEV unsigned shfl_count(unsigned v, unsigned lane) {
  return static_cast<unsigned>(shfl(static_cast<float>(v), static_cast<int>(lane)));
}

// The lanes whose `p` holds, and the lowest set bit of a mask.
#if defined(__CUDACC__)
TK_DEV unsigned ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
TK_DEV unsigned lowest_bit(unsigned m) { return static_cast<unsigned>(__ffs(static_cast<int>(m)) - 1); }
#else
inline unsigned ballot(bool p) { return ::tandem::emu::warp_ballot(p); }  // the emulator's (simt.h)
inline unsigned lowest_bit(unsigned m) { return static_cast<unsigned>(__builtin_ctz(m)); }
#endif

// Calls f(tile, chunk) for this block's (tile, chunk) items, in list order: item w of the list (tiles in
// index order, each tile's chunks in order) belongs to block w mod gridDim.x. Warp-uniform.
template <class F>
TK_DEV void for_each_item(const CacheAttentionArgs& a, F&& f) {
  const unsigned tiles = a.n[kHeaderQTiles];
  const unsigned lane = threadIdx.x & 31u;
  unsigned before = 0;  // items of the tiles before `base`
#pragma unroll 1
  for (unsigned base = 0; base < tiles; base += 32) {
    const unsigned splits = base + lane < tiles ? query_tile(a, base + lane).splits : 0u;
    unsigned incl = splits;  // inclusive prefix over the lanes
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
      const unsigned up = shfl_count(incl, lane >= d ? lane - d : lane);
      if (lane >= d) incl += up;
    }
    // This lane's tile's items are [first, first + splits); the block's first one among them is w0.
    const unsigned first = before + incl - splits;
    const unsigned w0 = first + (blockIdx.x + gridDim.x - first % gridDim.x) % gridDim.x;
#pragma unroll 1
    for (unsigned mask = ballot(w0 < first + splits); mask != 0; mask &= mask - 1) {
      const unsigned l = lowest_bit(mask);
      const unsigned lf = shfl_count(first, l), lw = shfl_count(w0, l), end = lf + shfl_count(splits, l);
#pragma unroll 1
      for (unsigned w = lw; w < end; w += gridDim.x) f(base + l, w - lf);
    }
    before += shfl_count(incl, 31);
  }
}

// Where split `j` of a row's query head leaves its partial: the sequence's kCacheSplitRows slots hold
// `stride` per row (rows × stride <= kCacheSplitRows).
TK_DEV unsigned long long partial_at(const CacheAttentionArgs& a, const CacheTile& t, unsigned row, unsigned hq,
                                     unsigned j) {
  const unsigned slot = t.seq * kCacheSplitRows + (row - t.lo) * t.stride + j;
  return static_cast<unsigned long long>(slot) * (a.kv_heads * a.group) + hq;
}

// ---- SIMT: one warp per query vector, a lane per key for q·k and a lane per 32nd dimension for p·v ----

template <class T, unsigned D32>
TK_DEV void simt_vector(const CacheAttentionArgs& a, const CacheTile& t, unsigned j, unsigned kvh, unsigned v,
                        float* qs) {
  constexpr unsigned kDim = 32 * D32;
  const unsigned lane = threadIdx.x & 31u;
  const unsigned row = t.row0 + v / a.group, hq = kvh * a.group + v % a.group;
  const unsigned ld = a.kv_heads * a.group * kDim;
  // INVARIANT: row is a real token of the tile's sequence (v < rows · group), so q's row is inside the
  // bucket's rows; qs is this warp's 256 floats.
  const T* qrow = static_cast<const T*>(a.q) + static_cast<unsigned long long>(row) * a.q_ld + hq * kDim;
  __syncwarp();  // the previous vector's reads of qs are done
#pragma unroll
  for (unsigned c = 0; c < D32; ++c) qs[lane + 32 * c] = to_f32(qrow[lane + 32 * c]);
  __syncwarp();

  unsigned k0, k1;
  visible_keys(a, t.position(row), t.start + t.n, k0, k1);
  const unsigned c0 = t.kb + j * t.chunk;
  k0 = max_u(k0, c0);
  k1 = min_u(k1, min_u(t.ke, c0 + t.chunk));
  const CacheTable ct = a.caches[a.cache];
  const unsigned width = a.kv_heads * kDim;
  // INVARIANT: ir::check kept start + rows <= capacity and slot < slots, and keys < ke <= start + rows, so
  // every key row read lies inside the slot's part of the [slots][capacity][width] arrays.
  const unsigned long long slot_base = static_cast<unsigned long long>(t.slot) * a.n[kHeaderCapacity] * width;
  const T* kbase = reinterpret_cast<const T*>(ct.k) + slot_base + kvh * kDim;
  const T* vbase = reinterpret_cast<const T*>(ct.v) + slot_base + kvh * kDim;

  float m = neg_inf(), l = 0.0f, o[D32];
#pragma unroll
  for (unsigned c = 0; c < D32; ++c) o[c] = 0.0f;
#pragma unroll 1
  for (unsigned kb = k0; kb < k1; kb += 32) {  // warp-uniform
    const unsigned key = kb + lane;
    const bool real = key < k1;
    float s = neg_inf();
    if (real) {
      const T* kr = kbase + static_cast<unsigned long long>(key) * width;
      float acc = 0.0f;
#pragma unroll 2
      for (unsigned d = 0; d < kDim; d += 8) {
        float kv[8];
        load8(kr + d, kv);
        const V4 q0 = *reinterpret_cast<const V4*>(qs + d), q1 = *reinterpret_cast<const V4*>(qs + d + 4);
        acc += q0.x * kv[0] + q0.y * kv[1] + q0.z * kv[2] + q0.w * kv[3];
        acc += q1.x * kv[4] + q1.y * kv[5] + q1.z * kv[6] + q1.w * kv[7];
      }
      s = acc * a.scale;
    }
    const float mn = fmaxf(m, warp_max(s));  // finite: key kb is real
    const float corr = fast_exp(m - mn);
    const float p = real ? fast_exp(s - mn) : 0.0f;
    l = l * corr + warp_sum(p);
#pragma unroll
    for (unsigned c = 0; c < D32; ++c) o[c] *= corr;
    const unsigned count = min_u(32u, k1 - kb);
#pragma unroll 4
    for (unsigned e = 0; e < count; ++e) {
      const float pe = shfl(p, static_cast<int>(e));
      const T* vr = vbase + static_cast<unsigned long long>(kb + e) * width + lane;
#pragma unroll
      for (unsigned c = 0; c < D32; ++c) o[c] += pe * to_f32(vr[32 * c]);
    }
    m = mn;
  }

  if (t.splits == 1) {
    // INVARIANT: row is a real token (above); the output row has q_heads · head_dim elements.
    T* y = static_cast<T*>(a.out) + static_cast<unsigned long long>(row) * ld + hq * kDim + lane;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (unsigned c = 0; c < D32; ++c) store(y + 32 * c, o[c] * inv);
    return;
  }
  // INVARIANT: the scratch holds seqs · kCacheSplitRows slots of q_heads partials (cache_attention_steps).
  const unsigned long long at = partial_at(a, t, row, hq, j);
  float* po = a.part_o + at * kDim + lane;
#pragma unroll
  for (unsigned c = 0; c < D32; ++c) po[32 * c] = o[c];
  if (lane == 0) store2(a.part_ml + 2 * at, m, l);
}

template <class T, unsigned D32>
TK_DEV void simt_run(const CacheAttentionArgs& a, float* qs) {
  const unsigned warp = threadIdx.x >> 5;
  const unsigned kvh = blockIdx.y % a.kv_heads, first = blockIdx.y / a.kv_heads * kCacheVectors;
  for_each_item(a, [&](unsigned q, unsigned j) {
    const CacheTile t = query_tile(a, q);
    const unsigned last = min_u(t.rows * a.group, first + kCacheVectors);
#pragma unroll 1
    for (unsigned v = first + warp; v < last; v += kCacheThreads / 32) simt_vector<T, D32>(a, t, j, kvh, v, qs);
  });
}

template <class T>
TK_DEV void cache_attention_simt(const CacheAttentionArgs& a) {
  __shared__ V4 qbuf[kCacheThreads / 32][64];  // each warp's query vector, 256 floats
  float* qs = reinterpret_cast<float*>(qbuf[threadIdx.x >> 5]);
  switch (a.head_dim / 32) {  // head_dim is a multiple of 32 up to 256 (checked at lowering)
    case 1: simt_run<T, 1>(a, qs); break;
    case 2: simt_run<T, 2>(a, qs); break;
    case 3: simt_run<T, 3>(a, qs); break;
    case 4: simt_run<T, 4>(a, qs); break;
    case 5: simt_run<T, 5>(a, qs); break;
    case 6: simt_run<T, 6>(a, qs); break;
    case 7: simt_run<T, 7>(a, qs); break;
    case 8: simt_run<T, 8>(a, qs); break;
  }
}

// ---- tensor cores: mma.sync m16n8k16 on the cache's own 16-bit type, FP32 accumulators ----

// A shared-memory buffer for ldmatrix and cp.async: its generic pointer (the emulator's) and its shared
// window address (PTX's). `fresh` re-reads the address through an opaque move each step, so the compiler
// adds constant offsets at each use instead of keeping dozens of precomputed addresses in registers.
struct Smem {
  unsigned char* ptr;
  unsigned addr;
};
#if defined(__CUDACC__)
TK_DEV Smem smem_of(unsigned char* p) { return {p, smem_addr(p)}; }
TK_DEV Smem fresh(Smem s) {
  asm volatile("mov.u32 %0, %0;" : "+r"(s.addr));
  return s;
}
TK_DEV void ldsm_x4(unsigned (&r)[4], Smem s, unsigned off) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s.addr + off)
               : "memory");
}
TK_DEV void ldsm_x4_trans(unsigned (&r)[4], Smem s, unsigned off) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s.addr + off)
               : "memory");
}
TK_DEV void cp_async16_at(Smem s, unsigned off, const void* src, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s.addr + off), "l"(src), "r"(fill ? 16u : 0u)
               : "memory");
}
#else
inline Smem smem_of(unsigned char* p) { return {p, 0}; }
inline Smem fresh(Smem s) { return s; }
inline void ldsm_x4(unsigned (&r)[4], Smem s, unsigned off) { ldmatrix_x4(r, s.ptr + off); }
inline void ldsm_x4_trans(unsigned (&r)[4], Smem s, unsigned off) { ldmatrix_x4_trans(r, s.ptr + off); }
inline void cp_async16_at(Smem s, unsigned off, const void* src, bool fill) { cp_async16(s.ptr + off, src, fill); }
#endif

TK_DEV unsigned pack_t(half_t, float lo, float hi) { return pack_16x2<false>(lo, hi); }
TK_DEV unsigned pack_t(bf16_t, float lo, float hi) { return pack_16x2<true>(lo, hi); }

// Staged rows: head_dim 16-bit elements and 16 bytes of padding, so the 8 rows of an ldmatrix fall in
// distinct banks.
template <unsigned kDim>
struct TcShape {
  static constexpr unsigned kRowBytes = 2 * kDim + 16;
  static constexpr unsigned kStageBytes = kCacheTcKeys * kRowBytes;  // K rows, then as many V rows
  static constexpr unsigned kChunks = kDim / 8;                      // 16-byte pieces of a row
};

// Starts the copies of rows kb .. kb + 63 of one KV head (`base`: the slot's first row at the head's
// column) into `dst`; rows at or past c1 become zeros and are not read.
// INVARIANT: kb < c1 <= ke, so every row read is a key the sequence has written (cache_tile).
template <class T, unsigned kDim>
TK_DEV void tc_load(const T* base, unsigned width, unsigned kb, unsigned c1, Smem dst) {
  using S = TcShape<kDim>;
  dst = fresh(dst);
#pragma unroll
  for (unsigned i = 0; i < kCacheTcKeys * S::kChunks / kCacheThreads; ++i) {
    const unsigned c = i * kCacheThreads + threadIdx.x;
    const unsigned row = c / S::kChunks, piece = c % S::kChunks;
    const bool real = kb + row < c1;
    cp_async16_at(dst, row * S::kRowBytes + piece * 16,
                  base + static_cast<unsigned long long>(real ? kb + row : kb) * width + piece * 8, real);
  }
  cp_async_commit();
}

// One (tile, chunk) item for vectors first .. first + 63: each warp takes 16 vectors (fragment rows g and
// g + 8 of thread lane = 4g + tq), and the block walks the chunk 64 keys at a time. K and V rows have a
// buffer each: the next step's keys load while this step's values are used, and its values while
// its scores are computed. Warps without vectors only help load.
template <class T, unsigned kDim>
TK_DEV void tc_item(const CacheAttentionArgs& a, const CacheTile& t, unsigned j, unsigned kvh, unsigned first,
                    unsigned char* smem) {
  using S = TcShape<kDim>;
  constexpr unsigned kSteps = kDim / 16, kTiles = kDim / 8;  // k steps of q·k, n tiles of p·v
  const Smem ks = smem_of(smem), vs = smem_of(smem + S::kStageBytes);
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  const unsigned g = lane >> 2, tq = lane & 3u, mi = lane >> 3, mr = lane & 7u;
  const unsigned vectors = t.rows * a.group, ld = a.kv_heads * a.group * kDim, width = a.kv_heads * kDim;
  const unsigned c0 = t.kb + j * t.chunk, c1 = min_u(t.ke, c0 + t.chunk);
  const unsigned steps = (c1 - c0 + kCacheTcKeys - 1) / kCacheTcKeys;
  const unsigned vb = first + 16 * warp;
  const bool busy = vb < vectors;  // warp-uniform

  unsigned rows[2], heads[2], w_lo[2], w_hi[2];
  unsigned qa[kSteps][4];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const unsigned v = vb + g + 8u * rr;
    rows[rr] = t.row0 + v / a.group;
    heads[rr] = kvh * a.group + v % a.group;
    w_lo[rr] = w_hi[rr] = 0;  // a vector past the tile's sees no key
    const T* src = nullptr;
    if (v < vectors) {
      visible_keys(a, t.position(rows[rr]), t.start + t.n, w_lo[rr], w_hi[rr]);
      w_lo[rr] = max_u(w_lo[rr], c0);
      w_hi[rr] = max_u(w_lo[rr], min_u(w_hi[rr], c1));
      // INVARIANT: rows[rr] is a real token of the tile's sequence; 4-byte loads at even columns.
      src = static_cast<const T*>(a.q) + static_cast<unsigned long long>(rows[rr]) * a.q_ld + heads[rr] * kDim + 2 * tq;
    }
#pragma unroll
    for (unsigned kk = 0; kk < kSteps; ++kk) {
      qa[kk][rr] = src != nullptr ? *reinterpret_cast<const unsigned*>(src + 16 * kk) : 0u;
      qa[kk][2 + rr] = src != nullptr ? *reinterpret_cast<const unsigned*>(src + 16 * kk + 8) : 0u;
    }
  }
  const CacheTable ct = a.caches[a.cache];
  // INVARIANT: as in simt_vector, the slot's rows lie inside the cache arrays.
  const unsigned long long slot_base = static_cast<unsigned long long>(t.slot) * a.n[kHeaderCapacity] * width;
  const T* kbase = reinterpret_cast<const T*>(ct.k) + slot_base + kvh * kDim;
  const T* vbase = reinterpret_cast<const T*>(ct.v) + slot_base + kvh * kDim;

  float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.0f, 0.0f};
  float o[kTiles][4];
#pragma unroll
  for (unsigned nt = 0; nt < kTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

  __syncthreads();  // the previous item's reads of both buffers are done
  if (steps > 0) {
    tc_load<T, kDim>(kbase, width, c0, c1, ks);
    tc_load<T, kDim>(vbase, width, c0, c1, vs);
  }
#pragma unroll 1
  for (unsigned step = 0; step < steps; ++step) {
    const unsigned kb = c0 + step * kCacheTcKeys;
    const bool more = step + 1 < steps;
    cp_async_wait<1>();  // this step's keys (its values may still be in flight)
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    if (busy) {
      // S = q · kᵀ: matrices of keys 16p (+8 for matrices 2, 3) × dimensions 16kk (+8 for 1, 3).
      const Smem kr = fresh(ks);
      const unsigned at = ((mi >> 1) * 8 + mr) * S::kRowBytes + (mi & 1u) * 16;
#pragma unroll
      for (unsigned kk = 0; kk < kSteps; ++kk) {
#pragma unroll
        for (unsigned p = 0; p < 4; ++p) {
          unsigned b[4];
          ldsm_x4(b, kr, at + 16 * p * S::kRowBytes + 32 * kk);
          const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          mma_16816_t(s[2 * p], qa[kk], b0, T{});
          mma_16816_t(s[2 * p + 1], qa[kk], b1, T{});
        }
      }
    }
    __syncthreads();  // every warp is done with the keys
    if (more) tc_load<T, kDim>(kbase, width, kb + kCacheTcKeys, c1, ks);

    unsigned pa[8][2];  // p of key tile nt for rows g and g + 8, rounded to T and packed in pairs
    if (busy) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float mx = neg_inf();
#pragma unroll
        for (unsigned nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (unsigned e = 0; e < 2; ++e) {
            const unsigned key = kb + nt * 8 + 2 * tq + e;
            float& x = s[nt][2 * rr + e];
            x = key - w_lo[rr] < w_hi[rr] - w_lo[rr] ? x * a.scale : neg_inf();
            mx = fmaxf(mx, x);
          }
        }
        mx = fmaxf(mx, shfl_xor(mx, 1));
        mx = fmaxf(mx, shfl_xor(mx, 2));
        const float mn = fmaxf(m[rr], mx);
        const float base = mn == neg_inf() ? 0.0f : mn;  // a row with nothing visible yet stays empty
        const float corr = fast_exp(m[rr] - base);
        float sum = 0.0f;
#pragma unroll
        for (unsigned nt = 0; nt < 8; ++nt) {
          // The row sum adds the rounded p that p·v weighs the values by: the output stays their mean.
          const unsigned pk = pack_t(T{}, fast_exp(s[nt][2 * rr] - base), fast_exp(s[nt][2 * rr + 1] - base));
          pa[nt][rr] = pk;
          sum += bits_to_f32(T{}, static_cast<unsigned short>(pk & 0xffffu)) +
                 bits_to_f32(T{}, static_cast<unsigned short>(pk >> 16));
        }
        sum += shfl_xor(sum, 1);
        sum += shfl_xor(sum, 2);
        l[rr] = l[rr] * corr + sum;
        m[rr] = mn;
#pragma unroll
        for (unsigned nt = 0; nt < kTiles; ++nt) {
          o[nt][2 * rr] *= corr;
          o[nt][2 * rr + 1] *= corr;
        }
      }
    }
    if (more) {
      cp_async_wait<1>();  // this step's values; the next keys may still be in flight
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (busy) {
      // o += p · v: the A fragment of keys 16kk .. 16kk + 15 is key tiles 2kk and 2kk + 1 of p; v's B
      // fragments come transposed out of its rows (keys 16kk (+8 for matrices 1, 3) × dimensions 16np
      // (+8 for matrices 2, 3)).
      const Smem vr = fresh(vs);
      const unsigned at = ((mi & 1u) * 8 + mr) * S::kRowBytes + (mi >> 1) * 16;
#pragma unroll
      for (unsigned kk = 0; kk < 4; ++kk) {
        const unsigned pf[4] = {pa[2 * kk][0], pa[2 * kk][1], pa[2 * kk + 1][0], pa[2 * kk + 1][1]};
#pragma unroll
        for (unsigned np = 0; np < kDim / 16; ++np) {
          unsigned b[4];
          ldsm_x4_trans(b, vr, at + 16 * kk * S::kRowBytes + 32 * np);
          const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          mma_16816_t(o[2 * np], pf, b0, T{});
          mma_16816_t(o[2 * np + 1], pf, b1, T{});
        }
      }
    }
    __syncthreads();  // every warp is done with the values
    if (more) tc_load<T, kDim>(vbase, width, kb + kCacheTcKeys, c1, vs);
  }

#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (vb + g + 8u * rr >= vectors) continue;
    if (t.splits == 1) {
      // INVARIANT: rows[rr] is a real token; the output row has q_heads · head_dim elements.
      T* y = static_cast<T*>(a.out) + static_cast<unsigned long long>(rows[rr]) * ld + heads[rr] * kDim + 2 * tq;
      const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
#pragma unroll
      for (unsigned nt = 0; nt < kTiles; ++nt) store2(y + 8 * nt, o[nt][2 * rr] * inv, o[nt][2 * rr + 1] * inv);
    } else {
      // INVARIANT: as in simt_vector, the partial's slot lies inside the scratch.
      const unsigned long long at = partial_at(a, t, rows[rr], heads[rr], j);
      float* po = a.part_o + at * kDim + 2 * tq;
#pragma unroll
      for (unsigned nt = 0; nt < kTiles; ++nt) store2(po + 8 * nt, o[nt][2 * rr], o[nt][2 * rr + 1]);
      if (tq == 0) store2(a.part_ml + 2 * at, m[rr], l[rr]);
    }
  }
}

template <class T, unsigned kDim>
TK_DEV void cache_attention_tc(const CacheAttentionArgs& a) {
  unsigned char* smem = dynamic_smem();  // 2 · TcShape<kDim>::kStageBytes (cache_attention_steps)
  const unsigned kvh = blockIdx.y % a.kv_heads, first = blockIdx.y / a.kv_heads * kCacheVectors;
  for_each_item(a, [&](unsigned q, unsigned j) {
    const CacheTile t = query_tile(a, q);
    if (first < t.rows * a.group) tc_item<T, kDim>(a, t, j, kvh, first, smem);  // block-uniform
  });
}

// ---- the combine pass: rows of split tiles, one warp per (row, query head) ----

// out = Σ_j w_j o_j / Σ_j w_j l_j with w_j = exp(m_j − max_j m_j), folded in chunk order.
template <class T>
TK_DEV void cache_attention_combine(const CacheAttentionArgs& a) {
  allow_dependents();  // the o GEMM after it may start and prefetch its weights
  const unsigned lane = threadIdx.x & 31u;
  const unsigned heads = a.kv_heads * a.group, hq = blockIdx.y * (kCacheThreads / 32) + (threadIdx.x >> 5);
  if (hq >= heads) return;  // warp-uniform; this kernel has no block barrier
  const unsigned tokens = real_rows(a.n, kRowsTokens), d32 = a.head_dim / 32, ld = heads * a.head_dim;
  for (unsigned row = blockIdx.x; row < tokens; row += gridDim.x) {
    const unsigned s = a.seq[row], lo = a.cu[s];
    if (a.cu[s + 1] - lo > kCacheSplitRows) continue;  // never split
    const CacheTile t = cache_tile(a, s, lo + (row - lo) / kQTileRows * kQTileRows);
    if (t.splits == 1) continue;  // written by the attention pass
    const unsigned long long at = partial_at(a, t, row, hq, 0);
    const unsigned long long step = heads;  // slots j and j + 1 of a row are adjacent
    float mx = neg_inf();
    for (unsigned j = 0; j < t.splits; ++j) mx = fmaxf(mx, a.part_ml[2 * (at + j * step)]);
    float sum = 0.0f, o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (unsigned j = 0; j < t.splits; ++j) {
      const V2 ml = *reinterpret_cast<const V2*>(a.part_ml + 2 * (at + j * step));
      const float w = ml.x == neg_inf() ? 0.0f : fast_exp(ml.x - mx);
      sum += w * ml.y;
      const float* po = a.part_o + (at + j * step) * a.head_dim + lane;
#pragma unroll
      for (unsigned c = 0; c < 8; ++c) {
        if (c < d32) o[c] += w * po[32 * c];
      }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    // INVARIANT: row < the real tokens; the output row has q_heads · head_dim elements.
    T* y = static_cast<T*>(a.out) + static_cast<unsigned long long>(row) * ld + hq * a.head_dim + lane;
#pragma unroll
    for (unsigned c = 0; c < 8; ++c) {
      if (c < d32) store(y + 32 * c, o[c] * inv);
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_f32(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_simt<float>(a);
}
extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_f16(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_simt<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_bf16(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_simt<bf16_t>(a);
}
#define TK_CACHE_TC(type, tag, dim)                                                                       \
  extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_tc_##tag##_h##dim(       \
      CacheAttentionArgs a) {                                                                             \
    enter_grid();                                                                                         \
    cache_attention_tc<type, dim>(a);                                                                     \
  }
TK_CACHE_TC(half_t, f16, 32)
TK_CACHE_TC(half_t, f16, 64)
TK_CACHE_TC(half_t, f16, 128)
TK_CACHE_TC(bf16_t, bf16, 32)
TK_CACHE_TC(bf16_t, bf16, 64)
TK_CACHE_TC(bf16_t, bf16, 128)
#undef TK_CACHE_TC
extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_combine_f32(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_combine<float>(a);
}
extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_combine_f16(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_combine<half_t>(a);
}
extern "C" __global__ void __launch_bounds__(kCacheThreads, 1) cache_attention_combine_bf16(CacheAttentionArgs a) {
  enter_grid();
  cache_attention_combine<bf16_t>(a);
}
