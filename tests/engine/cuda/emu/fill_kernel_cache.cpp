// The kernel cache for the emulator tests: compiles every kernel file with NVRTC for the emulated device
// into the default cache ($XDG_CACHE_HOME/tandem or ~/.cache/tandem), as the first emulator test would.
// ctest runs it once as the setup of fixture emu_kernel_cache (tests/engine/cuda/CMakeLists.txt), so on
// a fresh machine the *_emu tests that ctest -j starts together load the kernels from the cache instead
// of each compiling all of them. A warm cache makes it a no-op; any failure fails the fixture.
#include <cstdio>
#include <string>

#include "engine/cuda/device_impl.h"
#include "engine/cuda/modules_impl.h"

int main() {
  namespace cuda = tandem::cuda;
  auto device = cuda::Device::open(0);
  if (!device.ok()) {
    std::fprintf(stderr, "fill_kernel_cache: %s\n", device.error().message().c_str());
    return 1;
  }
  const std::string dir = cuda::default_cache_dir();
  if (dir.empty()) {
    std::fprintf(stderr, "fill_kernel_cache: no cache directory (neither XDG_CACHE_HOME nor HOME is set)\n");
    return 1;
  }
  auto modules = cuda::KernelModules::load((*device)->info(), dir);
  if (!modules.ok()) {
    std::fprintf(stderr, "fill_kernel_cache: %s\n", modules.error().message().c_str());
    return 1;
  }
  std::printf("fill_kernel_cache: %s\n", (*modules)->summary().c_str());
  return 0;
}
