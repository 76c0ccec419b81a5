// Host-side pieces of the CUDA backend that need no GPU (label unit): a binary linked with the real
// backend starts and reports "no device" cleanly on a machine without one; the index buffer's layout
// and contents (tiles anchored at sequence starts, with their spans); the FP16 precision pass on the
// compat graph; the GEMM row tiers; the GEMM choice cache's file.
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>

#include <fstream>
#include <sstream>
#include <variant>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/gemm_choices_impl.h"
#include "engine/cuda/index_impl.h"
#include "engine/cuda/plan_impl.h"
#include "engine/cuda/types_impl.h"
#include "engine/models/decision/decision_model.h"
#include "kernels/args.cuh"
#include "tests/engine/models/decision/decision_test_util.h"

namespace tandem::cuda {
namespace {

TEST(CudaHost, NoDeviceIsAnUnavailableErrorNotACrash) {
  if (device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto b = make_cuda_backend(CudaOptions{});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUnavailable);
  EXPECT_NE(b.error().message().find("no CUDA device"), std::string::npos) << b.error().message();
}

// The environment's counts (cuda_backend.h) are read before the device opens: a malformed one is refused
// naming the variable and what it takes, on any machine.
TEST(CudaHost, MalformedCountsInTheEnvironmentAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"TANDEM_CUDA_QGEMM_WHOLE_K_ROWS", "a row count (0: never)"},
      {"TANDEM_CUDA_SPLIT_CTAS", "0..4096 CTAs"},
      {"TANDEM_CUDA_SPLIT_NARROW", "1..8 slices"},
      {"TANDEM_CUDA_GEMM_TIERS", "0, 1 or a token count"},
      {"TANDEM_CUDA_STREAM_GEMM_ROWS", "1..16 rows"},
      {"TANDEM_CUDA_OVERLAP", "0 or 1"}};
  for (const auto& [name, takes] : cases) {
    for (const char* bad : {"sixty-four", "64x", "-1", "99999999999"}) {
      ASSERT_EQ(::setenv(name, bad, 1), 0);
      auto b = make_cuda_backend(CudaOptions{});
      ::unsetenv(name);
      ASSERT_FALSE(b.ok()) << name << "=" << bad;
      EXPECT_EQ(b.error().kind(), ErrorKind::kInvalidArgument) << name << "=" << bad;
      EXPECT_EQ(b.error().message(), fmt::format("{} is '{}': {}", name, bad, takes));
    }
  }
}

// The switches that take words refuse any other, and counts whose least is 1 refuse 0 (a row limit of 0 would
// turn the switch off unseen).
TEST(CudaHost, MalformedSwitchesInTheEnvironmentAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"TANDEM_CUDA_STREAM_GEMM", "yes"},
      {"TANDEM_CUDA_STREAM_GEMM", "Untimed"},
      {"TANDEM_CUDA_STREAM_GEMM_ROWS", "0"},
      {"TANDEM_CUDA_SPLIT_NARROW", "0"},
      {"TANDEM_CUDA_OVERLAP", "2"}};
  const char* takes[] = {"0, 1 or untimed", "0, 1 or untimed", "1..16 rows", "1..8 slices", "0 or 1"};
  for (size_t i = 0; i < std::size(cases); ++i) {
    const auto& [name, bad] = cases[i];
    ASSERT_EQ(::setenv(name, bad, 1), 0);
    auto b = make_cuda_backend(CudaOptions{});
    ::unsetenv(name);
    ASSERT_FALSE(b.ok()) << name << "=" << bad;
    EXPECT_EQ(b.error().kind(), ErrorKind::kInvalidArgument) << name << "=" << bad;
    EXPECT_EQ(b.error().message(), fmt::format("{} is '{}': {}", name, bad, takes[i]));
  }
}

