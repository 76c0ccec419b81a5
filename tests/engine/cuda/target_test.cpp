// The Qwen3 target as CUDA plans (issue 9): logits and taps against the CPU backend on random tiny
// targets (FP32 within 1e-4 of max(1, |cpu|); FP16 and BF16 within the bounds below) and against HF's
// float64 fixtures, CUDA greedy decoding equal to HF's, rows bit-identical alone and inside a batch,
// a cropped and re-appended cache equal to a fresh prefill, and the limits refused with their names.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/plan_impl.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/spec/spec.h"
#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/models/decision/decision_test_util.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::cuda::test {
namespace {

using models::qwen3::LogitRows;
using models::qwen3::Target;
using models::qwen3::TargetOptions;
using models::qwen3::TargetOut;
using models::qwen3::TargetRows;

// 16-bit plans: the residual stream and every reduction stay FP32, GEMM operands and activations are
// rounded to 16 bits (FP16: 11 significant bits, BF16: 8), so logits move by a few units of the
// activations' rounding through the layers of a tiny random model. BF16 rounds 8x coarser than FP16, so
// its bound is 8x FP16's with a little margin (0.073 measured on the emulator's reduction order).
double tolerance(ir::Precision p) {
  switch (p) {
    case ir::Precision::kF32: return 1e-4;
    case ir::Precision::kF16: return 1e-2;
    case ir::Precision::kBF16: return 1e-1;
  }
  return 0.0;
}

// The HF fixtures are chaotic on purpose (unit-variance embeddings, 1/sqrt(fan-in) weights, six layers
// of sharp attention) with logit rows ~30 wide, so a 16-bit logit is bounded relative to its row's largest
// one (worst measured on the emulator: FP16 0.0016, BF16 0.014; the bounds are ~3x those).
double fixture_tolerance(ir::Precision p) {
  switch (p) {
    case ir::Precision::kF32: return 1e-4;
    case ir::Precision::kF16: return 5e-3;
    case ir::Precision::kBF16: return 4e-2;
  }
  return 0.0;
}

std::unique_ptr<ir::Backend> cuda_backend(ir::Precision precision) {
  CudaOptions o;
  o.precision = precision;
  auto b = make_cuda_backend(o);
  EXPECT_TRUE(b.ok()) << b.error().message();
  return b.ok() ? std::move(b).value() : nullptr;
}

testing::TargetShape shape() {
  testing::TargetShape s;
  s.vocab = 96;
  s.hidden = 64;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 96;
  return s;
}

std::unique_ptr<Target> make_target(ir::Backend& backend, const testing::TinyTarget& t, uint32_t slots,
                                    uint32_t capacity) {
  auto target = Target::create(backend, *t.weights, t.cfg, TargetOptions{{0, 2}, slots, capacity, nullptr, true},
                               "tiny");
  EXPECT_TRUE(target.ok()) << target.error().message();
  return target.ok() ? std::move(target).value() : nullptr;
}

// Largest |got − want| / max(1, |want|), naming where.
void expect_close(const ir::Tensor2& got, const ir::Tensor2& want, double tol, const std::string& what) {
  ASSERT_EQ(got.rows, want.rows) << what;
  ASSERT_EQ(got.width, want.width) << what;
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double e = std::abs(double{got.data[i]} - want.data[i]) / std::max(1.0, std::abs(double{want.data[i]}));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": row " << at / want.width << ", column " << at % want.width << " got "
                        << got.data[at] << " want " << want.data[at];
}

// Largest |got − want| over the largest |want| of its row: logits of a chaotic model move with the
// size of the row, not of the entry (a near-zero logit is a sum of large cancelling terms).
void expect_close_to_row_scale(const ir::Tensor2& got, const ir::Tensor2& want, double tol, const std::string& what) {
  ASSERT_EQ(got.rows, want.rows) << what;
  ASSERT_EQ(got.width, want.width) << what;
  double worst = 0.0;
  size_t at = 0;
  for (uint32_t r = 0; r < want.rows; ++r) {
    double scale = 1e-30;
    for (uint32_t c = 0; c < want.width; ++c) scale = std::max(scale, std::abs(double{want.data[r * want.width + c]}));
    for (uint32_t c = 0; c < want.width; ++c) {
      const size_t i = size_t{r} * want.width + c;
      const double e = std::abs(double{got.data[i]} - want.data[i]) / scale;
      if (!(e <= worst)) {
        worst = e;
        at = i;
      }
    }
  }
  EXPECT_LE(worst, tol) << what << ": row " << at / want.width << ", column " << at % want.width << " got "
                        << got.data[at] << " want " << want.data[at];
}

std::vector<uint32_t> tokens(testing::Rand& r, uint32_t n, uint32_t vocab) {
  std::vector<uint32_t> out(n);
  for (uint32_t& t : out) t = r.below(vocab);
  return out;
}

class CudaTargetTest : public ::testing::TestWithParam<ir::Precision> {};

// Three sequences at their own slots: a prefill of different lengths, then a verify-like step of several
// rows each, against the CPU backend.
TEST_P(CudaTargetTest, LogitsAndTapsMatchTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 11);
  auto cpu = cpu::make_cpu_backend(2);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto a = make_target(*cpu, t, 4, 96), b = make_target(*gpu, t, 4, 96);
  ASSERT_TRUE(a && b);
  testing::Rand r(5);
  const std::vector<std::vector<uint32_t>> prompts = {tokens(r, 37, 96), tokens(r, 5, 96), tokens(r, 70, 96)};
  const std::vector<std::vector<uint32_t>> steps = {tokens(r, 16, 96), tokens(r, 1, 96), tokens(r, 7, 96)};
  const uint32_t slots[] = {3, 0, 1};
  for (const auto* round : {&prompts, &steps}) {
    std::vector<TargetRows> rows;
    for (size_t i = 0; i < round->size(); ++i) rows.push_back({slots[i], (*round)[i], LogitRows::kAll, {}});
    std::vector<TargetOut> want, got;
    ASSERT_TRUE(a->forward_fetching_taps(rows, want).ok());
    auto st = b->forward_fetching_taps(rows, got);
    ASSERT_TRUE(st.ok()) << st.error().message();
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string where = "sequence " + std::to_string(i) + (round == &prompts ? " prefill" : " step");
      expect_close(got[i].logits, want[i].logits, tolerance(GetParam()), where + " logits");
      expect_close(got[i].taps, want[i].taps, tolerance(GetParam()), where + " taps");
      if (GetParam() == ir::Precision::kF32) {
        EXPECT_EQ(got[i].ids.ids, want[i].ids.ids) << where << " greedy ids";
      }
    }
  }
}

