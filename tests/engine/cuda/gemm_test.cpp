// The cuBLASLt wrapper (scorer.md §3): results against float64 for every type combination and epilogue
// tandem uses (FP32 GEMMs must not run in TF32), and determinism: a row's bits are the same whatever the
// bucket's row count, on the Laya shapes (1024→3072, 1024→1024, 1024→5248, 2624→1024), FP32 and FP16;
// choices remembered on disk make the same picks without measuring again.
#include <filesystem>
#include <iostream>

#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

struct Case {
  uint32_t m, k, n;
  Dt ab, out;
  bool accumulate;
  LtEpilogue epilogue;
};

struct Operands {
  std::vector<float> a, w, c, bias;  // as the device holds them (FP16 inputs already rounded)
  DeviceBuffer ad, wd, od, bd;
};

Operands make_operands(const Case& c, std::mt19937& rng) {
  Operands o;
  auto round = [&](std::vector<float> v) { return c.ab == Dt::kF16 ? from_halves(to_halves(v)) : v; };
  o.a = round(random_floats(size_t{c.m} * c.k, rng));
  o.w = round(random_floats(size_t{c.n} * c.k, rng, 1.0f / std::sqrt(static_cast<float>(c.k))));
  o.c = random_floats(size_t{c.m} * c.n, rng);
  if (c.out == Dt::kF16) o.c = from_halves(to_halves(o.c));
  o.bias = random_floats(c.n, rng);
  auto upload = [&](const std::vector<float>& v, Dt t) { return t == Dt::kF32 ? to_device(v) : to_device(to_halves(v)); };
  o.ad = upload(o.a, c.ab);
  o.wd = upload(o.w, c.ab);
  o.od = upload(o.c, c.out);
  o.bd = to_device(o.bias);
  return o;
}

GemmShape shape_of(const Case& c) {
  GemmShape s;
  s.k = c.k;
  s.n = c.n;
  s.ab = c.ab;
  s.out = c.out;
  s.accumulate = c.accumulate;
  s.epilogue = c.epilogue;
  return s;
}

Result<Gemm> make_gemm(const Case& c, const Operands& o) {
  GemmOperands ops{o.wd.data(), o.ad.data(), o.od.data(), o.bd.as<float>()};
  return Gemm::make(*gpu().device, *gpu().algos, shape_of(c), c.m, ops);
}

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().algos, nullptr);
  }
};

TEST_F(GemmTest, MatchesFloat64ForEveryTypeAndEpilogue) {
  std::mt19937 rng(11);
  const uint32_t k = emulated() ? 96 : 1024;
  std::vector<Case> cases;
  for (LtEpilogue e : {LtEpilogue::kNone, LtEpilogue::kBias, LtEpilogue::kRelu, LtEpilogue::kReluBias}) {
    cases.push_back({50, k, 72, Dt::kF32, Dt::kF32, false, e});
    cases.push_back({50, k, 72, Dt::kF16, Dt::kF32, false, e});
    cases.push_back({50, k, 72, Dt::kF16, Dt::kF16, false, e});
  }
  cases.push_back({50, k, 72, Dt::kF32, Dt::kF32, true, LtEpilogue::kNone});
  cases.push_back({50, k, 72, Dt::kF32, Dt::kF32, true, LtEpilogue::kBias});
  cases.push_back({50, k, 72, Dt::kF16, Dt::kF32, true, LtEpilogue::kNone});
  cases.push_back({50, k, 72, Dt::kF16, Dt::kF32, true, LtEpilogue::kBias});
  cases.push_back({7, k, 1, Dt::kF16, Dt::kF32, false, LtEpilogue::kBias});   // the logits GEMM shape
  cases.push_back({7, 256, 2, Dt::kF32, Dt::kF32, false, LtEpilogue::kBias});  // the act GEMM shape
  for (const Case& c : cases) {
    const std::string what = fmt::format("{}x{}x{} {}->{} {} epilogue {}", c.m, c.k, c.n, dt_name(c.ab), dt_name(c.out),
                                         c.accumulate ? "add" : "set", static_cast<int>(c.epilogue));
    Operands o = make_operands(c, rng);
    auto g = make_gemm(c, o);
    if (!g.ok()) {
      // An epilogue cuBLASLt lacks for these types is allowed: lowering then runs bias_act instead.
      EXPECT_NE(c.epilogue, LtEpilogue::kNone) << what << ": " << g.error().message();
      std::cout << what << ": not offered by cuBLASLt (" << g.error().message() << ")\n";
      continue;
    }
    ASSERT_TRUE(g->run(*gpu().device).ok()) << what;
    std::vector<double> want(size_t{c.m} * c.n);
    for (uint32_t i = 0; i < c.m; ++i) {
      for (uint32_t j = 0; j < c.n; ++j) {
        double v = 0;
        for (uint32_t p = 0; p < c.k; ++p) v += double{o.a[size_t{i} * c.k + p]} * o.w[size_t{j} * c.k + p];
        if (c.epilogue == LtEpilogue::kBias || c.epilogue == LtEpilogue::kReluBias) v += o.bias[j];
        if (c.epilogue == LtEpilogue::kRelu || c.epilogue == LtEpilogue::kReluBias) v = std::max(v, 0.0);
        if (c.accumulate) v += o.c[size_t{i} * c.n + j];
        want[size_t{i} * c.n + j] = v;
      }
    }
    // 1e-4 catches TF32 (10-bit operands) on FP32 GEMMs of k 1024; FP16 outputs carry their rounding.
    expect_rows(read_floats(o.od, want.size(), c.out), want, c.m, c.n, c.out == Dt::kF16 ? 1e-3 : 1e-4, what);
  }
}

