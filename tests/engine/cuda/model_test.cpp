// The compat model on CUDA against the CPU reference backend (scorer.md §5): FP32 within 1e-4, FP16
// probabilities within 1.5e-2 per question and 5e-4 on average with argmax equal past a 1e-2 margin,
// every default bucket, plans captured as CUDA graphs, an op past the kernels' limits refused.
#include <iostream>
#include <set>

#include "engine/cuda/plan_impl.h"
#include "engine/cuda/weights_impl.h"
#include "kernels/args.cuh"
#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/cuda/model_util.h"

namespace tandem::cuda::test {
namespace {

constexpr double kTolF32 = 1e-4;
constexpr double kProbMax = 1.5e-2, kProbMean = 5e-4, kActF16 = 5e-2;

class ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (device_count() == 0) return;
    auto m = tiny_model();
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = std::move(m).value().release();
    auto c = cpu_runner(*model_);
    ASSERT_TRUE(c.ok()) << c.error().message();
    cpu_ = std::move(c).value().release();
    auto f32 = cuda_runner(*model_, ir::Precision::kF32);
    ASSERT_TRUE(f32.ok()) << f32.error().message();
    f32_ = std::move(f32).value().release();
    auto f16 = cuda_runner(*model_, ir::Precision::kF16);
    ASSERT_TRUE(f16.ok()) << f16.error().message();
    f16_ = std::move(f16).value().release();
  }
  static void TearDownTestSuite() {
    delete f16_;
    delete f32_;
    delete cpu_;
    delete model_;
    f16_ = f32_ = cpu_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(f16_, nullptr) << "the suite's setup failed";
  }

  // Runs the batch on the reference and on `gpu`.
  static void run_both(Runner& gpu_runner, const ir::Batch& b) {
    auto st = cpu_->run(b);
    ASSERT_TRUE(st.ok()) << st.error().message();
    st = gpu_runner.run(b);
    ASSERT_TRUE(st.ok()) << st.error().message();
  }

  static inline decision::DecisionModel* model_ = nullptr;
  static inline Runner* cpu_ = nullptr;
  static inline Runner* f32_ = nullptr;
  static inline Runner* f16_ = nullptr;
};

uint32_t rounds() { return emulated() ? 3 : 16; }

TEST_F(ModelTest, Fp32MatchesTheCpuReference) {
  std::mt19937 rng(7);
  std::set<ir::Bucket> buckets;
  for (uint32_t r = 0; r < rounds(); ++r) {
    const ir::Batch b = random_batch(rng, model_->vocab(), 1 + static_cast<uint32_t>(rng() % 12), 70, 5);
    buckets.insert(f32_->executor->bucket_for(b).value());
    ASSERT_NO_FATAL_FAILURE(run_both(*f32_, b));
    ASSERT_NO_FATAL_FAILURE(expect_close_outputs(*f32_, *cpu_, kTolF32, "round " + std::to_string(r)));
  }
  EXPECT_GE(buckets.size(), 2u) << "the rounds should span several buckets";
}

TEST_F(ModelTest, Fp16ProbabilitiesStayWithinTheBound) {
  std::mt19937 rng(8);
  ProbStats stats;
  for (uint32_t r = 0; r < 2 * rounds(); ++r) {
    const ir::Batch b = random_batch(rng, model_->vocab(), 1 + static_cast<uint32_t>(rng() % 12), 70, 5);
    ASSERT_NO_FATAL_FAILURE(run_both(*f16_, b));
    stats.add(*model_, b, *f16_, *cpu_);
  }
  std::cout << "FP16 vs CPU over " << stats.questions << " questions: max probability error " << stats.max_err
            << " (" << stats.worst << "), mean " << stats.mean() << ", argmax misses " << stats.argmax_misses
            << ", max act error " << stats.act_max_err << "\n";
  EXPECT_LE(stats.max_err, kProbMax) << stats.worst;
  EXPECT_LE(stats.mean(), kProbMean);
  EXPECT_EQ(stats.argmax_misses, 0u);
  EXPECT_LE(stats.act_max_err, kActF16);
}

// The other attention kernels (TANDEM_CUDA_ATTENTION=tc2split|tc|simt, the fallbacks of the default
// tc2) keep FP16 plans within the bound too.
TEST_F(ModelTest, Fp16EveryAttentionKernelStaysWithinTheBound) {
  for (CudaAttention kernel : {CudaAttention::kTc2Split, CudaAttention::kTc, CudaAttention::kSimt}) {
    CudaOptions o;
    o.attention = kernel;
    auto runner = cuda_runner(*model_, ir::Precision::kF16, o);
    ASSERT_TRUE(runner.ok()) << runner.error().message();
    std::mt19937 rng(10);
    ProbStats stats;
    for (uint32_t r = 0; r < rounds(); ++r) {
      const ir::Batch b = random_batch(rng, model_->vocab(), 1 + static_cast<uint32_t>(rng() % 12), 70, 5);
      ASSERT_NO_FATAL_FAILURE(run_both(**runner, b));
      stats.add(*model_, b, **runner, *cpu_);
    }
    std::cout << "FP16 (attention " << to_string(kernel) << ") vs CPU over " << stats.questions
              << " questions: max probability error " << stats.max_err << ", mean " << stats.mean() << "\n";
    EXPECT_LE(stats.max_err, kProbMax) << to_string(kernel) << ": " << stats.worst;
    EXPECT_LE(stats.mean(), kProbMean) << to_string(kernel);
    EXPECT_EQ(stats.argmax_misses, 0u) << to_string(kernel);
  }
}

