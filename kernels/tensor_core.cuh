// Tensor-core and asynchronous-copy primitives for the attention and GEMM kernels (scorer.md §3): mma.sync
// m16n8k16, ldmatrix, cp.async with zero fill, packed f16x2 / bf16x2 rounding and fma, and the block's
// dynamic shared memory. NVRTC gets inline PTX (sm_80+); host builds (the test emulator) get simt.h's exact
// emulation.
#pragma once

namespace tandem::kernels {

#if defined(__CUDACC__)

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TK_SM80 1
#else
#define TK_SM80 0
#endif

// The shared-window address of a generic pointer into shared memory, as ldmatrix and cp.async take it.
TK_DEV unsigned smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// d += a · b for one m16n8k16 tile: f16 operands, f32 accumulators, fragments as the PTX ISA lays
// them out (a: 4 regs of 2 halves, b: 2 regs, d: 4 floats).
TK_DEV void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if TK_SM80
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

// The same with bf16 operands (mma.sync m16n8k16 .bf16; the decode GEMM's BF16 entries).
TK_DEV void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if TK_SM80
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}

// Four 8×8 matrices of b16: lanes 8i..8i+7 give the 16-byte rows of matrix i (16-byte aligned, in
// shared memory); r[i] is this lane's pair of matrix i: row lane/4, columns 2(lane%4) and 2(lane%4)+1
// (the lower column in the low half). The trans form gives column lane/4 of rows 2(lane%4) and +1.
template <bool kTrans>
TK_DEV void ldmatrix_x4_form(unsigned (&r)[4], const void* row) {
#if TK_SM80
#define TK_LDMATRIX_X4(form)                                                                   \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4" form ".shared.b16 {%0,%1,%2,%3}, [%4];"          \
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                                 \
               : "r"(smem_addr(row))                                                            \
               : "memory")
  if constexpr (kTrans) {
    TK_LDMATRIX_X4(".trans");
  } else {
    TK_LDMATRIX_X4("");
  }
#undef TK_LDMATRIX_X4
#else
  __trap();
#endif
}
TK_DEV void ldmatrix_x4(unsigned (&r)[4], const void* row) { ldmatrix_x4_form<false>(r, row); }
TK_DEV void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) { ldmatrix_x4_form<true>(r, row); }

// 16 bytes from global to shared memory (both 16-byte aligned) without passing through registers, or
// 16 zero bytes when !fill (src is then not read). Complete after cp_async_wait and visible to the
// block after the barrier that follows it.
TK_DEV void cp_async16(void* dst, const void* src, bool fill) {
#if TK_SM80
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(fill ? 16u : 0u)
               : "memory");
#else
  __trap();
#endif
}
// Closes the group of this thread's cp.async copies issued since the last commit.
TK_DEV void cp_async_commit() {
#if TK_SM80
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
TK_DEV void cp_async_wait() {
#if TK_SM80
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Two floats rounded (nearest even) to f16, or bf16 for kBf16, in one register, `lo` in the low 16 bits
// (the mma fragment order). PTX packs its first source into the upper half.
template <bool kBf16>
TK_DEV unsigned pack_16x2(float lo, float hi) {
  unsigned r;
#if TK_SM80
  if constexpr (kBf16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
#else
  r = static_cast<unsigned>(kBf16 ? f2b(lo) : f2h(lo)) | (static_cast<unsigned>(kBf16 ? f2b(hi) : f2h(hi)) << 16);
#endif
  return r;
}

// a · b + c on both halves of packed f16x2 (kBf16: bf16x2) registers, each rounded once to nearest even.
template <bool kBf16>
TK_DEV unsigned fma_16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d = 0;
#if TK_SM80
  if constexpr (kBf16) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  } else {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  }
#else
  __trap();
#endif
  return d;
}

// The block's dynamic shared memory (the launch's shared-bytes argument), 16-byte aligned.
TK_DEV unsigned char* dynamic_smem() {
  extern __shared__ U4 tk_dynamic_smem[];
  return reinterpret_cast<unsigned char*>(tk_dynamic_smem);
}

#undef TK_SM80

#else  // host build: the SIMT emulator (simt.h) gives each primitive its PTX semantics

inline void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  ::tandem::emu::mma_16816(d, a, b);
}
inline void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  ::tandem::emu::mma_16816_bf16(d, a, b);
}
inline void ldmatrix_x4(unsigned (&r)[4], const void* row) { ::tandem::emu::ldmatrix_x4(r, row, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) { ::tandem::emu::ldmatrix_x4(r, row, true); }
inline void cp_async16(void* dst, const void* src, bool fill) { ::tandem::emu::cp_async16(dst, src, fill); }
inline void cp_async_commit() { ::tandem::emu::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  ::tandem::emu::cp_async_wait(N);
}
template <bool kBf16>
inline unsigned pack_16x2(float lo, float hi) {
  return static_cast<unsigned>(kBf16 ? f2b(lo) : f2h(lo)) | (static_cast<unsigned>(kBf16 ? f2b(hi) : f2h(hi)) << 16);
}
// Through a float fma: the PTX result whenever a · b + c fits a float's 24 bits (always where the kernels
// use it: small integers), else possibly off by double rounding.
template <bool kBf16>
inline unsigned fma_16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d = 0;
  for (unsigned s = 0; s < 32; s += 16) {
    const auto widen = [s](unsigned v) {
      const auto h = static_cast<unsigned short>((v >> s) & 0xffffu);
      return kBf16 ? b2f(h) : h2f(h);
    };
    const float r = std::fma(widen(a), widen(b), widen(c));
    d |= static_cast<unsigned>(kBf16 ? f2b(r) : f2h(r)) << s;
  }
  return d;
}
inline unsigned char* dynamic_smem() { return ::tandem::emu::dynamic_shared(); }