TEST_F(GemmTest, RowBitsDoNotDependOnTheRowCount) {
  std::mt19937 rng(12);
  std::vector<std::pair<uint32_t, uint32_t>> shapes = {{1024, 3072}, {1024, 1024}, {1024, 5248}, {2624, 1024}};
  std::vector<uint32_t> ms = {1, 3, 16, 50, 128, 256, 300, 1024, 4096};
  if (emulated()) {
    shapes = {{96, 80}};
    ms = {1, 3, 16, 50, 300};
  }
  const uint32_t m_max = ms.back();
  for (const auto& [k, n] : shapes) {
    for (const auto& [ab, out, acc] : {std::tuple{Dt::kF32, Dt::kF32, false}, std::tuple{Dt::kF16, Dt::kF16, false},
                                       std::tuple{Dt::kF16, Dt::kF32, true}}) {
      const Case big{m_max, k, n, ab, out, acc, LtEpilogue::kNone};
      Operands o = make_operands(big, rng);
      std::vector<std::vector<float>> results;
      std::string ranks;
      const std::vector<uint16_t> c16 = to_halves(o.c);
      const void* c_init = out == Dt::kF32 ? static_cast<const void*>(o.c.data()) : static_cast<const void*>(c16.data());
      for (uint32_t m : ms) {
        // Reset the output (the accumulate case reads it), run m rows, keep them.
        copy_on_stream(o.od.data(), c_init, o.c.size() * dt_size(out), cudaMemcpyHostToDevice);
        Case c = big;
        c.m = m;
        auto g = make_gemm(c, o);
        ASSERT_TRUE(g.ok()) << g.error().message();
        ASSERT_TRUE(g->run(*gpu().device).ok());
        results.push_back(read_floats(o.od, size_t{m} * n, out));
        if (emulated()) {
          // The emulator ranks a different-bits candidate first for m != 256, then an identical one.
          EXPECT_EQ(g->faster(), m == 256 ? -1 : 1) << "m " << m;
        }
        ranks += fmt::format(" m {}: rank {}{}", m, g->rank(), g->faster() >= 0 ? fmt::format(" (faster #{})", g->faster()) : "");
      }
      std::cout << fmt::format("k {} n {} {}->{} {}:{}\n", k, n, dt_name(ab), dt_name(out), acc ? "add" : "set", ranks);
      const std::vector<float>& ref = results.back();
      for (size_t i = 0; i + 1 < ms.size(); ++i) {
        for (size_t e = 0; e < results[i].size(); ++e) {
          uint32_t x, y;
          std::memcpy(&x, &results[i][e], 4);
          std::memcpy(&y, &ref[e], 4);
          ASSERT_EQ(x, y) << fmt::format("k {} n {} {}->{}: row {} column {} differs between m {} and m {}", k, n,
                                         dt_name(ab), dt_name(out), e / n, e % n, ms[i], m_max);
        }
      }
    }
  }
}