TEST(CudaHost, IndexBufferHoldsTheBatchTablesAndAnchoredTiles) {
  ir::Batch b;
  b.add_sequence(std::vector<uint32_t>(70, 5), {0, 65}, 2);  // two tiles: rows 0 and 64
  b.add_sequence({}, {}, 0);                                 // empty: no tile
  b.add_sequence({7, 8, 9}, {1}, 1);                         // one tile at row 70
  const ir::Bucket bucket{128, 4, 8};
  const IndexLayout l = IndexLayout::for_bucket(bucket);
  EXPECT_EQ(l.tiles_max, 2u + 4u);
  EXPECT_EQ(l.ids, kernels::kHeaderWords);
  EXPECT_EQ(l.spans % 4, 0u) << "spans are read as 16-byte vectors";
  EXPECT_GE(l.spans, l.tiles + l.tiles_max);
  EXPECT_EQ(l.start, l.spans + 4 * l.tiles_max);
  EXPECT_EQ(l.features, l.caches) << "a bucket without caches lists none";
  EXPECT_EQ(l.feat_rows, l.features + kernels::kFeatWords);
  EXPECT_EQ(l.proposals, l.feat_rows + 128) << "one feature row index per token";
  EXPECT_EQ(l.words, l.proposals + kernels::kProposalWords * 4) << "RejectSample's proposal words per sequence";
  std::vector<uint32_t> w(l.words, 0xffffffffu);
  fill_index(l, b, w.data());
  EXPECT_EQ(w[0], 73u);
  EXPECT_EQ(w[1], 3u);
  EXPECT_EQ(w[2], 3u);
  EXPECT_EQ(w[kernels::kHeaderTiles], 3u);
  EXPECT_EQ(w[l.tiles], 0u);
  EXPECT_EQ(w[l.tiles + 1], 64u);
  EXPECT_EQ(w[l.tiles + 2], 70u);
  // Each tile's span: first row, its sequence's start and end, the start's position.
  const std::vector<uint32_t> spans(w.begin() + static_cast<long>(l.spans), w.begin() + static_cast<long>(l.spans + 12));
  EXPECT_EQ(spans, (std::vector<uint32_t>{0, 0, 70, 0, 64, 0, 70, 0, 70, 70, 73, 0}));
  EXPECT_EQ(w[l.pos + 69], 69u);
  EXPECT_EQ(w[l.pos + 70], 0u);
  EXPECT_EQ(w[l.pos + 72], 2u);
  EXPECT_EQ(w[l.seq + 69], 0u);
  EXPECT_EQ(w[l.seq + 71], 2u);
  EXPECT_EQ(w[l.ids + 71], 8u);
  const std::vector<uint32_t> cu(w.begin() + static_cast<long>(l.cu), w.begin() + static_cast<long>(l.cu + 4));
  EXPECT_EQ(cu, (std::vector<uint32_t>{0, 70, 70, 73}));
  const std::vector<uint32_t> pcu(w.begin() + static_cast<long>(l.pcu), w.begin() + static_cast<long>(l.pcu + 4));
  EXPECT_EQ(pcu, (std::vector<uint32_t>{0, 2, 2, 3}));
  EXPECT_EQ(w[l.prow], 0u);
  EXPECT_EQ(w[l.prow + 1], 65u);
  EXPECT_EQ(w[l.prow + 2], 71u);
  EXPECT_EQ(w[l.qtype + 0], 2u);
  EXPECT_EQ(w[l.qtype + 2], 1u);
  EXPECT_EQ(w[l.ids + 73], 0xffffffffu) << "words past the batch are left alone";
  // Decoder tables: a scorer batch starts every sequence at 0 in the slot of its index, greedy.
  EXPECT_EQ(w[kernels::kHeaderCapacity], 0u);
  EXPECT_EQ(w[kernels::kHeaderQTiles], 6u) << "rows 0, 16, 32, 48, 64 of sequence 0 and row 70";
  EXPECT_EQ(w[l.qtiles + 4], 64u);
  EXPECT_EQ(w[l.qtiles + 5], 70u);
  EXPECT_EQ(w[l.slot + 2], 2u);
  EXPECT_EQ(w[l.start + 2], 0u);
  EXPECT_EQ(w[l.sampling + 4], 0u) << "temperature 0";
}

