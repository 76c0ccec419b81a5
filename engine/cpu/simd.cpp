// SIMD level detection for the CPU backend (simd_impl.h).
#include "engine/cpu/simd_impl.h"

namespace tandem::cpu {

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::kBase: return "sse2";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kBase: return true;
#if defined(__x86_64__)
    case Isa::kAvx2: return __builtin_cpu_supports("avx2");
    case Isa::kAvx512: return __builtin_cpu_supports("avx512f");
#else
    case Isa::kAvx2:
    case Isa::kAvx512: return false;
#endif
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBase;
}

}  // namespace tandem::cpu
