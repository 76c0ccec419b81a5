// The quantized GEMM on tensor cores (args.cuh QGemmTcArgs, docs/quantization.md): what its two mappings of warps
// share (qgemm_tc.cu, the sliced one; qgemm_tc_whole_k.cu, whole-K). out = act(x · dequant(W)ᵀ + bias), or out +=
// it, on the real rows. Codes become exact f16/bf16 integers in registers (a mask and one packed add per two
// codes), mma.sync m16n8k16 multiplies 16 output columns (A) by up to kQGemmTcRows rows (B, 8 per fragment) with
// FP32 accumulation, and each group's partial sum is scaled once in FP32, so the weights enter the sums exactly.
// K is split by (k, cols) alone and the slices summed in slice order: a row's bits never depend on how many rows
// the launch has (gemm_decode.cu's rule), nor on the mapping. Codes come in the checkpoint's layout, or packed
// (args.cuh QGemmTcArgs::packed): then a lane loads 16 / bits chunks of a column's codes in one 16-byte word and
// its rows in their own order, where the checkpoint layout needs a load per chunk and eight byte permutes per
// fragment and chunk. Included by prelude.cuh after qgemm.cuh.
#pragma once

namespace tandem::kernels::qgemm_tc {


// The positions of a lane's 8 codes in their word(s) that the decode pairs into register p: pair_of(p, 0) in
// the low half, pair_of(p, 1) in the high one (int8: bytes 0 and 2, 1 and 3, ...; int4: nibbles 0 and 4, 1
// and 5, ...), so one mask pairs them.
template <unsigned kBits>
TK_DEV constexpr unsigned pair_of(unsigned p, unsigned h) {
  return kBits == 8 ? (p / 2) * 4 + p % 2 + 2 * h : p + 4 * h;
}

// One column's codes for one chunk and lane: int8 8 bytes, int4 4 bytes (8 nibbles), loaded as one word.
template <unsigned kBits>
struct alignas(kBits) Codes {
  unsigned w[kBits / 4];
};

template <unsigned kBits>
TK_DEV Codes<kBits> load_codes(const unsigned char* p) {
  TK_ASSERT_ALIGNED(p, kBits);
  return *reinterpret_cast<const Codes<kBits>*>(p);
}

// The codes as exact integers in the pairs of pair_of: 2^10 + u (f16) or 2^7 + u (bf16) built in the bits, u the
// code's unsigned form (q + 128 or q + 8), then the packed add of −(that + bias) leaves q. bf16 holds 2^7 + u
// only for u < 2^7, so int8 → bf16 goes through floats: 2^23 + u less 2^23 + 128, packed (exact) as bf16.
template <unsigned kBits>
TK_DEV void decode(const Codes<kBits>& c, unsigned (&p)[4], half_t) {
  constexpr unsigned kOne = 0x3c003c00u;
  if constexpr (kBits == 8) {
    constexpr unsigned kMagic = 0x64006400u, kLess = 0xe480e480u;  // 1024, −1152
    const unsigned lo = c.w[0] ^ 0x80808080u, hi = c.w[1] ^ 0x80808080u;
    p[0] = fma_16x2<false>((lo & 0x00ff00ffu) | kMagic, kOne, kLess);
    p[1] = fma_16x2<false>(((lo >> 8) & 0x00ff00ffu) | kMagic, kOne, kLess);
    p[2] = fma_16x2<false>((hi & 0x00ff00ffu) | kMagic, kOne, kLess);
    p[3] = fma_16x2<false>(((hi >> 8) & 0x00ff00ffu) | kMagic, kOne, kLess);
  } else {
    constexpr unsigned kMagic = 0x64006400u, kLess = 0xe408e408u;  // 1024, −1032
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) p[j] = fma_16x2<false>(((c.w[0] >> (4 * j)) & 0x000f000fu) | kMagic, kOne, kLess);
  }
}
template <unsigned kBits>
TK_DEV void decode(const Codes<kBits>& c, unsigned (&p)[4], bf16_t) {
  if constexpr (kBits == 8) {
    float q[8];
#pragma unroll
    for (unsigned i = 0; i < 8; ++i) {
      const unsigned u = ((c.w[i / 4] >> (8 * (i % 4))) & 0xffu) ^ 0x80u;
      q[i] = bits_float(0x4b000000u | u) - 8388736.0f;
    }
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) p[j] = pack_16x2<true>(q[pair_of<8>(j, 0)], q[pair_of<8>(j, 1)]);
  } else {
    constexpr unsigned kOne = 0x3f803f80u, kMagic = 0x43004300u, kLess = 0xc308c308u;  // 1, 128, −136
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) p[j] = fma_16x2<true>(((c.w[0] >> (4 * j)) & 0x000f000fu) | kMagic, kOne, kLess);
  }
}

