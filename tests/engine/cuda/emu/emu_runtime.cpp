// The emulated CUDA runtime (tests only): the cudart subset engine/cuda calls, on the host, one device
// ("tandem emulator", sm_90). Device memory is host memory with guard bytes; streams run work at once
// unless capturing; kernels resolve by name to their host builds and run on the SIMT scheduler.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emu_internal.h"

struct CUstream_st {
  bool capturing = false;
  std::vector<std::function<void()>>* graph = nullptr;
};
struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point at;
};
struct CUlib_st {
  int unused = 0;
};

namespace tandem::emu {
namespace {

constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xcd;
constexpr size_t kTotalMemory = size_t{80} << 30;

struct Allocation {
  size_t bytes = 0;
  bool pinned = false;
};

struct Runtime {
  std::mutex mu;
  std::map<void*, Allocation> live;
  std::map<const void*, int> max_dynamic_shared;  // per kernel, as cudaFuncSetAttribute raised it
  size_t live_bytes = 0;
  cudaError_t last = cudaSuccess;
  CUstream_st default_stream;
};

Runtime& rt() {
  static Runtime r;
  return r;
}

cudaError_t fail(cudaError_t e) {
  rt().last = e;
  return e;
}

CUstream_st* stream_of(cudaStream_t s) { return s != nullptr ? s : &rt().default_stream; }

cudaError_t allocate(void** ptr, size_t bytes, bool pinned) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(256, (bytes + kGuard + 255) / 256 * 256));
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xff, bytes);  // NaN floats and huge indices: reading memory nothing wrote shows
  std::memset(p + bytes, kGuardByte, kGuard);
  std::lock_guard<std::mutex> lock(rt().mu);
  rt().live[p] = Allocation{bytes, pinned};
  if (!pinned) rt().live_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(void* ptr, bool pinned) {
  if (ptr == nullptr) return cudaSuccess;
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    auto it = rt().live.find(ptr);
    if (it == rt().live.end() || it->second.pinned != pinned) return fail(cudaErrorInvalidValue);
    a = it->second;
    rt().live.erase(it);
    if (!pinned) rt().live_bytes -= a.bytes;
  }
  const auto* p = static_cast<const unsigned char*>(ptr);
  for (size_t i = 0; i < kGuard; ++i) {
    if (p[a.bytes + i] != kGuardByte) {
      std::fprintf(stderr, "SIMT emulator: write past the end of a %zu-byte allocation found at free\n", a.bytes);
      std::abort();
    }
  }
  std::free(ptr);
  return cudaSuccess;
}

thread_local int g_depth = 0;

}  // namespace

DeviceScope::DeviceScope() { ++g_depth; }
DeviceScope::~DeviceScope() { --g_depth; }

void enqueue(cudaStream_t stream, std::function<void()> op) {
  CUstream_st* s = stream_of(stream);
  if (s->capturing) {
    s->graph->push_back(std::move(op));
  } else {
    op();
  }
}

void check_guards(const char* after) {
  std::lock_guard<std::mutex> lock(rt().mu);
  for (const auto& [ptr, a] : rt().live) {
    const auto* p = static_cast<const unsigned char*>(ptr);
    for (size_t i = 0; i < kGuard; ++i) {
      if (p[a.bytes + i] != kGuardByte) {
        std::fprintf(stderr, "SIMT emulator: %s wrote past the end of a %zu-byte allocation\n", after, a.bytes);
        std::abort();
      }
    }
  }
}

bool device_readable(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(rt().mu);
  const auto* c = static_cast<const unsigned char*>(p);
  auto it = rt().live.upper_bound(const_cast<void*>(p));
  if (it == rt().live.begin()) return false;
  --it;
  const auto* base = static_cast<const unsigned char*>(it->first);
  return !it->second.pinned && c >= base && c + bytes <= base + it->second.bytes;
}

}  // namespace tandem::emu

using tandem::emu::fail;

extern "C" int tandem_emu_device_depth() { return tandem::emu::g_depth; }
using tandem::emu::rt;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  tandem::emu::DeviceScope scope;
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetLastError(void) {
  tandem::emu::DeviceScope scope;
  const cudaError_t e = rt().last;
  rt().last = cudaSuccess;
  return e;
}