// A row's results do not depend on the other sequences of its batch (the reduction orders depend on the
// row's own sequence only).
TEST_P(CudaTargetTest, RowsAreBitIdenticalAloneAndInABatch) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 12);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto target = make_target(*gpu, t, 4, 96);
  ASSERT_TRUE(target);
  testing::Rand r(6);
  const std::vector<uint32_t> p0 = tokens(r, 20, 96), p1 = tokens(r, 9, 96), p2 = tokens(r, 33, 96);
  std::vector<TargetOut> alone, together;
  const TargetRows one{2, p0, LogitRows::kAll, {}};
  ASSERT_TRUE(target->forward_fetching_taps({&one, 1}, alone).ok());
  ASSERT_TRUE(target->cache().crop(2, 0).ok());
  const std::vector<TargetRows> rows = {{0, p1, LogitRows::kAll, {}}, {2, p0, LogitRows::kAll, {}},
                                        {1, p2, LogitRows::kLast, {}}};
  ASSERT_TRUE(target->forward_fetching_taps(rows, together).ok());
  EXPECT_EQ(together[1].logits.data, alone[0].logits.data);
  EXPECT_EQ(together[1].taps.data, alone[0].taps.data);
  EXPECT_EQ(together[1].ids.ids, alone[0].ids.ids);
}