// A batch that needs exactly `b`: more tokens than the bucket before it, within b's counts.
ir::Batch batch_for_bucket(const ir::Bucket& b, std::mt19937& rng, uint32_t vocab) {
  const uint32_t seqs = std::max(1u, std::min(b.seqs, b.tokens / 16));
  ir::Batch out;
  uint32_t markers_left = b.picks;
  for (uint32_t s = 0; s < seqs; ++s) {
    const uint32_t len = b.tokens / seqs + (s < b.tokens % seqs ? 1 : 0);
    const uint32_t m = std::min({markers_left, len, 1 + static_cast<uint32_t>(rng() % 5)});
    add_question(out, rng, vocab, len, m);
    markers_left -= std::min(markers_left, m);
  }
  return out;
}

TEST_F(ModelTest, EveryDefaultBucketMatchesTheReference) {
  std::mt19937 rng(9);
  const auto& buckets = ir::BucketTable::defaults().stage("compat");
  ASSERT_FALSE(buckets.empty());
  for (const ir::Bucket& bucket : buckets) {
    if (emulated() && bucket.tokens > 256) {
      std::cout << "emulator: bucket " << ir::to_string(bucket) << " left to the GPU run\n";
      continue;
    }
    const ir::Batch b = batch_for_bucket(bucket, rng, model_->vocab());
    ASSERT_EQ(f32_->executor->bucket_for(b).value(), bucket) << ir::to_string(bucket);
    ASSERT_NO_FATAL_FAILURE(run_both(*f32_, b));
    ASSERT_NO_FATAL_FAILURE(expect_close_outputs(*f32_, *cpu_, kTolF32, "F32 bucket " + ir::to_string(bucket)));
    ASSERT_TRUE(f16_->run(b).ok());
    ProbStats stats;
    stats.add(*model_, b, *f16_, *cpu_);
    EXPECT_LE(stats.max_err, kProbMax) << "F16 bucket " << ir::to_string(bucket) << ": " << stats.worst;
    EXPECT_EQ(stats.argmax_misses, 0u) << "F16 bucket " << ir::to_string(bucket);
  }
}

TEST_F(ModelTest, PlansAreCapturedGraphsWithTheirMemoryReported) {
  EXPECT_TRUE(f32_->backend->caps().graphs);
  EXPECT_EQ(f32_->backend->caps().name, "cuda");
  EXPECT_TRUE(f32_->backend->caps().decoders);
  for (Runner* r : {f32_, f16_}) {
    auto plan = r->backend->lower(*r->weights, model_->graph(), ir::Bucket{160, 40, 160});
    ASSERT_TRUE(plan.ok()) << plan.error().message();
    const auto* p = dynamic_cast<const CudaPlan*>(plan->get());
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(p->captured());
    EXPECT_GT(p->bytes(), p->arena_bytes());
    int worst_rank = 0;
    for (const Gemm& g : p->gemms()) worst_rank = std::max(worst_rank, g.rank());
    std::cout << (r == f32_ ? "F32" : "F16") << " plan 160/40/160: " << p->steps().size() << " steps, "
              << p->gemms().size() << " GEMMs (worst rank " << worst_rank << "), arena " << p->arena_bytes()
              << " B, plan " << p->bytes() << " B, weights " << r->weights->bytes() << " B\n";
  }
  // FP16 keeps GEMM weights in FP16 only: well under the FP32 weight bytes.
  EXPECT_LT(f16_->weights->bytes(), f32_->weights->bytes());
}

TEST_F(ModelTest, Fp16KeepsNoFp32CopyOfAGemmWeight) {
  const auto* w16 = dynamic_cast<const CudaWeights*>(f16_->weights.get());
  const auto* w32 = dynamic_cast<const CudaWeights*>(f32_->weights.get());
  ASSERT_NE(w16, nullptr);
  ASSERT_NE(w32, nullptr);
  const ir::Graph& g = model_->graph();
  size_t gemms = 0;
  for (const ir::Op& op : g.ops) {
    const auto* gm = std::get_if<ir::Gemm>(&op);
    if (gm == nullptr) continue;
    const std::string name = g.weight(gm->w).name();
    const DeviceTensor* t16 = w16->find(name);
    const DeviceTensor* t32 = w32->find(name);
    ASSERT_NE(t16, nullptr) << name;
    ASSERT_NE(t32, nullptr) << name;
    EXPECT_EQ(t16->f32.bytes(), 0u) << name << " keeps an FP32 copy in an FP16 backend";
    EXPECT_GT(t16->half.bytes(), 0u) << name;
    EXPECT_EQ(t32->half.bytes(), 0u) << name;
    ++gemms;
  }
  EXPECT_GT(gemms, 0u);
}

