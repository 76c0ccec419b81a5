// The one header every kernel includes (scorer.md §3): half conversions through PTX cvt, loads and
// stores by element type, warp reductions; then tensor_core.cuh and attention.cuh. NVRTC gets the .cuh
// files as in-memory headers; host builds of the kernels (the test emulator) get emu_device.h.
#pragma once

#include "args.cuh"

#if defined(__CUDACC__)

#define TK_DEV __device__ __forceinline__
#define TK_ASSERT_ALIGNED(p, bytes)  // the hardware faults on a misaligned vector access

namespace tandem::kernels {

// IEEE binary16 <-> float, round to nearest even (exactly what tandem's host conversions do).
TK_DEV float h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
TK_DEV unsigned short f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// bfloat16 <-> float: exact widening; narrowing rounds to nearest even, NaN stays NaN (tandem's host rule).
TK_DEV float b2f(unsigned short b) { return __uint_as_float(static_cast<unsigned>(b) << 16); }
TK_DEV unsigned short f2b(float f) {
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
}

TK_DEV float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
TK_DEV float shfl(float v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }

// Programmatic dependent launch (sm_90): a kernel launched with it may start while the kernel before it runs,
// and must wait_prior_grids() before it reads that kernel's outputs or writes what it reads; a kernel calls
// allow_dependents() once the next may start. Both are no-ops below sm_90 and when the launch did not ask for it.
TK_DEV void wait_prior_grids() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
TK_DEV void allow_dependents() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

TK_DEV float fast_exp(float x) { return __expf(x); }
TK_DEV float neg_inf() { return __int_as_float(0xff800000); }
TK_DEV float bits_float(unsigned u) { return __uint_as_float(u); }
// f64 products and sums rounded once each, never fused (where a kernel must match a host reference).
TK_DEV double mul_rn(double a, double b) { return __dmul_rn(a, b); }
TK_DEV double add_rn(double a, double b) { return __dadd_rn(a, b); }

}  // namespace tandem::kernels

#else  // host build of the kernels: the test emulator supplies the same primitives

#include "emu_device.h"

#endif

