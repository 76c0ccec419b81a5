// Internals shared by the emulated CUDA runtime and cuBLASLt (tests only): stream work that runs at once
// or is recorded into a graph while the stream captures, and the registry of host-compiled kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

#include "simt.h"

namespace tandem::emu {

// Marks the calling thread as inside the emulated device for its lifetime: allocations made there are
// the device's, not the host's (the no-allocation test asks through tandem_emu_device_depth()).
struct DeviceScope {
  DeviceScope();
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

// Runs `op` now, or appends it to the graph being captured on `stream`.
void enqueue(cudaStream_t stream, std::function<void()> op);

// Checks the guard bytes behind every live device allocation; aborts naming `after` if one was written.
void check_guards(const char* after);

// Whether [p, p + bytes) lies inside one live device allocation (what a kernel may read).
bool device_readable(const void* p, size_t bytes);

struct KernelEntry {
  const char* name;
  Invoke invoke;      // calls the kernel with *(Args*)args
  size_t args_bytes;  // sizeof(Args)
};
const KernelEntry* find_kernel(const char* name);

}  // namespace tandem::emu
