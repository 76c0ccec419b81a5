// Helpers shared by the GPU tests (real device or emulator): skipping without a device, one device
// context and kernel set per test binary, device copies of host vectors, batches with their device
// index buffer, sentinel-filled padding, and tolerance checks that name the first element that differs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/index_impl.h"
#include "engine/cuda/modules_impl.h"
#include "engine/cuda/steps_impl.h"

namespace tandem::cuda::test {

// Skips the test (with the reason) when there is no CUDA device.
#define TANDEM_REQUIRE_GPU()                                                                         \
  do {                                                                                               \
    if (::tandem::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device (no driver or no GPU)"; \
  } while (false)

struct Gpu {
  std::unique_ptr<Device> device;
  std::unique_ptr<KernelModules> modules;
  std::unique_ptr<GemmAlgos> algos;
  bool emulated = false;  // the SIMT emulator: tests shrink their sizes
};

// The binary's device context and kernels, opened on first use; fails the test if opening fails.
inline Gpu& gpu() {
  static Gpu g = [] {
    Gpu out;
    auto d = Device::open(0);
    if (!d.ok()) {
      ADD_FAILURE() << d.error().message();
      return out;
    }
    out.device = std::move(d).value();
    auto m = KernelModules::load(out.device->info(), default_cache_dir());
    if (!m.ok()) {
      ADD_FAILURE() << m.error().message();
      return out;
    }
    out.modules = std::move(m).value();
    out.algos = std::make_unique<GemmAlgos>(*out.device, true);
    out.emulated = out.device->info().name.rfind("tandem emulator", 0) == 0;
    return out;
  }();
  return g;
}

inline bool emulated() { return gpu().emulated; }

// Copies on the backend's stream (non-blocking, so not ordered with the legacy default stream) and waits.
inline void copy_on_stream(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaStream_t s = gpu().device->stream();
  // INVARIANT: callers pass buffers of at least `bytes`; the wait keeps the host side alive until done.
  EXPECT_EQ(cudaMemcpyAsync(dst, src, bytes, kind, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  auto b = DeviceBuffer::make(host.size() * sizeof(T), "a test input");
  EXPECT_TRUE(b.ok()) << b.error().message();
  if (!b.ok()) return {};
  if (!host.empty()) {
    copy_on_stream(b->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  return std::move(b).value();
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& b, size_t n) {
  std::vector<T> out(n);
  if (n > 0) copy_on_stream(out.data(), b.data(), n * sizeof(T), cudaMemcpyDeviceToHost);
  return out;
}

inline void run_step(const Result<KernelStep>& step) {
  ASSERT_TRUE(step.ok()) << step.error().message();
  auto st = launch(*gpu().modules, *step, gpu().device->stream());
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(cudaStreamSynchronize(gpu().device->stream()), cudaSuccess);
}

// A launcher's steps in order (a pass and the pass that combines its partials, say).
inline void run_steps(const Result<std::vector<KernelStep>>& steps) {
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  for (const KernelStep& s : *steps) {
    auto st = launch(*gpu().modules, s, gpu().device->stream());
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  ASSERT_EQ(cudaStreamSynchronize(gpu().device->stream()), cudaSuccess);
}

inline constexpr float kSentinel = 7.0f;

// A batch on the device: its index buffer for a bucket, and the launch context over it.
struct DeviceBatch {
  ir::Batch batch;
  ir::Bucket bucket;
  IndexLayout layout;
  DeviceBuffer index;
  StepContext ctx;
};

// `caches` (with `capacity` positions per slot) binds a decoder batch to caches, as a State does.
inline std::unique_ptr<DeviceBatch> device_batch(ir::Batch batch, ir::Bucket bucket,
                                                CudaAttention attention = CudaAttention::kSimt,
                                                const std::vector<kernels::CacheTable>& caches = {},
                                                uint32_t capacity = 0) {
  auto d = std::make_unique<DeviceBatch>();
  d->batch = std::move(batch);
  d->bucket = bucket;
  d->layout = IndexLayout::for_bucket(bucket, static_cast<uint32_t>(caches.size()));
  std::vector<uint32_t> words(d->layout.words, 0xdeadbeefu);
  fill_index(d->layout, d->batch, words.data(), BoundCaches{caches.empty() ? nullptr : caches.data(), capacity});
  d->index = to_device(words);
  const auto* base = d->index.as<const unsigned>();
  const IndexLayout& l = d->layout;
  d->ctx.bucket = bucket;
  d->ctx.ix = index_pointers(l, base);
  d->ctx.tiles_max = l.tiles_max;
  d->ctx.attention = attention;
  d->ctx.sms = static_cast<uint32_t>(gpu().device->info().sms);
  return d;
}

// Sequences of the given lengths (token ids < vocab), `markers[s]` marker positions each, random qtypes.
inline ir::Batch make_batch(const std::vector<uint32_t>& lengths, const std::vector<uint32_t>& markers,
                            uint32_t vocab, std::mt19937& rng) {
  ir::Batch b;
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<uint32_t> ids(lengths[s]);
    for (auto& id : ids) id = static_cast<uint32_t>(rng() % vocab);
    std::vector<uint32_t> marks;
    for (uint32_t m = 0; m < (s < markers.size() ? markers[s] : 0) && lengths[s] > 0; ++m) {
      marks.push_back(static_cast<uint32_t>(rng() % lengths[s]));
    }
    b.add_sequence(ids, marks, static_cast<uint8_t>(rng() % 3));
  }
  return b;
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

inline std::vector<uint16_t> to_halves(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = float_to_half(x[i]);
  return out;
}

inline std::vector<float> from_halves(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = half_to_float(x[i]);
  return out;
}

inline std::vector<uint16_t> to_bf16s(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = float_to_bf16(x[i]);
  return out;
}

inline std::vector<float> from_bf16s(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_float(x[i]);
  return out;
}

// x as the element type holds it (rounded to nearest even for 16-bit types).
inline std::vector<float> rounded_to(const std::vector<float>& x, Dt type) {
  if (type == Dt::kF16) return from_halves(to_halves(x));
  if (type == Dt::kBF16) return from_bf16s(to_bf16s(x));
  return x;
}

// The tolerance of a value stored as `out` (its rounding), on top of the f32 arithmetic.
inline double storage_tolerance(Dt out) {
  switch (out) {
    case Dt::kF32: return 2e-6;
    case Dt::kF16: return 1e-3;
    case Dt::kBF16: return 8e-3;
    case Dt::kU32: return 0.0;
  }
  return 0.0;
}

// x on the device in the element type (f32, f16 or bf16).
inline DeviceBuffer typed_buffer(const std::vector<float>& x, Dt type) {
  if (type == Dt::kF16) return to_device(to_halves(x));
  if (type == Dt::kBF16) return to_device(to_bf16s(x));
  return to_device(x);
}

// An output buffer of `rows` × `width` elements (f32, f16 or bf16), every element the sentinel.
inline DeviceBuffer sentinel_buffer(size_t rows, size_t width, Dt type) {
  if (type == Dt::kF32) return to_device(std::vector<float>(rows * width, kSentinel));
  if (type == Dt::kBF16) return to_device(std::vector<uint16_t>(rows * width, float_to_bf16(kSentinel)));
  return to_device(std::vector<uint16_t>(rows * width, float_to_half(kSentinel)));
}

// The buffer back as floats (16-bit types widened exactly).
inline std::vector<float> read_floats(const DeviceBuffer& b, size_t n, Dt type) {
  if (type == Dt::kF32) return to_host<float>(b, n);
  if (type == Dt::kBF16) return from_bf16s(to_host<uint16_t>(b, n));
  return from_halves(to_host<uint16_t>(b, n));
}

// |got − want| <= tol · (1 + |want|) for the first `rows` rows; rows past them keep the sentinel exactly.
inline void expect_rows(const std::vector<float>& got, const std::vector<double>& want, size_t rows, size_t width,
                        double tol, const std::string& what) {
  ASSERT_GE(got.size(), rows * width) << what;
  ASSERT_GE(want.size(), rows * width) << what;
  for (size_t i = 0; i < rows * width; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol * (1.0 + std::fabs(want[i])))) {
      ADD_FAILURE() << what << ": row " << i / width << " column " << i % width << " is " << got[i] << ", expected "
                    << want[i] << " (tolerance " << tol << ")";
      return;
    }
  }
  for (size_t i = rows * width; i < got.size(); ++i) {
    if (got[i] != kSentinel) {
      ADD_FAILURE() << what << ": padding row " << i / width << " column " << i % width << " was written (" << got[i]
                    << ")";
      return;
    }
  }
}

inline Loc make_loc(const DeviceBuffer& b, ir::Rows rows, uint32_t width, Dt type, std::string name) {
  Loc l;
  l.ptr = b.data();
  l.rows = rows;
  l.width = width;
  l.type = type;
  l.name = std::move(name);
  return l;
}

}  // namespace tandem::cuda::test