namespace tandem::kernels {

// Every kernel's first statement (the emulator checks that every thread waited): lowering may launch any kernel
// of a plan with programmatic dependent launch, so each waits for the grid ahead before touching memory, then lets
// the next one's blocks onto the multiprocessors, where they wait in turn. Waiting first keeps it to one grid
// ahead: a grid triggers only once the one before it has finished. (gemm_stream.cu loads its constant weights
// before the wait, then does both.)
TK_DEV void enter_grid() {
  wait_prior_grids();
  allow_dependents();
}

// 16-bit floats travel as their bits; the type only selects the conversion.
struct half_t {
  unsigned short bits;
};
struct bf16_t {
  unsigned short bits;
};

TK_DEV float to_f32(float v) { return v; }
TK_DEV float to_f32(half_t v) { return h2f(v.bits); }
TK_DEV float to_f32(bf16_t v) { return b2f(v.bits); }
TK_DEV void store(float* p, float v) { *p = v; }
TK_DEV void store(half_t* p, float v) { p->bits = f2h(v); }
TK_DEV void store(bf16_t* p, float v) { p->bits = f2b(v); }
// The 16-bit conversions by type, for code templated on the element type.
TK_DEV float bits_to_f32(half_t, unsigned short b) { return h2f(b); }
TK_DEV float bits_to_f32(bf16_t, unsigned short b) { return b2f(b); }
TK_DEV unsigned short f32_to_bits(half_t, float f) { return f2h(f); }
TK_DEV unsigned short f32_to_bits(bf16_t, float f) { return f2b(f); }

// Two halves in one 32-bit register, the lower column in the low bits (mma fragment order).
TK_DEV unsigned pack_h2(unsigned short lo, unsigned short hi) {
  return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
}

// 16-byte vectors for wide loads and stores.
struct alignas(16) V4 {
  float x, y, z, w;
};
struct alignas(16) U4 {
  unsigned x, y, z, w;
};
struct alignas(8) V2 {
  float x, y;
};
struct alignas(8) U2 {
  unsigned x, y;
};

// Eight consecutive elements as floats, and back: 32 bytes of FP32 or 16 of FP16 per access.
// INVARIANT: callers use them at multiples of 8 elements of rows whose width is a multiple of 8, on
// buffers aligned to 64 bytes (arena values, cudaMalloc weights), so every access is aligned.
TK_DEV void load8(const float* p, float (&v)[8]) {
  TK_ASSERT_ALIGNED(p, 16);
  const V4 a = reinterpret_cast<const V4*>(p)[0], b = reinterpret_cast<const V4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <class T16>
TK_DEV void load8_16(const T16* p, float (&v)[8]) {
  TK_ASSERT_ALIGNED(p, 16);
  const U4 u = *reinterpret_cast<const U4*>(p);
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = bits_to_f32(T16{}, static_cast<unsigned short>(w[i] & 0xffffu));
    v[2 * i + 1] = bits_to_f32(T16{}, static_cast<unsigned short>(w[i] >> 16));
  }
}
TK_DEV void load8(const half_t* p, float (&v)[8]) { load8_16(p, v); }
TK_DEV void load8(const bf16_t* p, float (&v)[8]) { load8_16(p, v); }
TK_DEV void store8(float* p, const float (&v)[8]) {
  TK_ASSERT_ALIGNED(p, 16);
  reinterpret_cast<V4*>(p)[0] = V4{v[0], v[1], v[2], v[3]};
  reinterpret_cast<V4*>(p)[1] = V4{v[4], v[5], v[6], v[7]};
}
template <class T16>
TK_DEV void store8_16(T16* p, const float (&v)[8]) {
  TK_ASSERT_ALIGNED(p, 16);
  const T16 t{};
  *reinterpret_cast<U4*>(p) = U4{pack_h2(f32_to_bits(t, v[0]), f32_to_bits(t, v[1])),
                                 pack_h2(f32_to_bits(t, v[2]), f32_to_bits(t, v[3])),
                                 pack_h2(f32_to_bits(t, v[4]), f32_to_bits(t, v[5])),
                                 pack_h2(f32_to_bits(t, v[6]), f32_to_bits(t, v[7]))};
}
TK_DEV void store8(half_t* p, const float (&v)[8]) { store8_16(p, v); }
TK_DEV void store8(bf16_t* p, const float (&v)[8]) { store8_16(p, v); }

// 16 bytes at p, or zeros when !ok (p is then not read).
TK_DEV U4 load16_or_zero(const void* p, bool ok) {
  if (!ok) return U4{0u, 0u, 0u, 0u};
  TK_ASSERT_ALIGNED(p, 16);
  return *static_cast<const U4*>(p);
}

// Two consecutive elements (an even column, so the pair is 8 or 4 bytes aligned).
TK_DEV void store2(float* p, float a, float b) { *reinterpret_cast<V2*>(p) = V2{a, b}; }
TK_DEV void store2(half_t* p, float a, float b) {
  *reinterpret_cast<unsigned*>(p) = pack_h2(f2h(a), f2h(b));
}
TK_DEV void store2(bf16_t* p, float a, float b) {
  *reinterpret_cast<unsigned*>(p) = pack_h2(f2b(a), f2b(b));
}

// Butterfly reductions: every lane ends with the same value, summed in a fixed order.
TK_DEV float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
TK_DEV float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}

TK_DEV float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

// A kernel's real row count: the index header's word for its row kind (args.cuh). Rows past it are
// bucket padding that no kernel reads or writes.
TK_DEV unsigned real_rows(const unsigned* n, unsigned kind) { return n[kind]; }

TK_DEV unsigned min_u(unsigned a, unsigned b) { return a < b ? a : b; }
TK_DEV unsigned max_u(unsigned a, unsigned b) { return a > b ? a : b; }

// Rotate-half RoPE of one pair (x[i], x[i + half]) by the angle whose cos/sin are c/s. The standalone
// and the fused (attention) paths share it, so both give the same bits.
TK_DEV void rotate_pair(float& x0, float& x1, float c, float s) {
  const float r0 = x0 * c - x1 * s;
  const float r1 = x1 * c + x0 * s;
  x0 = r0;
  x1 = r1;
}

// Calls f(row, column, vec) for every 8-wide chunk (vec: the width is a multiple of 8) or every single
// element of `rows` rows of `width` columns, spread over all the grid's threads.
template <class F>
TK_DEV void for_each_chunk(unsigned rows, unsigned width, F&& f) {
  const bool vec = (width & 7u) == 0;
  const unsigned per_row = vec ? width / 8 : width;
  const unsigned long long total = static_cast<unsigned long long>(rows) * per_row;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    f(i / per_row, static_cast<unsigned>(i % per_row) * (vec ? 8u : 1u), vec);
  }
}

}  // namespace tandem::kernels

#include "tensor_core.cuh"
#include "attention.cuh"
#include "choice_keys.cuh"
#include "nucleus.cuh"
#include "head_norm_rope.cuh"
#include "qgemm.cuh"
#include "qgemm_tc.cuh"