// A decoder's K split (gemm_impl.h: decoder_gemm_splits): on the GPU the shape splits in two, its rows match
// float64 and keep their bits at every m a decode or verify bucket takes; the emulator refuses a split, and
// the shape then runs in one pass at every m.
TEST_F(GemmTest, DecoderSplitRowsMatchFloat64AndKeepTheirBits) {
  std::mt19937 rng(14);
  const uint32_t k = emulated() ? 96 : 4096, n = emulated() ? 80 : 2048;
  const std::vector<uint32_t> ms = emulated() ? std::vector<uint32_t>{1, 16, 40} : std::vector<uint32_t>{1, 16, 128, 512, 1024};
  ASSERT_EQ(decoder_gemm_splits(4096, 2048), 2u);
  ASSERT_EQ(decoder_gemm_splits(4096, 4096), 2u);
  ASSERT_EQ(decoder_gemm_splits(12288, 4096), 2u);
  ASSERT_EQ(decoder_gemm_splits(4096, 1024), 1u);   // k/v: latency-bound either way
  ASSERT_EQ(decoder_gemm_splits(4096, 24576), 1u);  // gate_up fills the GPU
  ASSERT_EQ(decoder_gemm_splits(2048, 4096), 1u);
  // Aimed at a CTA count (TANDEM_CUDA_SPLIT_CTAS): the nearest tiles × slices, slices of k >= 1,024.
  ASSERT_EQ(decoder_gemm_splits(4096, 4096, 128), 4u);
  ASSERT_EQ(decoder_gemm_splits(12288, 4096, 128), 4u);
  ASSERT_EQ(decoder_gemm_splits(4096, 6144, 128), 3u);
  ASSERT_EQ(decoder_gemm_splits(4096, 4096, 512), 4u);   // slices of 1,024 at most 4
  ASSERT_EQ(decoder_gemm_splits(4096, 24576, 128), 1u);  // 192 tiles
  ASSERT_EQ(decoder_gemm_splits(4096, 1024, 128), 1u);   // 8 tiles
  // Narrow outputs in a given count (TANDEM_CUDA_SPLIT_NARROW), slices of k >= 1,024; wider ones keep the rule.
  ASSERT_EQ(decoder_gemm_splits(4096, 1024, 0, 4), 4u);
  ASSERT_EQ(decoder_gemm_splits(4096, 256, 0, 8), 4u);
  ASSERT_EQ(decoder_gemm_splits(2048, 1024, 0, 4), 1u);
  ASSERT_EQ(decoder_gemm_splits(4096, 4096, 0, 4), 2u);
  ASSERT_EQ(decoder_gemm_splits(4096, 24576, 0, 4), 1u);
  for (const bool acc : {false, true}) {
    const Dt out = acc ? Dt::kF32 : Dt::kF16;
    const Case big{ms.back(), k, n, Dt::kF16, out, acc, LtEpilogue::kNone};
    Operands o = make_operands(big, rng);
    const std::vector<uint16_t> c16 = to_halves(o.c);
    const void* c_init = out == Dt::kF32 ? static_cast<const void*>(o.c.data()) : static_cast<const void*>(c16.data());
    GemmShape shape = shape_of(big);
    shape.splits = emulated() ? 2 : decoder_gemm_splits(k, n);
    std::vector<std::vector<float>> results;
    for (uint32_t m : ms) {
      copy_on_stream(o.od.data(), c_init, o.c.size() * dt_size(out), cudaMemcpyHostToDevice);
      auto g = Gemm::make(*gpu().device, *gpu().algos, shape, m, GemmOperands{o.wd.data(), o.ad.data(), o.od.data(), nullptr});
      ASSERT_TRUE(g.ok()) << g.error().message();
      EXPECT_EQ(g->shape().splits, emulated() ? 1u : 2u) << "m " << m;
      ASSERT_TRUE(g->run(*gpu().device).ok());
      results.push_back(read_floats(o.od, size_t{m} * n, out));
      std::cout << fmt::format("{} m {}: {}{}\n", g->shape().describe(), m, describe_algo(g->algo()),
                               g->faster() >= 0 ? " (faster)" : "");
    }
    const std::vector<float>& ref = results.back();
    for (size_t i = 0; i + 1 < ms.size(); ++i) {
      ASSERT_EQ(std::memcmp(results[i].data(), ref.data(), results[i].size() * 4), 0)
          << fmt::format("{}: rows differ between m {} and m {}", shape.describe(), ms[i], ms.back());
    }
    // The first 16 rows against float64 (all m share their bits).
    const uint32_t rows = std::min<uint32_t>(16, ms.back());
    std::vector<double> want(size_t{rows} * n);
    for (uint32_t i = 0; i < rows; ++i) {
      for (uint32_t j = 0; j < n; ++j) {
        double v = acc ? o.c[size_t{i} * n + j] : 0.0;
        for (uint32_t p = 0; p < k; ++p) v += double{o.a[size_t{i} * k + p]} * o.w[size_t{j} * k + p];
        want[size_t{i} * n + j] = v;
      }
    }
    const std::vector<float> got(ref.begin(), ref.begin() + static_cast<ptrdiff_t>(want.size()));
    expect_rows(got, want, rows, n, out == Dt::kF16 ? 1e-3 : 1e-4, shape.describe());
  }
}