TEST(CudaHost, DecoderBatchesListStartsSlotsSamplingAndTheBoundCaches) {
  ir::Batch b;
  b.add_sequence({1, 2, 3}, {2}, 0);
  b.add_sequence(std::vector<uint32_t>(18, 4), {0, 17}, 0);
  b.start = {40, 7};
  b.slot = {5, 1};
  b.sampling = {ir::SamplingParams{0.5f, 0.9f, 0x123456789abcdefull}, ir::SamplingParams{}};
  const IndexLayout l = IndexLayout::for_bucket(ir::Bucket{32, 2, 4}, 3);
  EXPECT_EQ(l.caches % 2, 0u) << "cache addresses are 8-byte words";
  EXPECT_EQ(l.features, l.caches + 4 * 3);
  EXPECT_EQ(l.proposals, l.features + kernels::kFeatWords + 32);
  EXPECT_EQ(l.words, l.proposals + kernels::kProposalWords * 2);
  const kernels::CacheTable table[3] = {{0x1000, 0x2000}, {0x3000, 0x4000}, {0x5000, 0x6000}};
  std::vector<uint32_t> w(l.words, 0xffffffffu);
  fill_index(l, b, w.data(), BoundCaches{table, 96});
  EXPECT_EQ(w[kernels::kHeaderCapacity], 96u);
  EXPECT_EQ(w[kernels::kHeaderQTiles], 3u) << "row 0 of sequence 0; rows 3 and 19 of sequence 1";
  EXPECT_EQ(w[l.qtiles + 1], 3u);
  EXPECT_EQ(w[l.qtiles + 2], 19u);
  EXPECT_EQ(w[l.start], 40u);
  EXPECT_EQ(w[l.start + 1], 7u);
  EXPECT_EQ(w[l.slot], 5u);
  EXPECT_EQ(w[l.pos + 2], 42u);
  EXPECT_EQ(w[l.pos + 3], 7u);
  float t = 0.0f, p = 0.0f;
  std::memcpy(&t, &w[l.sampling], 4);
  std::memcpy(&p, &w[l.sampling + 1], 4);
  EXPECT_EQ(t, 0.5f);
  EXPECT_EQ(p, 0.9f);
  EXPECT_EQ(w[l.sampling + 2], 0x89abcdefu);
  EXPECT_EQ(w[l.sampling + 3], 0x01234567u);
  EXPECT_EQ(w[l.sampling + 4], 0u);
  kernels::CacheTable got[3];
  std::memcpy(got, &w[l.caches], sizeof(got));
  EXPECT_EQ(got[2].k, 0x5000u);
  EXPECT_EQ(got[1].v, 0x4000u);
  // RejectSample's proposals: none for sequence 0, v2 candidates and q for sequence 1 (17 rows of 16).
  ir::ProposalRows v2;
  v2.values = {reinterpret_cast<const void*>(0x123456789a0ull), 17, 16, 20, ir::Storage::kF32, nullptr};
  v2.ids = {reinterpret_cast<const void*>(0x2000ull), 17, 16, 24, ir::Storage::kU32, nullptr};
  b.proposals = {ir::ProposalRows{}, v2};
  fill_proposals(l, b, w.data());
  const uint32_t* none = &w[l.proposals];
  const uint32_t* some = &w[l.proposals + kernels::kProposalWords];
  EXPECT_EQ(none[7], kernels::kProposalNone);
  EXPECT_EQ(some[0], 0x456789a0u);
  EXPECT_EQ(some[1], 0x123u);
  EXPECT_EQ(some[2], 20u);
  EXPECT_EQ(some[3], 16u);
  EXPECT_EQ(some[4], 0x2000u);
  EXPECT_EQ(some[5], 0u);
  EXPECT_EQ(some[6], 24u);
  EXPECT_EQ(some[7], kernels::kProposalSparse);
  b.proposals[1].ids = {};  // v1: the drafter's logits rows, dense
  fill_proposals(l, b, w.data());
  EXPECT_EQ(some[4], 0u);
  EXPECT_EQ(some[7], kernels::kProposalDense);
}