// F16 and BF16 checkpoints convert exactly as the CPU backend converts them.
TEST_F(ModelTest, F16AndBf16CheckpointsMatchTheReference) {
  namespace dt = decision::testing;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const dt::TinyShape shape;
    auto model = decision::DecisionModel::from_parts(dt::to_source(dt::tiny_tensors(shape, 77, dtype)),
                                                     dt::tiny_encoder(shape), dt::tiny_laya(shape));
    ASSERT_TRUE(model.ok()) << model.error().message();
    auto cpu = cpu_runner(**model);
    auto gpu_runner = cuda_runner(**model, ir::Precision::kF32);
    ASSERT_TRUE(cpu.ok() && gpu_runner.ok());
    std::mt19937 rng(3);
    const ir::Batch b = random_batch(rng, (*model)->vocab(), 5, 40, 4);
    ASSERT_TRUE((*cpu)->run(b).ok());
    ASSERT_TRUE((*gpu_runner)->run(b).ok());
    ASSERT_NO_FATAL_FAILURE(expect_close_outputs(**gpu_runner, **cpu, kTolF32, std::string(to_string(dtype))));
  }
}

TEST_F(ModelTest, RopeIsFusedIntoAttention) {
  auto plan = f32_->backend->lower(*f32_->weights, model_->graph(), ir::Bucket{32, 8, 32});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const auto* p = dynamic_cast<const CudaPlan*>(plan->get());
  ASSERT_NE(p, nullptr);
  size_t fused = 0, rope = 0;
  for (const Step& s : p->steps()) {
    const std::string& label = step_label(s);
    fused += label.find("(rope fused)") != std::string::npos;
    rope += label.find(" rope ") != std::string::npos;
  }
  EXPECT_EQ(fused, decision::testing::TinyShape{}.layers);
  EXPECT_EQ(rope, 0u);
}

// An op the backend does not run is refused before anything is allocated, named with its index; a
// decoder's caches get a State sized as asked.
TEST_F(ModelTest, UnsupportedOpsAreNamedAndStatesAreSized) {
  // A top-k past what the kernel keeps (kernels::kTopKMax) is the op the backend refuses.
  ir::Graph g;
  g.feature_width = 256;
  const ir::Val x = g.add_val(ir::Rows::kTokens, 256, "x");
  const uint32_t k = kernels::kTopKMax + 1;
  const ir::Val ids = g.add_val(ir::Rows::kTokens, k, "ids", ir::Elem::kU32);
  const ir::Val values = g.add_val(ir::Rows::kTokens, k, "values");
  g.add_op(ir::Input{x});
  g.add_op(ir::TopK{x, 256, k, ids, values});
  g.add_output("ids", ids);
  ASSERT_TRUE(f32_->backend->supports(g, g.ops[0]).ok());
  ASSERT_FALSE(f32_->backend->supports(g, g.ops[1]).ok());
  auto plan = f32_->backend->lower(*f32_->weights, g, ir::Bucket{32, 8, 32});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(plan.error().message().find("the cuda backend cannot run graph op 1 (top_k)"), std::string::npos)
      << plan.error().message();
  EXPECT_NE(plan.error().message().find("top_k of 65 (the CUDA kernel keeps up to 64)"), std::string::npos)
      << plan.error().message();
  g.add_cache("kv.0", 8);
  g.add_cache("kv.1", 24);
  auto state = f32_->backend->create_state(g, 3, 16);
  ASSERT_TRUE(state.ok()) << state.error().message();
  EXPECT_EQ((*state)->slots(), 3u);
  EXPECT_EQ((*state)->capacity(), 16u);
  EXPECT_EQ((*state)->bytes_per_position(), size_t{2} * (8 + 24) * 4);
  EXPECT_EQ((*state)->bytes(), size_t{3} * 16 * (*state)->bytes_per_position());
  auto half = f16_->backend->create_state(g, 3, 16);
  ASSERT_TRUE(half.ok()) << half.error().message();
  EXPECT_EQ((*half)->bytes_per_position(), size_t{2} * (8 + 24) * 2) << "16-bit plans keep 16-bit caches";
  EXPECT_FALSE(f32_->backend->create_state(g, 0, 16).ok());
}

TEST_F(ModelTest, WeightsOfAnotherBackendAreRefused) {
  auto plan = f32_->backend->lower(*cpu_->weights, model_->graph(), ir::Bucket{32, 8, 32});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind(), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::cuda::test