// The packed loop's chunk (qgemm_tc_packed16): chunk u of a lane's two 16-byte code words (its
// columns g and g + 8) decoded, times each fragment's row elements (8 at the lane's k, in their own order: the
// packed layout), added to sum. Called in a loop unrolled over u, so u is a constant.
template <unsigned kBits, class T, unsigned kFrags>
TK_DEV void packed_chunk(const unsigned (&wa)[4], const unsigned (&wb)[4], unsigned u, const U4 (&rows)[kFrags],
                         float (&sum)[kFrags][4]) {
  Codes<kBits> ca, cb;
#pragma unroll
  for (unsigned i = 0; i < kBits / 4; ++i) {
    ca.w[i] = wa[u * (kBits / 4) + i];
    cb.w[i] = wb[u * (kBits / 4) + i];
  }
  unsigned pa[4], pb[4];
  decode(ca, pa, T{});
  decode(cb, pb, T{});
  const unsigned a1[4] = {pa[0], pb[0], pa[1], pb[1]}, a2[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
  for (unsigned j = 0; j < kFrags; ++j) {
    const unsigned b1[2] = {rows[j].x, rows[j].y}, b2[2] = {rows[j].z, rows[j].w};
    mma_16816_t(sum[j], a1, b1, T{});
    mma_16816_t(sum[j], a2, b2, T{});
  }
}

// A group (or its part in the slice) done: its sums scaled once by the columns' scales (sa for column g's
// elements 0 and 1, sb for column g + 8's 2 and 3) into acc, and cleared.
template <unsigned kFrags, unsigned kAcc>
TK_DEV void end_group(float (&acc)[kAcc][4], float (&sum)[kFrags][4], float sa, float sb) {
#pragma unroll
  for (unsigned j = 0; j < kFrags; ++j) {
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      acc[j][e] += (e < 2 ? sa : sb) * sum[j][e];
      sum[j][e] = 0.0f;
    }
  }
}

// The packed loop's next group (after end_group, when the slice goes on): its last chunk, its scales (loaded a
// group ahead: na, nb) moved up, and the scales of the group after it loaded.
TK_DEV void next_group(const QGemmArgs& a, const unsigned short* scales_a, const unsigned short* scales_b,
                       unsigned groups, unsigned per_group, unsigned c_end, unsigned& group, unsigned& flush, float& sa,
                       float& sb, float& na, float& nb) {
  ++group;
  flush = min_u(c_end, flush + per_group);
  sa = na;
  sb = nb;
  if (group + 1 < groups) {
    na = qgemm_scale(a, scales_a[group + 1]);
    nb = qgemm_scale(a, scales_b[group + 1]);
  }
}

// A lane's 8 consecutive k of a 32-wide chunk (k0 + 0..7), in the order the mmas take them: register p of its
// A rows and of its B column holds k0 + k_of(p, 0) in the low half and k0 + k_of(p, 1) in the high one;
// registers 0 and 1 feed the first mma as the ISA's k 2t, 2t + 1 and 2t + 8, 2t + 9, registers 2 and 3 the
// second. In the checkpoint layout a code's position is its k, so K follows the decode's pairs and the rows
// are permuted to match; packed codes (qgemm_layout.h) put k 2p + h at position pair_of(p, h), so the rows
// are taken in their own order. A and B permute K alike either way, so the products are the GEMM's.
template <unsigned kBits, bool kPacked>
TK_DEV constexpr unsigned k_of(unsigned p, unsigned h) {
  return kPacked ? 2 * p + h : pair_of<kBits>(p, h);
}

