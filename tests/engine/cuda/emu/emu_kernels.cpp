// The emulator's kernel registry: every entry of engine/cuda's kernel list, bound to the host build of
// its kernels/*.cu (compiled in wrapper files by tests/engine/cuda/CMakeLists.txt).
#include <cstring>

#include "emu_internal.h"
#include "engine/cuda/kernels_impl.h"

#define TANDEM_EMU_DECLARE(entry, args, file) extern "C" void entry(tandem::kernels::args);
TANDEM_CUDA_KERNELS(TANDEM_EMU_DECLARE)
#undef TANDEM_EMU_DECLARE

namespace tandem::emu {
namespace {

template <class Args, void (*Kernel)(Args)>
void invoke(void* args) {
  Kernel(*static_cast<const Args*>(args));
}

const KernelEntry kEntries[] = {
#define TANDEM_EMU_ENTRY(entry, args, file) {#entry, &invoke<kernels::args, &::entry>, sizeof(kernels::args)},
    TANDEM_CUDA_KERNELS(TANDEM_EMU_ENTRY)
#undef TANDEM_EMU_ENTRY
};

}  // namespace

const KernelEntry* find_kernel(const char* name) {
  for (const KernelEntry& e : kEntries) {
    if (std::strcmp(e.name, name) == 0) return &e;
  }
  return nullptr;
}

}  // namespace tandem::emu