// A prompt prefilled beside a long one is cut where it would be cut alone (decode::SeqRunner), so its rows keep
// their bits: with 256-token buckets, 300 tokens alone run as 150 + 150; beside 800 tokens the old packing cut
// them to whatever room was left (37, 32, 24, 21 ... rows), whose attention split its keys otherwise.
TEST_P(CudaTargetTest, APromptIsCutAsAloneWhenOthersShareItsRuns) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 15);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto table = ir::BucketTable::parse("target 256 4 256\n", "test buckets");
  ASSERT_TRUE(table.ok()) << table.error().message();
  auto target = Target::create(*gpu, *t.weights, t.cfg, TargetOptions{{0, 2}, 4, 1024, &*table, true}, "tiny");
  ASSERT_TRUE(target.ok()) << target.error().message();
  testing::Rand r(9);
  const std::vector<uint32_t> a = tokens(r, 300, 96), b = tokens(r, 800, 96);
  std::vector<TargetOut> alone, together;
  const TargetRows one{1, a, LogitRows::kAll, {}};
  ASSERT_TRUE((*target)->forward_fetching_taps({&one, 1}, alone).ok());
  ASSERT_TRUE((*target)->cache().crop(1, 0).ok());
  const std::vector<TargetRows> rows = {{0, b, LogitRows::kLast, {}}, {1, a, LogitRows::kAll, {}}};
  ASSERT_TRUE((*target)->forward_fetching_taps(rows, together).ok());
  EXPECT_EQ(together[1].logits.data, alone[0].logits.data);
  EXPECT_EQ(together[1].taps.data, alone[0].taps.data);
  EXPECT_EQ(together[1].ids.ids, alone[0].ids.ids);
}

// A decode step's row (one row: the streaming GEMM where its probe passed) has the bits of the same row run
// inside a batch past 16 rows (cuBLASLt): gemm_impl.h's rule across both GEMM paths.
TEST_P(CudaTargetTest, ADecodeRowHasItsBitsInsideALargerBatch) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 14);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto target = make_target(*gpu, t, 4, 96);
  ASSERT_TRUE(target);
  testing::Rand r(8);
  const std::vector<uint32_t> prompt = tokens(r, 12, 96), next = tokens(r, 1, 96), other = tokens(r, 24, 96);
  std::vector<TargetOut> out, alone, together;
  const TargetRows prefill{2, prompt, LogitRows::kLast, {}};
  ASSERT_TRUE(target->forward_fetching_taps({&prefill, 1}, out).ok());
  const TargetRows step{2, next, LogitRows::kAll, {}};
  ASSERT_TRUE(target->forward_fetching_taps({&step, 1}, alone).ok());
  ASSERT_TRUE(target->cache().crop(2, 12).ok());
  const std::vector<TargetRows> rows = {{0, other, LogitRows::kLast, {}}, {2, next, LogitRows::kAll, {}}};
  ASSERT_TRUE(target->forward_fetching_taps(rows, together).ok());
  EXPECT_EQ(together[1].logits.data, alone[0].logits.data);
  EXPECT_EQ(together[1].taps.data, alone[0].taps.data);
  EXPECT_EQ(together[1].ids.ids, alone[0].ids.ids);
}

// A prefill of two sequences and a step after it on a fresh target of `backend` ([0]: prefill, [1]: step),
// for tests that compare two ways of lowering the same graph bit for bit.
using PrefillAndStep = std::array<std::vector<TargetOut>, 2>;
PrefillAndStep prefill_and_step(ir::Backend& backend, const testing::TinyTarget& t) {
  PrefillAndStep outs;
  auto target = make_target(backend, t, 4, 96);
  EXPECT_TRUE(target);
  if (!target) return outs;
  testing::Rand r(8);
  const std::vector<uint32_t> p0 = tokens(r, 29, 96), p1 = tokens(r, 6, 96), s0 = tokens(r, 5, 96),
                              s1 = tokens(r, 1, 96);
  const std::vector<TargetRows> prefill = {{1, p0, LogitRows::kAll, {}}, {3, p1, LogitRows::kAll, {}}};
  const std::vector<TargetRows> step = {{1, s0, LogitRows::kAll, {}}, {3, s1, LogitRows::kAll, {}}};
  for (int k = 0; k < 2; ++k) {
    auto st = target->forward_fetching_taps(k == 0 ? prefill : step, outs[k]);
    EXPECT_TRUE(st.ok()) << st.error().message();
  }
  return outs;
}

