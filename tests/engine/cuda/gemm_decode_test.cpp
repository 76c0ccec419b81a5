// The decode GEMM (kernels/gemm_decode.cu, gemm_impl.h's rule for decoder plans): results against float64
// for BF16 and F16 operands, every output type and epilogue, decoder shapes and odd row counts; a row's
// bits the same alone and at m = 1, 3, 16, 37, 512; the K split from (k, n) only; decoder plans routed to it.
#include <cstring>

#include "tests/engine/cuda/gemm_operands.h"

namespace tandem::cuda::test {
namespace {

using Case = GemmCase;
using Operands = GemmOperandsHost;

std::vector<float> run_gemm(const Case& c, const Operands& o, uint32_t first, uint32_t rows, uint32_t bucket_rows) {
  return run_gemm_rows(c, o, first, rows, bucket_rows, [&](const StepContext& ctx, const Loc& a, const Loc& out) {
    return gemm_decode_step(ctx, a, out, o.wd.data(), c.bias ? o.bd.as<float>() : nullptr, c.accumulate);
  });
}

class GemmDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
  }
};

TEST_F(GemmDecodeTest, MatchesFloat64) {
  std::mt19937 rng(5);
  std::vector<Case> cases;
  for (Dt ab : {Dt::kBF16, Dt::kF16}) {
    if (emulated()) {
      // Small n keeps the emulator quick; k 4096 takes the 8-way K split, 136 a partial 32-wide chunk.
      cases.push_back({3, 64, 48, ab, Dt::kF32, false, false});
      cases.push_back({37, 136, 40, ab, ab, false, true});
      cases.push_back({5, 4096, 24, ab, Dt::kF32, true, false});
      cases.push_back({1, 1024, 200, ab, Dt::kF32, true, true});
      cases.push_back({33, 256, 17, ab, ab, false, false});
    } else {
      // Qwen3-8B's q/o (4096 -> 4096), k/v (4096 -> 1024), gate_up (4096 -> 24576), down (12288 -> 4096).
      cases.push_back({37, 4096, 4096, ab, Dt::kF32, true, false});
      cases.push_back({1, 4096, 1024, ab, ab, false, true});
      cases.push_back({3, 4096, 24576, ab, ab, false, false});
      cases.push_back({5, 12288, 4096, ab, Dt::kF32, true, false});
      cases.push_back({1, 4096, 151936, ab, Dt::kF32, false, false});  // the LM head
      cases.push_back({33, 136, 40, ab, ab, false, true});
    }
  }
  for (const Case& c : cases) {
    const Operands o = make_operands(c, rng);
    const uint32_t bucket = c.m + 3;  // padding rows must keep the sentinel
    const std::vector<float> got = run_gemm(c, o, 0, c.m, bucket);
    const std::vector<double> want = float64_gemm(c, o);
    expect_rows(got, want, c.m, c.n, 2e-5 + storage_tolerance(c.out), describe(c));
  }
}

// Every row of an m-row batch has exactly the bits it has alone (m = 1), BF16 and F16, on a shape with
// the 8-way K split and a partial column tile.
TEST_F(GemmDecodeTest, RowBitsDoNotDependOnTheRowCount) {
  std::mt19937 rng(8);
  const uint32_t k = emulated() ? 1024 : 4096, n = emulated() ? 24 : 4104;
  ASSERT_EQ(gemm_decode_split(k, n).splits, 8u);
  for (Dt ab : {Dt::kBF16, Dt::kF16}) {
    const Case all{512, k, n, ab, Dt::kF32, true, true};
    const Operands o = make_operands(all, rng);
    std::vector<std::vector<float>> alone(all.m);
    for (uint32_t r = 0; r < all.m; ++r) {
      alone[r] = run_gemm(all, o, r, 1, 1);
      ASSERT_EQ(alone[r].size(), n);
    }
    for (uint32_t m : {1u, 3u, 16u, 37u, 512u}) {
      const std::vector<float> got = run_gemm(all, o, 0, m, m);
      for (uint32_t r = 0; r < m; ++r) {
        ASSERT_EQ(std::memcmp(got.data() + size_t{r} * n, alone[r].data(), n * sizeof(float)), 0)
            << dt_name(ab) << ": row " << r << " of " << m << " differs from the row alone";
      }
    }
  }
}

