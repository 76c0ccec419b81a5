// A warm plan makes no host allocation (scorer.md §3): global operator new counts while batches run on
// plans already lowered and run once, F32 and F16, through the executor with a reused Outputs. Under the
// emulator, allocations the emulated device makes for itself are not the host's and are not counted.
#include <atomic>
#include <cstdlib>
#include <new>

#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/cuda/model_util.h"
#include "engine/ir/executor.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "tests/engine/models/qwen3/tiny_models.h"

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

// A warm decoder plan (the Qwen3 target's graph over a State: prefill chunk, decode and verify batches of
// several sequences at their own positions) allocates nothing either, BF16.
TEST(CudaNoAlloc, WarmDecoderPlansAllocateNothing) {
  TANDEM_REQUIRE_GPU();
  testing::TargetShape shape;
  shape.vocab = 64;
  shape.hidden = 64;
  shape.layers = 2;
  shape.head_dim = 32;
  const testing::TinyTarget t = testing::random_target(shape, 3);
  CudaOptions o;
  o.precision = ir::Precision::kBF16;
  auto backend = make_cuda_backend(o);
  ASSERT_TRUE(backend.ok()) << backend.error().message();
  auto graph = models::qwen3::build_target_graph(t.cfg, std::vector<uint32_t>{0});
  ASSERT_TRUE(graph.ok()) << graph.error().message();
  const ir::Graph* graphs[] = {&*graph};
  auto weights = (*backend)->upload(*t.weights, graphs);
  ASSERT_TRUE(weights.ok()) << weights.error().message();
  auto state = (*backend)->create_state(*graph, 4, 128);
  ASSERT_TRUE(state.ok()) << state.error().message();
  ir::Executor exec(**backend, **weights, *graph, ir::BucketTable::defaults(), models::qwen3::kTargetStage);
  std::vector<ir::Batch> batches;
  for (const auto& [rows, starts] : {std::pair<uint32_t, std::vector<uint32_t>>{1, {40, 7, 90}},
                                     {5, {41, 8, 91}}, {16, {0, 60, 100}}, {1, {50}}}) {
    ir::Batch b;
    for (size_t s = 0; s < starts.size(); ++s) {
      std::vector<uint32_t> ids(rows, static_cast<uint32_t>(s + 1)), picks;
      for (uint32_t r = 0; r < rows; ++r) picks.push_back(r);
      b.add_sequence(ids, picks, 0);
      b.start.push_back(starts[s]);
      b.slot.push_back(static_cast<uint32_t>(s));
      b.sampling.push_back(ir::SamplingParams{s == 1 ? 0.8f : 0.0f, 0.9f, 5});
    }
    batches.push_back(std::move(b));
  }
  ir::Outputs out;
  for (const ir::Batch& b : batches) ASSERT_TRUE(exec.run(b, state->get(), out).ok());  // lowers and warms
  g_allocations = 0;
  g_counting = true;
  for (int pass = 0; pass < (emulated() ? 1 : 5); ++pass) {
    for (const ir::Batch& b : batches) {
      if (!exec.run(b, state->get(), out).ok()) {
        g_counting = false;
        FAIL() << "a warm decoder run failed";
      }
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0) << "host allocations on warm decoder plans";
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