// Timed choice (the backend's default): among the candidates that compute the reference's bits, a bucket
// runs the fastest; whatever it picks, its rows are the reference algorithm's bits, and every GEMM of the
// same shape and rows picks the same one.
TEST_F(GemmTest, TimedChoiceRunsABitIdenticalCandidate) {
  std::mt19937 rng(13);
  GemmAlgos timed(*gpu().device, true, kTimedMaxRows);
  const uint32_t k = emulated() ? 96 : 1024, n = emulated() ? 80 : 3072;
  for (uint32_t m : {50u, 160u}) {
    const Case c{m, k, n, Dt::kF16, Dt::kF32, true, LtEpilogue::kNone};
    Operands o = make_operands(c, rng);
    const GemmShape shape = shape_of(c);
    const GemmOperands ops{o.wd.data(), o.ad.data(), o.od.data(), nullptr};
    auto g = Gemm::make(*gpu().device, timed, shape, m, ops);
    ASSERT_TRUE(g.ok()) << g.error().message();
    auto again = Gemm::make(*gpu().device, timed, shape, m, ops);
    ASSERT_TRUE(again.ok()) << again.error().message();
    EXPECT_EQ(std::memcmp(&g->algo(), &again->algo(), sizeof(cublasLtMatmulAlgo_t)), 0) << "m " << m;
    auto ref = Gemm::with_algo(*gpu().device, shape, m, ops, g->reference());
    ASSERT_TRUE(ref.ok()) << ref.error().message();
    std::vector<std::vector<float>> out;
    for (const Gemm* x : {&*g, &*ref}) {
      copy_on_stream(o.od.data(), o.c.data(), o.c.size() * sizeof(float), cudaMemcpyHostToDevice);
      ASSERT_TRUE(x->run(*gpu().device).ok());
      out.push_back(read_floats(o.od, size_t{m} * n, Dt::kF32));
    }
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0)
        << "m " << m << ": the timed choice (" << describe_algo(g->algo()) << ", faster #" << g->faster()
        << ") differs from the reference (" << describe_algo(g->reference()) << ")";
    std::cout << fmt::format("timed choice at m {}: {} (faster #{}), reference {}\n", m, describe_algo(g->algo()),
                             g->faster(), describe_algo(g->reference()));
  }
}