void expect_same_bits(const PrefillAndStep& got, const PrefillAndStep& want, const std::string& what) {
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(got[k].size(), want[k].size()) << what;
    for (size_t i = 0; i < want[k].size(); ++i) {
      const std::string where = what + ": " + (k == 0 ? "prefill" : "step") + " of sequence " + std::to_string(i);
      EXPECT_EQ(got[k][i].logits.data, want[k][i].logits.data) << where << " logits";
      EXPECT_EQ(got[k][i].taps.data, want[k][i].taps.data) << where << " taps";
    }
  }
}

// A backend with options `o` and the steps of its plan for the tiny target's graph at 8 tokens of 2 sequences
// (tests that count launches); the backend is then free for prefill_and_step. No backend on a failure.
struct LoweredTarget {
  std::unique_ptr<ir::Backend> backend;
  std::vector<Step> steps;
};
LoweredTarget lower_target(const CudaOptions& o, const testing::TinyTarget& t) {
  LoweredTarget out;
  auto graph = models::qwen3::build_target_graph(t.cfg, {});
  EXPECT_TRUE(graph.ok()) << graph.error().message();
  auto gpu = make_cuda_backend(o);
  EXPECT_TRUE(gpu.ok()) << gpu.error().message();
  if (!graph.ok() || !gpu.ok()) return out;
  const ir::Graph* graphs[] = {&graph.value()};
  auto weights = (*gpu)->upload(*t.weights, graphs);
  EXPECT_TRUE(weights.ok()) << weights.error().message();
  if (!weights.ok()) return out;
  auto plan = (*gpu)->lower(**weights, *graph, ir::Bucket{8, 2, 8});
  EXPECT_TRUE(plan.ok()) << plan.error().message();
  const auto* cp = plan.ok() ? dynamic_cast<const CudaPlan*>(plan->get()) : nullptr;
  EXPECT_NE(cp, nullptr);
  if (cp == nullptr) return out;
  out.steps = cp->steps();
  out.backend = std::move(gpu).value();
  return out;
}

// The one-launch q/k norm, rotation and cache append (CudaOptions::fuse_qkv_prep, kernels/qkv_prep.cu)
// changes launches, not results: a prefill and a step after it give the same bits with it and without.
TEST_P(CudaTargetTest, FusedQkvPrepGivesTheBitsOfTheSeparateLaunches) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 13);
  PrefillAndStep outs[2];  // [fused]
  const size_t layers = t.cfg.num_hidden_layers;
  for (int fused = 0; fused < 2; ++fused) {
    CudaOptions o;
    o.precision = GetParam();
    o.fuse_qkv_prep = fused == 1;
    LoweredTarget lowered = lower_target(o, t);
    ASSERT_NE(lowered.backend, nullptr);
    // The launches: one qkv_prep a layer instead of two head_norm_ropes and a cache_append.
    size_t prep = 0, norm_rope = 0, append = 0;
    for (const Step& step : lowered.steps) {
      const auto* k = std::get_if<KernelStep>(&step);
      if (k == nullptr) continue;
      const std::string entry = kernel_info(k->id).entry;
      prep += entry.starts_with("qkv_prep_") ? 1 : 0;
      norm_rope += entry.starts_with("head_norm_rope_") ? 1 : 0;
      append += entry.starts_with("cache_append_") ? 1 : 0;
    }
    EXPECT_EQ(prep, fused == 1 ? layers : 0) << "qkv_prep launches, fused " << fused;
    EXPECT_EQ(norm_rope, fused == 1 ? 0 : 2 * layers) << "head_norm_rope launches, fused " << fused;
    EXPECT_EQ(append, fused == 1 ? 0 : layers) << "cache_append launches, fused " << fused;
    outs[fused] = prefill_and_step(*lowered.backend, t);
  }
  expect_same_bits(outs[1], outs[0], "fused against apart");
}