// B: one row's 8 elements at a lane's k0, paired as k_of pairs them; zeros past the real rows. A 16-bit row
// is the operand as it is (one level); an FP32 row is split exactly into bf16 hi + mid + lo (three levels:
// each residual is exact and the last fits 8 bits), so FP32 inputs lose nothing before the FP32 sums.
template <class In>
struct Row {
  static constexpr unsigned kLevels = 1;
  unsigned b[kLevels][4];
};
template <>
struct Row<float> {
  static constexpr unsigned kLevels = 3;
  unsigned b[kLevels][4];
};

template <unsigned kBits, bool kPacked, class In>
TK_DEV Row<In> load_row(const In* p, bool ok) {
  Row<In> r;
  const U4 v = load16_or_zero(p, ok);
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
    const unsigned k0 = k_of<kBits, kPacked>(j, 0), k1 = k_of<kBits, kPacked>(j, 1);  // packed: w[j] as it is
    r.b[0][j] = ((w[k0 / 2] >> (16 * (k0 % 2))) & 0xffffu) | (((w[k1 / 2] >> (16 * (k1 % 2))) & 0xffffu) << 16);
  }
  return r;
}
template <unsigned kBits, bool kPacked>
TK_DEV Row<float> load_row(const float* p, bool ok) {
  Row<float> r;
  const U4 v0 = load16_or_zero(p, ok), v1 = load16_or_zero(p + 4, ok);
  const float x[8] = {bits_float(v0.x), bits_float(v0.y), bits_float(v0.z), bits_float(v0.w),
                      bits_float(v1.x), bits_float(v1.y), bits_float(v1.z), bits_float(v1.w)};
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
    float e0 = x[k_of<kBits, kPacked>(j, 0)], e1 = x[k_of<kBits, kPacked>(j, 1)];
#pragma unroll
    for (unsigned l = 0; l < 3; ++l) {
      const unsigned h = pack_16x2<true>(e0, e1);
      r.b[l][j] = h;
      e0 -= b2f(static_cast<unsigned short>(h & 0xffffu));
      e1 -= b2f(static_cast<unsigned short>(h >> 16));
    }
  }
  return r;
}

// A packed column's codes for chunks c .. c + 16 / kBits - 1 (c a multiple of that) and lane t: one 16-byte
// load, then each chunk's word(s) as load_codes gives them in the checkpoint layout.
template <unsigned kBits>
TK_DEV void load_packed(const unsigned char* column, unsigned c, unsigned t, Codes<kBits>* out) {
  constexpr unsigned kPer = 16 / kBits;  // chunks a 16-byte word holds
  const unsigned char* p = column + (static_cast<unsigned long long>(c / kPer) * 4 + t) * 16;
  TK_ASSERT_ALIGNED(p, 16);
  const U4 v = *reinterpret_cast<const U4*>(p);
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (unsigned i = 0; i < kPer; ++i) {
#pragma unroll
    for (unsigned j = 0; j < kBits / 4; ++j) out[i].w[j] = w[i * (kBits / 4) + j];
  }
}

// The mma operands' type: the input's for 16-bit inputs, bf16 (three levels) for FP32.
template <class In>
struct Operand {
  using T = In;
};
template <>
struct Operand<float> {
  using T = bf16_t;
};

// What a lane works on, whichever mapping gave it: the 16 output columns from col0 for the block's rows
// (row0 on, `here` real, in `frags` 8-row fragments); lane (g, t) reads columns col_a = col0 + g and col_b =
// col0 + g + 8, clamped to the last column (outputs past cols are never stored).
struct TcTile {
  unsigned g, t, row0, here, frags, col0, col_a, col_b;
};

// The block's rows (grid x) for warp `tile` of the launch's tiles; false when the block has no rows.
TK_DEV bool tc_tile(const QGemmArgs& a, unsigned tile, TcTile& tl) {
  const unsigned lane = threadIdx.x % 32, rows = real_rows(a.n, a.kind);
  tl.row0 = blockIdx.x * kQGemmTcRows;
  if (tl.row0 >= rows) return false;
  tl.g = lane / 4;
  tl.t = lane % 4;
  tl.here = min_u(kQGemmTcRows, rows - tl.row0);
  tl.frags = (tl.here + 7) / 8;
  tl.col0 = tile * 16;
  tl.col_a = min_u(tl.col0 + tl.g, a.cols - 1);
  tl.col_b = min_u(tl.col0 + tl.g + 8, a.cols - 1);
  return true;
}