// The GEMM choice cache: a second start on the same device reads the probes' and timing's outcomes from
// the file the first wrote, measures nothing, and runs the same algorithms.
TEST_F(GemmTest, ChoicesFromAnEarlierStartSkipTheProbesAndTiming) {
  std::mt19937 rng(17);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tandem_gemm_choices_" + std::to_string(std::random_device{}()));
  const uint32_t k = emulated() ? 96 : 1024, n = emulated() ? 80 : 3072;
  std::vector<Case> cases;
  for (uint32_t m : {50u, 160u, 512u}) cases.push_back({m, k, n, Dt::kF16, Dt::kF32, true, LtEpilogue::kNone});
  auto choose = [&](GemmAlgos& algos, std::vector<cublasLtMatmulAlgo_t>& picked) {
    for (const Case& c : cases) {
      Operands o = make_operands(c, rng);
      auto g = Gemm::make(*gpu().device, algos, shape_of(c), c.m, GemmOperands{o.wd.data(), o.ad.data(), o.od.data(), nullptr});
      ASSERT_TRUE(g.ok()) << g.error().message();
      picked.push_back(g->algo());
    }
  };
  const DeviceInfo& info = gpu().device->info();
  std::vector<cublasLtMatmulAlgo_t> first_picks, second_picks;
  {
    GemmAlgos first(*gpu().device, true, kTimedMaxRows, GemmChoices::open(dir.string(), info, cublasLtGetVersion()));
    EXPECT_EQ(first.choices().loaded(), 0u);
    choose(first, first_picks);
    EXPECT_GT(first.measurements(), 0u) << "the first start probes and times its candidates";
    first.save_choices();
  }
  ASSERT_TRUE(std::filesystem::exists(GemmChoices::open(dir.string(), info, cublasLtGetVersion()).path()));
  GemmAlgos second(*gpu().device, true, kTimedMaxRows, GemmChoices::open(dir.string(), info, cublasLtGetVersion()));
  EXPECT_GT(second.choices().loaded(), 0u);
  choose(second, second_picks);
  EXPECT_EQ(second.measurements(), 0u) << "every choice came from the file";
  ASSERT_EQ(first_picks.size(), second_picks.size());
  for (size_t i = 0; i < first_picks.size(); ++i) {
    EXPECT_EQ(std::memcmp(&first_picks[i], &second_picks[i], sizeof(cublasLtMatmulAlgo_t)), 0) << "m " << cases[i].m;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Under a profiler (GemmAlgos::set_profiled, which the backend sets when CUDA_INJECTION64_PATH is set)
// nothing is timed: a remembered choice still runs, and a bucket without one runs what an untimed backend
// runs (cuBLASLt's first bit-identical candidate), and no timing lands in the file.
TEST_F(GemmTest, UnderAProfilerNothingIsTimedOrRemembered) {
  std::mt19937 rng(19);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tandem_gemm_profiled_" + std::to_string(std::random_device{}()));
  const uint32_t k = emulated() ? 96 : 1024, n = emulated() ? 80 : 3072;
  std::vector<Case> cases;
  for (uint32_t m : {50u, 160u}) cases.push_back({m, k, n, Dt::kF16, Dt::kF32, true, LtEpilogue::kNone});
  auto choose = [&](GemmAlgos& algos) {
    std::vector<cublasLtMatmulAlgo_t> picked;
    for (const Case& c : cases) {
      Operands o = make_operands(c, rng);
      auto g = Gemm::make(*gpu().device, algos, shape_of(c), c.m, GemmOperands{o.wd.data(), o.ad.data(), o.od.data(), nullptr});
      EXPECT_TRUE(g.ok()) << g.error().message();
      if (g.ok()) picked.push_back(g->algo());
    }
    return picked;
  };
  auto same = [](const std::vector<cublasLtMatmulAlgo_t>& a, const std::vector<cublasLtMatmulAlgo_t>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(cublasLtMatmulAlgo_t)) == 0;
  };
  const DeviceInfo& info = gpu().device->info();
  GemmAlgos untimed(*gpu().device, true, 0);
  const auto untimed_picks = choose(untimed);
  {
    GemmAlgos profiled(*gpu().device, true, kTimedMaxRows, GemmChoices::open(dir.string(), info, cublasLtGetVersion()));
    profiled.set_profiled(true);
    EXPECT_TRUE(same(choose(profiled), untimed_picks)) << "without a remembered timing: the untimed choice";
    profiled.save_choices();
  }
  {
    GemmAlgos timed(*gpu().device, true, kTimedMaxRows, GemmChoices::open(dir.string(), info, cublasLtGetVersion()));
    const size_t probes_read = timed.choices().loaded();
    const auto timed_picks = choose(timed);
    EXPECT_GT(timed.measurements(), 0u) << "the profiled run left no timing in the file ("
                                         << probes_read << " probe outcomes read), so this start times";
    timed.save_choices();
    GemmAlgos profiled(*gpu().device, true, kTimedMaxRows, GemmChoices::open(dir.string(), info, cublasLtGetVersion()));
    profiled.set_profiled(true);
    EXPECT_TRUE(same(choose(profiled), timed_picks)) << "a remembered timing still decides under a profiler";
    EXPECT_EQ(profiled.measurements(), 0u);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tandem::cuda::test
