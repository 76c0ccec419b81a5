// Device primitives for host builds of kernels/*.cu (the SIMT emulator, tests only): CUDA's keywords
// and built-ins, and the prelude's primitives (half conversions, shuffles) over the fiber scheduler of
// simt.h. prelude.cuh includes this when the compiler is not NVRTC; tensor_core.cuh calls simt.h.
#pragma once

#include <cmath>
#include <cstring>

#include "engine/core/dtype.h"
#include "simt.h"

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time on a launching thread, so a function's statics are its block's shared memory;
// per thread, as two ranks' backends may launch at once in one test process.
#define __shared__ static thread_local
#define __syncthreads() ::tandem::emu::sync_block()
#define __syncwarp() ::tandem::emu::warp_sync()
#define threadIdx (::tandem::emu::thread_idx())
#define blockIdx (::tandem::emu::block_idx())
#define blockDim (::tandem::emu::block_dim())
#define gridDim (::tandem::emu::grid_dim())

#define TK_DEV inline
// The emulator checks what the hardware would fault on.
#define TK_ASSERT_ALIGNED(p, bytes) ::tandem::emu::assert_aligned(p, bytes, __FILE__, __LINE__)

namespace tandem::kernels {

inline float h2f(unsigned short h) { return ::tandem::half_to_float(h); }
inline unsigned short f2h(float f) { return ::tandem::float_to_half(f); }
inline float b2f(unsigned short b) { return ::tandem::bf16_to_float(b); }
inline unsigned short f2b(float f) { return ::tandem::float_to_bf16(f); }

inline float shfl_xor(float v, int mask) {
  const unsigned lane = ::tandem::emu::lane_id();
  return ::tandem::emu::warp_read<float>(v, lane ^ static_cast<unsigned>(mask));
}
inline float shfl(float v, int lane) { return ::tandem::emu::warp_read<float>(v, static_cast<unsigned>(lane)); }

// The emulator runs one kernel after another, so nothing waits; it records that each thread waited, and
// that none let the next grid in first (simt.h).
inline void wait_prior_grids() { ::tandem::emu::grid_wait(); }
inline void allow_dependents() { ::tandem::emu::grid_allow(); }
inline float fast_exp(float x) { return std::exp(x); }
inline float neg_inf() { return -HUGE_VALF; }
// The host build never fuses (x86-64 without -mfma), so plain operators round once each.
inline double mul_rn(double a, double b) { return a * b; }
inline double add_rn(double a, double b) { return a + b; }
inline float bits_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace tandem::kernels