// K slice s of the launch's split: chunks [begin, end), empty past the last chunk.
struct TcSlice {
  unsigned begin, end;
};
TK_DEV TcSlice tc_slice(const QGemmTcArgs& args, unsigned s) {
  const unsigned chunks = args.q.k / 32, begin = min_u(chunks, s * args.slice_chunks);
  return {begin, min_u(chunks, begin + args.slice_chunks)};
}

// Output (row0 + r, col) of the product's sum v: the epilogue, stored or added to out.
template <class Out>
TK_DEV void store_tc_output(const QGemmArgs& a, unsigned row0, unsigned r, unsigned col, float v) {
  const float y = qgemm_epilogue(a, v, col);
  // INVARIANT: row0 + r < the real rows <= the bucket rows of out; col < cols.
  Out* p = static_cast<Out*>(a.out) + static_cast<unsigned long long>(row0 + r) * a.cols + col;
  store(p, a.accumulate != 0u ? to_f32(*p) + y : y);
}

// The loop for every layout and input over chunks [c_begin, c_end) of the tile's K (grid x, fastest, so the
// blocks of one column slab run together and read its codes from L2 after the first): lane (g, t) reads 8
// codes of its two columns at k0 = 32c + 8t of each chunk c, and row g + 8j's 8 elements there for each fragment
// j. Adds the slice's group-scaled sums to acc.
template <unsigned kBits, class In, bool kPacked>
TK_DEV void tc_slice_loop(const QGemmArgs& a, const TcTile& tl, unsigned c_begin, unsigned c_end,
                          float (&acc)[4][4]) {
  using T = typename Operand<In>::T;
  const unsigned g = tl.g, t = tl.t, here = tl.here, frags = tl.frags, per_group = a.group / 32;
  // INVARIANT: lowering checked k % 32 == 0, group % 32 == 0 and group | k, on 64-byte aligned buffers, so
  // every code, scale and row access below is aligned and inside its row; rows past the real count are never
  // read.
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * kBits / 8;
  const unsigned char* codes_a = static_cast<const unsigned char*>(a.codes) + tl.col_a * row_bytes;
  const unsigned char* codes_b = static_cast<const unsigned char*>(a.codes) + tl.col_b * row_bytes;
  const unsigned short* scales_a = a.scales + static_cast<unsigned long long>(tl.col_a) * (a.k / a.group);
  const unsigned short* scales_b = a.scales + static_cast<unsigned long long>(tl.col_b) * (a.k / a.group);
  const In* x = static_cast<const In*>(a.x) + static_cast<unsigned long long>(tl.row0) * a.k;
  float sum[4][4] = {};  // the current group's
  unsigned group = c_begin / per_group;
  unsigned flush = min_u(c_end, (group + 1) * per_group);  // the chunk that ends it
  float sa = qgemm_scale(a, scales_a[group]), sb = qgemm_scale(a, scales_b[group]);
  constexpr unsigned kUnroll = 32 / kBits;  // chunks in flight: 64 code bytes per lane
  for (unsigned c = c_begin; c < c_end; c += kUnroll) {
    Codes<kBits> wa[kUnroll] = {}, wb[kUnroll] = {};
    if constexpr (kPacked) {
      // INVARIANT: lowering checked k (a multiple of 32 · 16 / kBits) and rounded the slices up to whole
      // 16-byte words, so c_begin and c_end are multiples of 16 / kBits: a word is in the slice or out of it.
      constexpr unsigned kPer = 16 / kBits;
#pragma unroll
      for (unsigned u = 0; u < kUnroll; u += kPer) {
        if (c + u < c_end) {
          load_packed<kBits>(codes_a, c + u, t, wa + u);
          load_packed<kBits>(codes_b, c + u, t, wb + u);
        }
      }
    } else {
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) {
        if (c + u < c_end) {
          const unsigned at = ((c + u) * 32 + 8 * t) * kBits / 8;
          wa[u] = load_codes<kBits>(codes_a + at);
          wb[u] = load_codes<kBits>(codes_b + at);
        }
      }
    }
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) {
      if (c + u >= c_end) break;  // warp-uniform
      const unsigned kk = (c + u) * 32 + 8 * t;
      Row<In> row[4];  // every fragment's loads in flight while the codes decode
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
        const unsigned r = 8 * j + g;
        const In* at = x + static_cast<unsigned long long>(r) * a.k + kk;
        row[j] = load_row<kBits, kPacked>(at, j < frags && r < here);
      }
      unsigned pa[4], pb[4];
      decode(wa[u], pa, T{});
      decode(wb[u], pb, T{});
      const unsigned a1[4] = {pa[0], pb[0], pa[1], pb[1]}, a2[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) {
        if (j >= frags) break;  // warp-uniform
#pragma unroll
        for (unsigned l = Row<In>::kLevels; l-- > 0;) {  // the smallest level first
          const unsigned b1[2] = {row[j].b[l][0], row[j].b[l][1]}, b2[2] = {row[j].b[l][2], row[j].b[l][3]};
          mma_16816_t(sum[j], a1, b1, T{});
          mma_16816_t(sum[j], a2, b2, T{});
        }
      }
      if (c + u + 1 == flush) {  // warp-uniform: the group (or its part in this slice) is done
        end_group(acc, sum, sa, sb);
        if (flush < c_end) {
          ++group;
          flush = min_u(c_end, flush + per_group);
          sa = qgemm_scale(a, scales_a[group]);
          sb = qgemm_scale(a, scales_b[group]);
        }
      }
    }
  }
}