TEST(CudaHost, GemmRowTiersCoverTheBucketInEighths) {
  EXPECT_EQ(gemm_tiers(8192, 1024), (std::vector<uint32_t>{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}));
  EXPECT_EQ(gemm_tiers(1024, 1024), (std::vector<uint32_t>{128, 256, 384, 512, 640, 768, 896, 1024}));
  EXPECT_EQ(gemm_tiers(2000, 1024), (std::vector<uint32_t>{256, 512, 768, 1024, 1280, 1536, 1792, 2000}));
  EXPECT_EQ(gemm_tiers(512, 1024), (std::vector<uint32_t>{512}));    // below the minimum: one tier
  EXPECT_EQ(gemm_tiers(16384, 0), (std::vector<uint32_t>{16384}));  // tiers off
  EXPECT_EQ(gemm_tiers(300, 64), (std::vector<uint32_t>{64, 128, 192, 256, 300}));
  EXPECT_EQ(gemm_tiers(64, 64), (std::vector<uint32_t>{64}));
}

TEST(CudaHost, Fp16PassKeepsTheResidualQkvAndOutputsInFp32) {
  namespace dt = models::decision::testing;
  const dt::TinyShape shape;
  auto model = models::decision::DecisionModel::from_parts(dt::to_source(dt::tiny_tensors(shape)),
                                                           dt::tiny_encoder(shape), dt::tiny_laya(shape));
  ASSERT_TRUE(model.ok()) << model.error().message();
  const ir::Graph& g = (*model)->graph();
  for (Dt t : value_types(g, ir::Precision::kF32)) EXPECT_EQ(t, Dt::kF32);
  const std::vector<Dt> ty = value_types(g, ir::Precision::kF16);
  // The residual stream: accumulate targets and the type embedding's target stay FP32 even when a
  // LayerNorm writes them (the embedding norm, the final norm).
  std::vector<bool> residual(g.vals.size(), false);
  for (const ir::Op& op : g.ops) {
    if (const auto* gm = std::get_if<ir::Gemm>(&op); gm != nullptr && gm->epilogue == ir::Epilogue::kAccumulate) {
      residual[gm->out.index] = true;
    }
    if (const auto* at = std::get_if<ir::AddType>(&op)) residual[at->h.index] = true;
  }
  size_t half = 0;
  for (const ir::Op& op : g.ops) {
    if (const auto* att = std::get_if<ir::Attention>(&op)) {
      EXPECT_EQ(ty[att->qkv.index], Dt::kF32) << g.info(att->qkv).name;
      EXPECT_EQ(ty[att->out.index], Dt::kF16) << g.info(att->out).name;
    }
    if (const auto* gm = std::get_if<ir::Gemm>(&op); gm != nullptr && gm->epilogue == ir::Epilogue::kAccumulate) {
      EXPECT_EQ(ty[gm->out.index], Dt::kF32) << g.info(gm->out).name;
    }
    if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
      EXPECT_EQ(ty[ln->out.index], residual[ln->out.index] ? Dt::kF32 : Dt::kF16) << g.info(ln->out).name;
      half += !residual[ln->out.index];
    }
    if (const auto* gg = std::get_if<ir::GeGlu>(&op)) {
      EXPECT_EQ(ty[gg->out.index], Dt::kF16) << g.info(gg->out).name;
      EXPECT_EQ(ty[gg->x.index], Dt::kF16) << g.info(gg->x).name;  // Wi output: an FP16 GEMM of an FP16 input
    }
    if (const auto* em = std::get_if<ir::Embed>(&op)) {
      EXPECT_EQ(ty[em->out.index], Dt::kF32);
    }
    if (const auto* af = std::get_if<ir::ActFeatures>(&op)) {
      EXPECT_EQ(ty[af->out.index], Dt::kF32);
      EXPECT_EQ(ty[af->h.index], Dt::kF32);
    }
  }
  EXPECT_GT(half, 0u);
  for (const ir::Output& o : g.outputs) EXPECT_EQ(ty[o.val.index], Dt::kF32) << o.name;
}