#endif

TK_DEV unsigned pack_f2h2(float lo, float hi) { return pack_16x2<false>(lo, hi); }

// The f16 hi + lo split of two floats, packed as pack_f2h2 packs them: x ≈ hi + lo to about 22 bits.
struct SplitPair {
  unsigned hi, lo;
};
TK_DEV SplitPair split_pair(float x0, float x1) {
  const unsigned hi = pack_f2h2(x0, x1);
  const float r0 = x0 - h2f(static_cast<unsigned short>(hi & 0xffffu));
  const float r1 = x1 - h2f(static_cast<unsigned short>(hi >> 16));
  return {hi, pack_f2h2(r0, r1)};
}

// mma_16816 by operand type, for kernels templated on it.
TK_DEV void mma_16816_t(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], half_t) {
  mma_16816(d, a, b);
}
TK_DEV void mma_16816_t(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], bf16_t) {
  mma_16816_bf16(d, a, b);
}

// The end of a K-split mma GEMM (gemm_decode.cu, qgemm_tc.cu): warp w of the block holds in acc[j] the C
// fragments of its 16-column tile over one K slice (tile w / splits, slice w % splits; acc[j][e] is column
// g (+8 for e >= 2) of the tile, row 8j + 2t + (e & 1)) for its `frags` 8-row fragments. They meet in `part`,
// and each output's slices are summed in slice order from the first, the same order for every row at every
// row count; then f(row, column, sum) for the block's `here` rows and its columns below cols (they start at
// blockIdx.y times the block's width; consecutive threads take consecutive columns).
template <unsigned kRows, class F>
TK_DEV void sum_slices(float (*part)[16][kRows + 1], const float (&acc)[4][4], unsigned frags, unsigned splits,
                       unsigned here, unsigned cols, F&& f) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {  // constant indices keep acc in registers
    if (j >= frags) break;
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) part[warp][g + (e >= 2 ? 8u : 0u)][8 * j + 2 * t + (e & 1u)] = acc[j][e];
  }
  __syncthreads();
  const unsigned width = blockDim.x / 32 / splits * 16;
  for (unsigned o = threadIdx.x; o < here * width; o += blockDim.x) {
    const unsigned r = o / width, c = o % width, tl = c / 16, cc = c % 16;
    const unsigned col = blockIdx.y * width + c;
    if (col >= cols) continue;
    float v = part[tl * splits][cc][r];
    for (unsigned s = 1; s < splits; ++s) v += part[tl * splits + s][cc][r];
    f(r, col, v);
  }
}

// A decoder GEMM's output at (row r, column col) of out [rows, cols] (gemm_decode.cu, gemm_stream.cu): the slices'
// sum v, + bias[col] when given, + the prior output with accumulate, then stored; the same order for every row
// at every row count. INVARIANT: r is a real row of out and col < cols.
template <class Out>
TK_DEV void store_gemm_output(void* out, unsigned cols, unsigned r, unsigned col, float v, const float* bias,
                              unsigned accumulate) {
  if (bias != nullptr) v += bias[col];
  Out* y = static_cast<Out*>(out) + static_cast<unsigned long long>(r) * cols + col;
  if (accumulate != 0u) v += to_f32(*y);
  store(y, v);
}

}  // namespace tandem::kernels