// The packed layout's loop for 16-bit rows over chunks [c_begin, c_end), kFrags (2 or 4) fragments fixed at
// compile time: the same products summed in the same order as tc_slice_loop<kBits, In, true> (so the same bits),
// with what a warp waits on issued ahead. ncu on that loop (PERF_NOTES, "The quantized GEMM's profile") found
// half its stall samples on global loads: the first decode of each batch of codes, and every chunk's mma on that
// chunk's rows, loaded just before it. Here a word's codes (16 / kBits chunks) load one word ahead, the rows two
// chunks ahead (one at 4 fragments, for registers) in a ring of registers, the group scales one group ahead; row
// pointers are set once and stepped by a chunk, and no work is done for fragments past kFrags.
template <unsigned kBits, class In, unsigned kFrags>
TK_DEV void packed16_slice_loop(const QGemmArgs& a, const TcTile& tl, unsigned c_begin, unsigned c_end,
                                float (&acc)[4][4]) {
  using T = In;
  static_assert(sizeof(In) == 2 && (kFrags == 2 || kFrags == 4));
  constexpr unsigned kPer = 16 / kBits;  // chunks a 16-byte code word holds
  constexpr unsigned kAhead = kFrags == 2 ? 2 : 1;  // chunks the rows are loaded ahead (registers: 4 a fragment each)
  const unsigned g = tl.g, t = tl.t, here = tl.here, per_group = a.group / 32, groups = a.k / a.group;
  // INVARIANT: as tc_slice_loop's, and lowering rounded the slices to whole words: c_begin and c_end are
  // multiples of kPer, so a slice is whole words.
  const unsigned long long row_bytes = static_cast<unsigned long long>(a.k) * kBits / 8;
  const U4* code_a = reinterpret_cast<const U4*>(static_cast<const unsigned char*>(a.codes) + tl.col_a * row_bytes) +
                     (c_begin / kPer) * 4 + t;
  const U4* code_b = reinterpret_cast<const U4*>(static_cast<const unsigned char*>(a.codes) + tl.col_b * row_bytes) +
                     (c_begin / kPer) * 4 + t;
  const unsigned short* scales_a = a.scales + static_cast<unsigned long long>(tl.col_a) * groups;
  const unsigned short* scales_b = a.scales + static_cast<unsigned long long>(tl.col_b) * groups;
  // Row 8j + g's 8 elements at k 32c + 8t: a pointer per fragment, stepped by 32 a chunk.
  const In* xr[kFrags];
  bool live[kFrags];
#pragma unroll
  for (unsigned j = 0; j < kFrags; ++j) {
    const unsigned r = 8 * j + g;
    live[j] = r < here;
    xr[j] = static_cast<const In*>(a.x) + static_cast<unsigned long long>(tl.row0 + (live[j] ? r : 0u)) * a.k +
            c_begin * 32 + 8 * t;
  }
  U4 ring[kAhead][kFrags];  // rows of chunks c .. c + kAhead - 1
#pragma unroll
  for (unsigned d = 0; d < kAhead; ++d) {
#pragma unroll
    for (unsigned j = 0; j < kFrags; ++j) ring[d][j] = load16_or_zero(xr[j] + 32 * d, live[j] && c_begin + d < c_end);
  }
  U4 word_a = code_a[0], word_b = code_b[0];
  float sum[kFrags][4] = {};
  unsigned group = c_begin / per_group;
  unsigned flush = min_u(c_end, (group + 1) * per_group);  // the chunk that ends it
  float sa = qgemm_scale(a, scales_a[group]), sb = qgemm_scale(a, scales_b[group]);
  const bool more_groups = group + 1 < groups;
  float na = more_groups ? qgemm_scale(a, scales_a[group + 1]) : 0.0f;
  float nb = more_groups ? qgemm_scale(a, scales_b[group + 1]) : 0.0f;
  for (unsigned c = c_begin; c < c_end; c += kPer) {
    // The next word's codes, in flight while this word's chunks run.
    U4 next_a = word_a, next_b = word_b;
    if (c + kPer < c_end) {
      next_a = code_a[4 * ((c + kPer - c_begin) / kPer)];
      next_b = code_b[4 * ((c + kPer - c_begin) / kPer)];
    }
    const unsigned wa[4] = {word_a.x, word_a.y, word_a.z, word_a.w}, wb[4] = {word_b.x, word_b.y, word_b.z, word_b.w};
#pragma unroll
    for (unsigned u = 0; u < kPer; ++u) {
      const unsigned cc = c + u;  // INVARIANT: < c_end (the slice is whole words)
      // This chunk's rows, and the loads of chunk cc + kAhead into the slot they free (kPer is a multiple
      // of kAhead, so the slot is u % kAhead at every word).
      U4 cur[kFrags];
#pragma unroll
      for (unsigned j = 0; j < kFrags; ++j) {
        cur[j] = ring[u % kAhead][j];
        ring[u % kAhead][j] = load16_or_zero(xr[j] + 32 * (cc + kAhead - c_begin), live[j] && cc + kAhead < c_end);
      }
      packed_chunk<kBits, T, kFrags>(wa, wb, u, cur, sum);
      if (cc + 1 == flush) {  // warp-uniform: the group (or its part in this slice) is done
        end_group(acc, sum, sa, sb);
        if (flush < c_end) next_group(a, scales_a, scales_b, groups, per_group, c_end, group, flush, sa, sb, na, nb);
      }
    }
    word_a = next_a;
    word_b = next_b;
  }
}