// The split is a function of (k, n): the decoder's shapes get enough warps for 132 SMs at one row.
TEST(GemmDecodeSplit, FromKAndNOnly) {
  const auto split = [](uint32_t k, uint32_t n) {
    const GemmDecodeSplit s = gemm_decode_split(k, n);
    return std::make_pair(s.splits, s.slice_chunks);
  };
  EXPECT_EQ(split(4096, 4096), std::make_pair(8u, 16u));     // q, o: 256 tiles × 8
  EXPECT_EQ(split(4096, 1024), std::make_pair(8u, 16u));     // k, v
  EXPECT_EQ(split(4096, 24576), std::make_pair(2u, 64u));    // gate_up: 1,536 tiles × 2
  EXPECT_EQ(split(12288, 4096), std::make_pair(8u, 48u));    // down
  EXPECT_EQ(split(4096, 151936), std::make_pair(1u, 128u));  // LM head: 9,496 tiles
  EXPECT_EQ(split(64, 48), std::make_pair(1u, 2u));          // too short to split
  EXPECT_EQ(split(136, 40), std::make_pair(1u, 5u));
}

// The default table prefills the target in runs of at most kDecodeGemmMaxRows tokens (buckets.txt): above it a
// decoder's split GEMMs run in one pass with other bits, and a prompt must get the bits it gets alone however
// many others share its runs (cuda_target_test APromptIsCutAsAloneWhenOthersShareItsRuns for the cut itself).
TEST(GemmDecodeSplitLine, TheDefaultTargetBucketsStayAtOrBelowIt) {
  const std::vector<ir::Bucket>& target = ir::BucketTable::defaults().stage("target");
  ASSERT_FALSE(target.empty());
  for (const ir::Bucket& b : target) EXPECT_LE(b.tokens, kDecodeGemmMaxRows) << ir::to_string(b);
}

size_t decode_steps(const CudaPlan& plan) {
  return count_steps(plan, {KernelId::gemm_decode_f16_f32, KernelId::gemm_decode_f16_f16,
                            KernelId::gemm_decode_bf16_f32, KernelId::gemm_decode_bf16_bf16});
}

// A 16-bit target's plans: every GEMM on the decode GEMM up to 1,024 rows; a 2,048-token prefill bucket's
// token GEMMs on cuBLASLt (its LM head over 256 pick rows stays on the decode GEMM); FP32 on cuBLASLt.
TEST_F(GemmDecodeTest, DecoderPlansRunItUpToTheLine) {
  const RoutingTarget rt = routing_target();
  ASSERT_FALSE(rt.graph.ops.empty());
  const ir::Graph& graph = rt.graph;
  const size_t gemm_ops = rt.gemm_ops;
  for (ir::Precision p : {ir::Precision::kBF16, ir::Precision::kF16, ir::Precision::kF32}) {
    CudaOptions options;
    options.precision = p;
    options.decode_gemm = true;  // opt-in (CudaOptions::decode_gemm)
    options.gemm_probe = false;  // the routing is under test, not cuBLASLt's choices: keeps the emulator quick
    options.graphs = false;
    auto backend = make_cuda_backend(options);
    ASSERT_TRUE(backend.ok()) << backend.error().message();
    const ir::Graph* graphs[] = {&graph};
    auto weights = (*backend)->upload(*rt.t.weights, graphs);
    ASSERT_TRUE(weights.ok()) << weights.error().message();
    std::vector<ir::Bucket> buckets = {ir::Bucket{1, 1, 1}, ir::Bucket{512, 32, 512}};
    if (p == ir::Precision::kBF16) buckets.push_back(ir::Bucket{2048, 64, 256});
    for (const ir::Bucket& bucket : buckets) {
      auto plan = (*backend)->lower(**weights, graph, bucket);
      ASSERT_TRUE(plan.ok()) << plan.error().message();
      const auto* cp = dynamic_cast<const CudaPlan*>(plan->get());
      ASSERT_NE(cp, nullptr);
      const std::string what = std::string(ir::to_string(p)) + " bucket " + ir::to_string(bucket);
      const bool big = bucket.tokens > kDecodeGemmMaxRows;
      if (p == ir::Precision::kF32) {
        EXPECT_EQ(decode_steps(*cp), 0u) << what;
      } else {
        EXPECT_EQ(decode_steps(*cp), big ? 1u : gemm_ops) << what;
        EXPECT_EQ(cp->gemms().empty(), !big) << what;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