// Programmatic dependent launch on every kernel of a plan (CudaOptions::overlap_launches) changes when each
// kernel starts, not what it computes: on sm_90 every kernel step but the first asks for it, and a prefill and a
// step after it give the same bits with it and without. On a GPU this is where a kernel that touched memory
// before its wait (kernels/prelude.cuh enter_grid) would show as a race.
TEST_P(CudaTargetTest, OverlappedLaunchesGiveTheBitsOfPlainOnes) {
  TANDEM_REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  // The options decide here, not a TANDEM_CUDA_OVERLAP that a run of the whole suite under it sets.
  const char* env = std::getenv("TANDEM_CUDA_OVERLAP");
  const std::string saved = env == nullptr ? "" : env;
  ::unsetenv("TANDEM_CUDA_OVERLAP");
  struct Restore {
    const std::string& value;
    ~Restore() {
      if (!value.empty()) ::setenv("TANDEM_CUDA_OVERLAP", value.c_str(), 1);
    }
  } restore{saved};
  const testing::TinyTarget t = testing::random_target(shape(), 17);
  PrefillAndStep outs[2];  // [overlap]
  for (int overlap = 0; overlap < 2; ++overlap) {
    CudaOptions o;
    o.precision = GetParam();
    o.overlap_launches = overlap == 1;
    LoweredTarget lowered = lower_target(o, t);
    ASSERT_NE(lowered.backend, nullptr);
    size_t kernels = 0, overlapped = 0;
    for (size_t i = 0; i < lowered.steps.size(); ++i) {
      const auto* k = std::get_if<KernelStep>(&lowered.steps[i]);
      if (k == nullptr) continue;
      ++kernels;
      overlapped += k->overlap_prior ? 1 : 0;
      EXPECT_EQ(k->overlap_prior, overlap == 1 && i > 0 && prop.major >= 9) << k->label;
    }
    EXPECT_GT(kernels, 10u);
    ASSERT_TRUE(std::holds_alternative<KernelStep>(lowered.steps.front())) << "the plan starts with the embedding";
    EXPECT_EQ(overlapped, overlap == 1 && prop.major >= 9 ? kernels - 1 : 0);
    outs[overlap] = prefill_and_step(*lowered.backend, t);
  }
  expect_same_bits(outs[1], outs[0], "overlapped against plain launches");
}

// A first start on a device model probes and times every new GEMM shape while it lowers (minutes for an 8B
// model): lowering says so, with the time and the file that keeps the choices, and a later start that reads
// them back measures nothing and says nothing.
TEST(CudaTargetCache, LoweringOnAColdChoiceCacheSaysWhatItMeasured) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 19);
  const models::decision::testing::TempDir temp("cold_choices");
  const std::filesystem::path& dir = temp.path();
  // The compiled kernels are not what this is about: copied from the usual cache (NVRTC would take a minute
  // on the emulator), so only the GEMM choices start cold.
  std::error_code copied;
  std::filesystem::copy(std::filesystem::path(default_cache_dir()) / "kernels", dir / "kernels",
                        std::filesystem::copy_options::recursive, copied);
  std::ostringstream logs;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logs);
  spdlog::default_logger()->sinks().push_back(sink);
  struct Unhook {  // before `logs` goes
    std::shared_ptr<spdlog::sinks::sink> s;
    ~Unhook() { std::erase(spdlog::default_logger()->sinks(), s); }
  } unhook{sink};
  CudaOptions o;
  o.precision = ir::Precision::kBF16;
  o.cache_dir = dir.string();
  for (int start = 0; start < 2; ++start) {
    logs.str("");
    ASSERT_NE(lower_target(o, t).backend, nullptr) << "start " << start;
    const std::string said = logs.str();
    const bool measured = said.find("GEMM probes and timings ran on the device") != std::string::npos;
    EXPECT_EQ(measured, start == 0) << "start " << start << ":\n" << said;
    if (start == 0) {
      EXPECT_NE(said.find("lowering "), std::string::npos) << said;
      EXPECT_NE(said.find("remembered in " + (dir / "gemm").string()), std::string::npos) << said;
    }
  }
}