// One K slice of the tile into acc, by the loop for the layout, the input and the block's rows: packed codes
// over 16-bit rows take the packed loop at 2 fragments (up to 16 rows) or 4, the rest the general loop.
template <unsigned kBits, class In, bool kPacked>
TK_DEV void tc_slice_into(const QGemmArgs& a, const TcTile& tl, TcSlice sl, float (&acc)[4][4]) {
  if (sl.begin >= sl.end) return;  // an empty slice adds nothing (its partial is 0)
  if constexpr (kPacked && sizeof(In) == 2) {
    if (tl.frags <= 2) {
      packed16_slice_loop<kBits, In, 2>(a, tl, sl.begin, sl.end, acc);
    } else {
      packed16_slice_loop<kBits, In, 4>(a, tl, sl.begin, sl.end, acc);
    }
  } else {
    tc_slice_loop<kBits, In, kPacked>(a, tl, sl.begin, sl.end, acc);
  }
}

// Runs Mapping::template run<kBits, In, Out, kPacked>(a) for the launch's bits and code layout.
template <class Mapping, class In, class Out>
TK_DEV void dispatch(const QGemmTcArgs& a) {
  if (a.q.bits == 8) {
    if (a.packed != 0u) {
      Mapping::template run<8, In, Out, true>(a);
    } else {
      Mapping::template run<8, In, Out, false>(a);
    }
  } else if (a.packed != 0u) {
    Mapping::template run<4, In, Out, true>(a);
  } else {
    Mapping::template run<4, In, Out, false>(a);
  }
}

}  // namespace tandem::kernels::qgemm_tc
