// A warm plan makes no host allocation (scorer.md §3): global operator new counts while batches run on
// plans already lowered and run once, F32 and F16, through the executor with a reused Outputs. Under the
// emulator, allocations the emulated device makes for itself are not the host's and are not counted.
#include <atomic>
#include <cstdlib>
#include <new>

#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/cuda/model_util.h"

extern "C" int tandem_emu_device_depth() __attribute__((weak));

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

void note_allocation() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  if (tandem_emu_device_depth != nullptr && tandem_emu_device_depth() > 0) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
}

void* allocate(std::size_t n, std::size_t align) {
  note_allocation();
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n == 0 ? 1 : n)
                                               : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n, alignof(std::max_align_t)); }
void* operator new[](std::size_t n) { return allocate(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace tandem::cuda::test {
namespace {

void check_precision(ir::Precision precision) {
  auto model = tiny_model(5);
  ASSERT_TRUE(model.ok()) << model.error().message();
  CudaOptions options;
  options.gemm_tier_min_tokens = 64;  // plans with GEMM row tiers too: picking one allocates nothing
  auto runner = cuda_runner(**model, precision, options);
  ASSERT_TRUE(runner.ok()) << runner.error().message();
  std::mt19937 rng(31);
  std::vector<ir::Batch> batches;
  for (uint32_t questions : {1u, 3u, 12u, 2u, 12u, 1u}) {
    batches.push_back(random_batch(rng, (*model)->vocab(), questions, 40, 4));
  }
  for (const ir::Batch& b : batches) ASSERT_TRUE((*runner)->run(b).ok());  // lowers and warms every plan
  const int passes = emulated() ? 1 : 5;
  g_allocations = 0;
  g_counting = true;
  for (int pass = 0; pass < passes; ++pass) {
    for (const ir::Batch& b : batches) {
      if (!(*runner)->run(b).ok()) {
        g_counting = false;
        FAIL() << "a warm run failed";
      }
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0) << ir::to_string(precision) << ": host allocations on warm plans";
}

TEST(CudaNoAlloc, WarmFp32PlansAllocateNothing) {
  TANDEM_REQUIRE_GPU();
  check_precision(ir::Precision::kF32);
}

TEST(CudaNoAlloc, WarmFp16PlansAllocateNothing) {
  TANDEM_REQUIRE_GPU();
  check_precision(ir::Precision::kF16);
}

// The counter itself works: a vector growing on the counted path is seen.
TEST(CudaNoAlloc, TheCounterSeesAllocations) {
  g_allocations = 0;
  g_counting = true;
  std::vector<int>* v = new std::vector<int>(10);
  g_counting = false;
  delete v;
  EXPECT_GE(g_allocations.load(), 2);
}

}  // namespace
}  // namespace tandem::cuda::test