// Appending after a crop (rejected drafts dropped) gives the rows a fresh prefill of the same tokens gives.
TEST_P(CudaTargetTest, CropAndAppendEqualAFreshPrefill) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 13);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto target = make_target(*gpu, t, 2, 96);
  ASSERT_TRUE(target);
  testing::Rand r(7);
  const std::vector<uint32_t> prompt = tokens(r, 24, 96), wrong = tokens(r, 6, 96), right = tokens(r, 4, 96);
  std::vector<TargetOut> out;
  const TargetRows p{0, prompt, LogitRows::kNone, {}};
  ASSERT_TRUE(target->forward({&p, 1}, out).ok());
  const TargetRows w{0, wrong, LogitRows::kAll, {}};
  ASSERT_TRUE(target->forward({&w, 1}, out).ok());
  ASSERT_TRUE(target->cache().crop(0, 24).ok());
  const TargetRows g{0, right, LogitRows::kAll, {}};
  std::vector<TargetOut> appended;
  ASSERT_TRUE(target->forward_fetching_taps({&g, 1}, appended).ok());

  std::vector<uint32_t> whole = prompt;
  whole.insert(whole.end(), right.begin(), right.end());
  const TargetRows f{1, whole, LogitRows::kAll, {}};
  std::vector<TargetOut> fresh;
  ASSERT_TRUE(target->forward_fetching_taps({&f, 1}, fresh).ok());
  const uint32_t v = t.cfg.vocab_size, tw = target->tap_width();
  EXPECT_EQ(appended[0].logits.data, std::vector<float>(fresh[0].logits.data.end() - 4 * v, fresh[0].logits.data.end()));
  EXPECT_EQ(appended[0].taps.data, std::vector<float>(fresh[0].taps.data.end() - 4 * tw, fresh[0].taps.data.end()));
}

TEST_P(CudaTargetTest, LimitsAreRefusedWithTheirNamesAndTheTargetKeepsRunning) {
  TANDEM_REQUIRE_GPU();
  const testing::TinyTarget t = testing::random_target(shape(), 14);
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto target = make_target(*gpu, t, 1, 32);
  ASSERT_TRUE(target);
  testing::Rand r(8);
  const std::vector<uint32_t> long_prompt = tokens(r, 40, 96);
  std::vector<TargetOut> out;
  const TargetRows too_long{0, long_prompt, LogitRows::kLast, {}};
  const Status st = target->forward({&too_long, 1}, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("pass its capacity of 32"), std::string::npos) << st.error().message();
  const TargetRows no_slot{3, long_prompt, LogitRows::kLast, {}};
  const Status slot = target->forward({&no_slot, 1}, out);
  ASSERT_FALSE(slot.ok());
  EXPECT_NE(slot.error().message().find("cache slot 3 does not exist"), std::string::npos) << slot.error().message();
  // Still serving.
  const std::vector<uint32_t> ok = tokens(r, 8, 96);
  const TargetRows fine{0, ok, LogitRows::kLast, {}};
  const Status again = target->forward({&fine, 1}, out);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(out[0].ids.rows, 1u);
}

// A checkpoint whose tensors do not match its config is refused before anything reaches the device,
// naming the tensor, its shape and the one the config asks for.
TEST_P(CudaTargetTest, ACheckpointThatDoesNotMatchItsConfigIsRefused) {
  TANDEM_REQUIRE_GPU();
  testing::TinyTarget t = testing::random_target(shape(), 15);
  testing::put(t.tensors, *t.weights,
               io::HostTensor::from_f32("model.layers.1.self_attn.k_proj.weight", {48, 64}, std::vector<float>(48 * 64)));
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  auto target = Target::create(*gpu, *t.weights, t.cfg, TargetOptions{{}, 1, 32, nullptr, false}, "tiny");
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.error().message().find("model.layers.1.self_attn.k_proj.weight"), std::string::npos)
      << target.error().message();
  EXPECT_NE(target.error().message().find("[48, 64]"), std::string::npos) << target.error().message();
}