const char* cudaGetErrorName(cudaError_t error) {
  tandem::emu::DeviceScope scope;
  static const std::pair<cudaError_t, const char*> kNames[] = {
      {cudaSuccess, "cudaSuccess"},
      {cudaErrorInvalidValue, "cudaErrorInvalidValue"},
      {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation"},
      {cudaErrorInvalidDevice, "cudaErrorInvalidDevice"},
      {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration"},
      {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound"},
      {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported"},
      {cudaErrorIllegalState, "cudaErrorIllegalState"},
      {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage"},
  };
  for (const auto& [code, name] : kNames) {
    if (code == error) return name;
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  tandem::emu::DeviceScope scope;
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "tandem emulator");
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->totalGlobalMem = tandem::emu::kTotalMemory;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  tandem::emu::DeviceScope scope;
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  tandem::emu::DeviceScope scope;
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  tandem::emu::DeviceScope scope;
  *total = tandem::emu::kTotalMemory;
  *free = *total - rt().live_bytes;
  return cudaSuccess;
}

// No profiler here: a range asked for (cuda_decoder_bench --profile-step) is accepted and records nothing.
cudaError_t cudaProfilerStart() { return cudaSuccess; }
cudaError_t cudaProfilerStop() { return cudaSuccess; }

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return tandem::emu::allocate(ptr, bytes, false); }
cudaError_t cudaFree(void* ptr) { return tandem::emu::release(ptr, false); }
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return tandem::emu::allocate(ptr, bytes, true); }
cudaError_t cudaFreeHost(void* ptr) { return tandem::emu::release(ptr, true); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  tandem::emu::DeviceScope scope;
  *stream = new CUstream_st();
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  if (tandem::emu::stream_of(stream)->capturing) return fail(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  tandem::emu::DeviceScope scope;
  if (rt().default_stream.capturing) return fail(cudaErrorStreamCaptureUnsupported);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  tandem::emu::enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidPitchValue);
  tandem::emu::enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r) {
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    }
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  tandem::emu::enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, cudaJitOption*, void**, unsigned int,
                                cudaLibraryOption*, void**, unsigned int) {
  tandem::emu::DeviceScope scope;
  if (code == nullptr) return fail(cudaErrorInvalidValue);
  // Only images NVRTC can have made: a cubin (ELF) or PTX text. A damaged cache entry fails here too.
  const auto* c = static_cast<const char*>(code);
  const bool elf = std::memcmp(c, "\x7f" "ELF", 4) == 0;
  const bool ptx = std::strstr(c, ".version") != nullptr;
  if (!elf && !ptx) return fail(cudaErrorInvalidKernelImage);
  *library = new CUlib_st();
  return cudaSuccess;
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  tandem::emu::DeviceScope scope;
  delete library;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t* kernel, cudaLibrary_t library, const char* name) {
  tandem::emu::DeviceScope scope;
  const tandem::emu::KernelEntry* e = tandem::emu::find_kernel(name);
  if (library == nullptr || e == nullptr) return fail(cudaErrorSymbolNotFound);
  // INVARIANT: cudaLaunchKernel turns the handle back into this registry entry, which lives forever.
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<tandem::emu::KernelEntry*>(e));
  return cudaSuccess;
}

// Programmatic dependent launch changes when a kernel may start, not what it computes: the emulator runs
// kernels one after another either way (its wait and trigger are no-ops). Other attributes are refused.
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) return fail(cudaErrorInvalidValue);
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != cudaLaunchAttributeProgrammaticStreamSerialization) return fail(cudaErrorNotSupported);
  }
  return cudaLaunchKernel(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream);
}

cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  const auto* e = static_cast<const tandem::emu::KernelEntry*>(func);
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (e == nullptr || args == nullptr || args[0] == nullptr) return fail(cudaErrorInvalidValue);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || grid.y > 65535 ||
      grid.z > 65535) {
    return fail(cudaErrorInvalidConfiguration);
  }
  // More than 48 KB of dynamic shared memory only after cudaFuncSetAttribute raised the kernel's limit.
  size_t limit = 48u << 10;
  if (auto it = rt().max_dynamic_shared.find(func); it != rt().max_dynamic_shared.end()) {
    limit = std::max(limit, static_cast<size_t>(it->second));
  }
  if (shared > limit) return fail(cudaErrorInvalidValue);
  // The launch copies its argument pack, as the driver does.
  auto pack = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(args[0]),
                                                           static_cast<const unsigned char*>(args[0]) + e->args_bytes);
  const tandem::emu::Dim3 g{grid.x, grid.y, grid.z}, b{block.x, block.y, block.z};
  tandem::emu::enqueue(stream, [e, pack, g, b, shared] {
    tandem::emu::run_kernel(e->name, e->invoke, pack->data(), g, b, shared);
    tandem::emu::check_guards(e->name);
  });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  tandem::emu::DeviceScope scope;
  CUstream_st* s = tandem::emu::stream_of(stream);
  if (s->capturing) return fail(cudaErrorIllegalState);
  s->capturing = true;
  s->graph = new std::vector<std::function<void()>>();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  tandem::emu::DeviceScope scope;
  CUstream_st* s = tandem::emu::stream_of(stream);
  if (!s->capturing) return fail(cudaErrorIllegalState);
  *graph = new CUgraph_st{std::move(*s->graph)};
  delete s->graph;
  s->graph = nullptr;
  s->capturing = false;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  tandem::emu::DeviceScope scope;
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphUpload(cudaGraphExec_t, cudaStream_t) { return cudaSuccess; }

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  if (tandem::emu::stream_of(stream)->capturing) return fail(cudaErrorStreamCaptureUnsupported);
  for (const auto& op : exec->ops) op();
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  tandem::emu::DeviceScope scope;
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  tandem::emu::DeviceScope scope;
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  tandem::emu::DeviceScope scope;
  *event = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  tandem::emu::DeviceScope scope;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  tandem::emu::DeviceScope scope;
  tandem::emu::enqueue(stream, [event] { event->at = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}

// Outside a capture both forms record now (in stream order); inside one, the external form becomes a
// node of the graph, which is what the emulator's capture does with any enqueued work.
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  tandem::emu::DeviceScope scope;
  if (flags != cudaEventRecordDefault && flags != cudaEventRecordExternal) return fail(cudaErrorInvalidValue);
  if (flags == cudaEventRecordDefault && tandem::emu::stream_of(stream)->capturing) {
    return fail(cudaErrorStreamCaptureUnsupported);  // tandem records events in captures as nodes only
  }
  tandem::emu::enqueue(stream, [event] { event->at = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
// Work runs when it is queued, so a recorded event is always complete.
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  tandem::emu::DeviceScope scope;
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  tandem::emu::DeviceScope scope;
  if (func == nullptr) return fail(cudaErrorInvalidValue);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return fail(cudaErrorInvalidValue);
  if (value < 0 || value > (227 << 10)) return fail(cudaErrorInvalidValue);  // the emulated sm_90's opt-in
  rt().max_dynamic_shared[func] = value;
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  tandem::emu::DeviceScope scope;
  if (func == nullptr) return fail(cudaErrorInvalidValue);
  *attr = cudaFuncAttributes{};
  return cudaSuccess;
}

}  // extern "C"
