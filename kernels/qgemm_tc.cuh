// What the quantized GEMM's tensor-core kernels share (qgemm_tc.cu, qgemm_tc_shared.cu): a lane's codes of one
// chunk and their decode into exact 16-bit integers paired as the mma takes them, and the packed loops' chunk
// step and group end. prelude.cuh includes it last.
#pragma once

namespace tandem::kernels {

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

// The packed loops' chunk (qgemm_tc_packed16, qgemm_shared): chunk u of a lane's two 16-byte code words (its
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

// The packed loops' next group (after end_group, when the slice goes on): its last chunk, its scales (loaded a
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

}  // namespace tandem::kernels