DeviceInfo test_device() {
  DeviceInfo d;
  d.name = "NVIDIA Test GPU";
  d.cc_major = 9;
  d.sms = 132;
  d.driver_version = 13000;
  return d;
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CudaHost, GemmChoicesSurviveTheirFileWithAnyKeyBytes) {
  models::decision::testing::TempDir dir("gemm_choices");
  const std::string odd_key("k 1024 n 3072\0\xff x\n", 19);  // NUL, high bytes, blanks, a newline
  {
    GemmChoices c = GemmChoices::open(dir.path().string(), test_device(), 130100);
    EXPECT_EQ(c.loaded(), 0u);
    EXPECT_EQ(c.path(), dir.path() / "gemm" / "NVIDIA-Test-GPU-sm90-132sms-lt130100-drv13000.txt");
    c.set_same_bits(odd_key, true);
    c.set_same_bits("other", false);
    c.set_fastest("k 1024 n 1024 f16->f16 set m 160", std::string("\x01\x00\x7a", 3));
    c.save();
  }
  GemmChoices again = GemmChoices::open(dir.path().string(), test_device(), 130100);
  EXPECT_EQ(again.loaded(), 3u);
  EXPECT_EQ(again.same_bits(odd_key), std::optional<bool>(true));
  EXPECT_EQ(again.same_bits("other"), std::optional<bool>(false));
  EXPECT_EQ(again.same_bits("never asked"), std::nullopt);
  EXPECT_EQ(again.fastest("k 1024 n 1024 f16->f16 set m 160"), std::optional<std::string>(std::string("\x01\x00\x7a", 3)));
  // Another cuBLASLt or driver is another file: nothing carries over.
  EXPECT_EQ(GemmChoices::open(dir.path().string(), test_device(), 130200).loaded(), 0u);
  // No cache folder: in memory only, and saving writes nothing.
  GemmChoices memory = GemmChoices::open("", test_device(), 130100);
  memory.set_same_bits("x", true);
  memory.save();
  EXPECT_TRUE(memory.path().empty());
  EXPECT_EQ(memory.same_bits("x"), std::optional<bool>(true));
}

TEST(CudaHost, DamagedGemmChoiceLinesAreSkippedAndTheFileRewrittenClean) {
  models::decision::testing::TempDir dir("gemm_choices_damaged");
  const std::filesystem::path path = GemmChoices::open(dir.path().string(), test_device(), 1).path();
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << "tandem gemm choices 1\n"
                      << "same 6b6579 1\n"                // good: "key" → same
                      << "same 6b6579 2\n"                // not 0 or 1
                      << "fastest 6b65 zz\n"              // not hex
                      << "same 6b6 1\n"                   // odd hex
                      << "fastest 6b6579 0102 extra\n"    // a field too many
                      << "garbage\n"
                      << "fastest 6d 0a0b\n";            // good: "m" → 0a 0b
  GemmChoices c = GemmChoices::open(dir.path().string(), test_device(), 1);
  EXPECT_EQ(c.loaded(), 2u);
  EXPECT_EQ(c.same_bits("key"), std::optional<bool>(true));
  EXPECT_EQ(c.fastest("m"), std::optional<std::string>("\x0a\x0b"));
  c.save();  // damaged lines make the next save rewrite the file without them
  EXPECT_EQ(file_text(path), "tandem gemm choices 1\nsame 6b6579 1\nfastest 6d 0a0b\n");

  std::ofstream(path) << "tandem gemm choices 2\nsame 6b6579 1\n";  // a later format: ignored whole
  EXPECT_EQ(GemmChoices::open(dir.path().string(), test_device(), 1).loaded(), 0u);
}

TEST(CudaHost, AnUnwritableGemmChoiceCacheIsAWarningNotAFailure) {
  models::decision::testing::TempDir dir("gemm_choices_blocked");
  std::ofstream(dir.path() / "gemm") << "a file where the folder should be";
  GemmChoices c = GemmChoices::open(dir.path().string(), test_device(), 1);
  c.set_same_bits("x", true);
  c.save();  // logs a warning; the choices stay in memory
  EXPECT_EQ(c.same_bits("x"), std::optional<bool>(true));
  EXPECT_EQ(file_text(dir.path() / "gemm"), "a file where the folder should be");
}

}  // namespace
}  // namespace tandem::cuda
