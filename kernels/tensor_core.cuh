// Tensor-core and asynchronous-copy primitives for the attention kernels (scorer.md §3): mma.sync
// m16n8k16, ldmatrix, cp.async with zero fill, packed f16x2 rounding and the block's dynamic shared
// memory. NVRTC gets inline PTX (sm_80+); host builds (the test emulator) get simt.h's exact emulation.
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

// Two floats rounded to halves (nearest even) in one register, `lo` in the low 16 bits (the mma
// fragment order). PTX packs its first source into the upper half.
TK_DEV unsigned pack_f2h2(float lo, float hi) {
  unsigned r;
#if TK_SM80
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  r = static_cast<unsigned>(f2h(lo)) | (static_cast<unsigned>(f2h(hi)) << 16);
#endif
  return r;
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
inline unsigned pack_f2h2(float lo, float hi) {
  return static_cast<unsigned>(f2h(lo)) | (static_cast<unsigned>(f2h(hi)) << 16);
}
inline unsigned char* dynamic_smem() { return ::tandem::emu::dynamic_shared(); }

#endif

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

}  // namespace tandem::kernels
