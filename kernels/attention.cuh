// Helpers shared by the attention kernels (scorer.md §2 Attention): key windows, anchored tiles,
// loads of q, k and v columns with RoPE fused, and the tensor-core kernels' online-softmax step. Included by prelude.cuh after its primitives.
#pragma once

namespace tandem::kernels {

// Keys visible from query row i of the sequence [lo, hi): |i − j| <= window, or all of it (window < 0).
TK_DEV void key_range(unsigned i, unsigned lo, unsigned hi, int window, unsigned& k0, unsigned& k1) {
  if (window < 0) {
    k0 = lo;
    k1 = hi;
    return;
  }
  const unsigned w = static_cast<unsigned>(window);
  k0 = i >= lo + w ? i - w : lo;
  k1 = min_u(hi, i + w + 1);
}

// What one attention block works on: query rows [q0, q1) of its sequence [lo, hi), whose row lo sits at
// position p0, and the union of their key windows [k_begin, k_end). Both come from the anchored tile,
// never from the batch around it. Also where the head's q, k and v columns sit in rows of `ld` =
// 3 · heads · 64.
struct AttentionBlock {
  unsigned lo, hi, p0, q0, q1, k_begin, k_end;
  unsigned ld, q_col, k_col, v_col;
  TK_DEV unsigned position(unsigned row) const { return p0 + (row - lo); }
};

// Rows first .. first + rows of anchored tile `tile` for `head`, from the tile's span (one 16-byte
// read); false when the block has none (block-uniform).
TK_DEV bool attention_block(const AttentionArgs& a, unsigned tile, unsigned head, unsigned first, unsigned rows,
                            AttentionBlock& b) {
  b.ld = 3u * a.heads * kHeadDim;
  b.q_col = head * kHeadDim;
  b.k_col = (a.heads + head) * kHeadDim;
  b.v_col = (2u * a.heads + head) * kHeadDim;
  if (tile >= a.n[kHeaderTiles]) return false;
  const U4 span = reinterpret_cast<const U4*>(a.spans)[tile];  // first row, lo, hi, position of lo
  b.lo = span.y;
  b.hi = span.z;
  b.p0 = span.w;
  b.q0 = span.x + first;
  if (b.q0 >= b.hi) return false;
  b.q1 = min_u(b.q0 + rows, b.hi);
  unsigned unused;
  key_range(b.q0, b.lo, b.hi, a.window, b.k_begin, unused);
  key_range(b.q1 - 1, b.lo, b.hi, a.window, unused, b.k_end);
  return true;
}

// Columns j and j + 32 of a 64-wide head at `src`, rotated by RoPE at position p when tables are given.
template <class In>
TK_DEV void load_head_pair(const In* src, unsigned j, const float* cs, const float* sn, unsigned p, float& x0,
                           float& x1) {
  x0 = to_f32(src[j]);
  x1 = to_f32(src[j + 32]);
  if (cs != nullptr) rotate_pair(x0, x1, cs[p * 32u + j], sn[p * 32u + j]);
}

// Columns j and j + 32 of query row `row` (rotated, then scaled), zeros past the block's rows.
// INVARIANT: rows below q1 and keys below k_end are real tokens of the block's sequence.
template <class In>
TK_DEV void load_query(const AttentionArgs& a, const AttentionBlock& b, unsigned row, unsigned j, float& x0,
                       float& x1) {
  x0 = x1 = 0.0f;
  if (row >= b.q1) return;
  const In* src = static_cast<const In*>(a.qkv) + static_cast<unsigned long long>(row) * b.ld + b.q_col;
  load_head_pair(src, j, a.cos, a.sin, b.position(row), x0, x1);
  x0 *= a.scale;
  x1 *= a.scale;
}

// Columns j and j + 32 of key `key` (rotated) and of its value; zeros past the block's key range, so a
// masked key times its zero probability stays zero.
template <class In>
TK_DEV void load_key_value(const AttentionArgs& a, const AttentionBlock& b, unsigned key, unsigned j, float (&k)[2],
                           float (&v)[2]) {
  k[0] = k[1] = v[0] = v[1] = 0.0f;
  if (key >= b.k_end) return;
  const In* src = static_cast<const In*>(a.qkv) + static_cast<unsigned long long>(key) * b.ld;
  load_head_pair(src + b.k_col, j, a.cos, a.sin, b.position(key), k[0], k[1]);
  v[0] = to_f32(src[b.v_col + j]);
  v[1] = to_f32(src[b.v_col + j + 32]);
}

// One 64-key step of the online softmax in the tensor-core kernels' fragment layout: this thread's rows
// rr = 0, 1 (rows g and g + 8 of its warp's 16) hold the scores s[nt][2rr + e] of keys kb + 8nt + 2tq + e,
// and the 4 threads of a row group share the row. Keys outside a row's [w_lo, w_hi) are masked (a row
// with w_lo = w_hi sees none); s becomes the step's exp(s − m), o and l are rescaled to the new row
// maximum m. With kRoundP each p is rounded to f16 before it is summed, so that a P·V on f16 p weighs the
// values by exactly the p that l adds up.
template <bool kRoundP>
TK_DEV void online_softmax_step(float (&s)[8][4], float (&o)[8][4], float (&m)[2], float (&l)[2], unsigned kb,
                                unsigned tq, const unsigned (&w_lo)[2], const unsigned (&w_hi)[2]) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = neg_inf();
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const unsigned key = kb + nt * 8 + 2 * tq + e;
        float& v = s[nt][2 * rr + e];
        if (key - w_lo[rr] >= w_hi[rr] - w_lo[rr]) v = neg_inf();  // outside [w_lo, w_hi)
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, shfl_xor(mx, 1));
    mx = fmaxf(mx, shfl_xor(mx, 2));
    const float mn = fmaxf(m[rr], mx);
    const float base = mn == neg_inf() ? 0.0f : mn;  // a row with nothing visible yet stays all zero
    const float corr = fast_exp(m[rr] - base);
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = s[nt][2 * rr + e];
        v = fast_exp(v - base);
        if (kRoundP) v = h2f(f2h(v));
        sum += v;
      }
      o[nt][2 * rr] *= corr;
      o[nt][2 * rr + 1] *= corr;
    }
    sum += shfl_xor(sum, 1);
    sum += shfl_xor(sum, 2);
    l[rr] = l[rr] * corr + sum;
    m[rr] = mn;
  }
}

}  // namespace tandem::kernels