// HF transformers in float64 on the fixtures of tools/make_qwen3_fixture.py: FP32 plans within 1e-4 and
// greedy decoding token for token; BF16 plans within the BF16 bound (their greedy path may part from
// HF's where two logits are within BF16 rounding, so only FP32 must match it).
const nlohmann::json& fixtures() {
  static const nlohmann::json ref = [] {
    std::ifstream f(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/qwen3/reference.json");
    return f ? nlohmann::json::parse(f, nullptr, false) : nlohmann::json();
  }();
  return ref;
}

TEST_P(CudaTargetTest, MatchesHfFixtures) {
  TANDEM_REQUIRE_GPU();
  const nlohmann::json& ref = fixtures();
  ASSERT_TRUE(ref.is_object() && ref.contains("models")) << "tests/fixtures/qwen3/reference.json is missing";
  auto gpu = cuda_backend(GetParam());
  ASSERT_TRUE(gpu);
  for (const nlohmann::json& m : ref["models"]) {
    const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/" + m["dir"].get<std::string>();
    SCOPED_TRACE(dir);
    const std::vector<uint32_t> taps = m["tap_layers"].get<std::vector<uint32_t>>();
    auto target = Target::open(*gpu, dir, TargetOptions{taps, 1, 256, nullptr, true});
    ASSERT_TRUE(target.ok()) << target.error().message();
    Target& tg = **target;
    const uint32_t h = tg.config().hidden_size;
    for (const nlohmann::json& c : m["cases"]) {
      const std::vector<uint32_t> prompt = c["prompt"].get<std::vector<uint32_t>>();
      ASSERT_TRUE(tg.cache().crop(0, 0).ok());
      std::vector<TargetOut> out;
      const TargetRows rows{0, prompt, LogitRows::kAll, {}};
      const Status ran = tg.forward_fetching_taps({&rows, 1}, out);
      ASSERT_TRUE(ran.ok()) << ran.error().message();
      ir::Tensor2 want = ir::Tensor2::of(static_cast<uint32_t>(prompt.size()), out[0].logits.width, {});
      for (const auto& row : c["logits"]) {
        for (const auto& v : row) want.data.push_back(v.get<float>());
      }
      if (GetParam() == ir::Precision::kF32) {
        expect_close(out[0].logits, want, tolerance(GetParam()), "logits");
      } else {
        expect_close_to_row_scale(out[0].logits, want, fixture_tolerance(GetParam()), "logits");
      }
      ir::Tensor2 want_taps = ir::Tensor2::of(want.rows, static_cast<uint32_t>(taps.size()) * h, {});
      for (uint32_t p = 0; p < want.rows; ++p) {
        for (uint32_t l : taps) {
          for (const auto& v : c["hidden"][std::to_string(l)][p]) want_taps.data.push_back(v.get<float>());
        }
      }
      expect_close(out[0].taps, want_taps, tolerance(GetParam()), "taps");
      if (GetParam() != ir::Precision::kF32) continue;
      const std::vector<uint32_t> greedy = c["greedy"].get<std::vector<uint32_t>>();
      spec::RequestParams params{prompt, c["max_new_tokens"].get<uint32_t>(), {}, {}};
      auto req = spec::make_request(params, 0, tg.vocab());
      ASSERT_TRUE(req.ok()) << req.error().message();
      ASSERT_TRUE(spec::generate(tg, nullptr, {&*req, 1}, {}).ok());
      EXPECT_EQ(std::vector<uint32_t>(req->generated().begin(), req->generated().end()), greedy) << "greedy";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaTargetTest,
                         ::testing::Values(ir::Precision::kF32, ir::Precision::kF16, ir::Precision::kBF16),
                         [](const auto& p) { return std::string(ir::to_string(p.param)); });

}  // namespace
}  // namespace tandem::cuda::test
