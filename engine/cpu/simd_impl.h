// SIMD levels the CPU backend's hot loops (GEMM, attention) are compiled for. Every level runs the same
// IEEE operations in the same order per output (no FMA: the room builds with -ffp-contract=off), so the
// level changes only the vector width, never a bit of any result.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

enum class Isa : uint8_t { kBase, kAvx2, kAvx512 };

const char* to_string(Isa isa);
bool isa_supported(Isa isa);
// The widest level this CPU runs.
Isa best_isa();

// L floats as one GCC vector; arithmetic on it is element-wise IEEE float arithmetic.
template <int L>
struct FloatVec {
  typedef float Type __attribute__((vector_size(L * sizeof(float))));
};

// Defines, inside an anonymous namespace, three copies of `void name params` that run the always-inline
// template `body<L> args` (L = floats per vector) with each level's instruction set, and
// `name_for(isa)` returning the one to call. Lambdas do not inherit a target attribute, so parallel work
// calls these from its lambda rather than carrying the hot loop inside it.
#if defined(__x86_64__)
#define TANDEM_CPU_TARGET_AVX512 [[gnu::target("avx512f")]]
#define TANDEM_CPU_TARGET_AVX2 [[gnu::target("avx2")]]
#else  // other architectures run the base copy only (isa_supported says so)
#define TANDEM_CPU_TARGET_AVX512
#define TANDEM_CPU_TARGET_AVX2
#endif
#define TANDEM_CPU_ISA_VARIANTS(name, body, params, args)                 \
  TANDEM_CPU_TARGET_AVX512 void name##_avx512 params { body<16> args; }   \
  TANDEM_CPU_TARGET_AVX2 void name##_avx2 params { body<8> args; }        \
  void name##_base params { body<4> args; }                               \
  using name##_fn = decltype(&name##_base);                               \
  name##_fn name##_for(Isa isa) {                                         \
    switch (isa) {                                                        \
      case Isa::kAvx512: return &name##_avx512;                           \
      case Isa::kAvx2: return &name##_avx2;                               \
      case Isa::kBase: return &name##_base;                               \
    }                                                                     \
    return &name##_base;                                                  \
  }

}  // namespace tandem::cpu
