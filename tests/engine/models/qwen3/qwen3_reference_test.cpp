// The Qwen3 target on the CPU backend against an independent double-precision forward (reference.cpp):
// logits and tap rows for untied/tied, F32/BF16, GQA/MHA, biased and sliding-window targets; batched,
// chunked and cropped runs equal to plain ones.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/ir/bucket.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "tests/engine/models/qwen3/reference_impl.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::models::qwen3 {
namespace {

using testing::Rand;

constexpr double kTol = 1e-4;

// |got − want| <= tol · max(1, |want|) for every entry; names the first that differs.
void expect_near_rows(const ir::Tensor2& got, const testing::Rows& want, const std::string& what) {
  ASSERT_EQ(got.rows, want.size()) << what;
  for (uint32_t r = 0; r < got.rows; ++r) {
    ASSERT_EQ(got.width, want[r].size()) << what;
    for (uint32_t c = 0; c < got.width; ++c) {
      const double w = want[r][c];
      ASSERT_LE(std::abs(got.at(r, c) - w), kTol * std::max(1.0, std::abs(w)))
          << what << " row " << r << " col " << c << ": " << got.at(r, c) << " vs " << w;
    }
  }
}

std::vector<uint32_t> random_ids(Rand& r, uint32_t n, uint32_t vocab) {
  std::vector<uint32_t> ids(n);
  for (uint32_t& id : ids) id = r.below(vocab);
  return ids;
}

struct Case {
  const char* name;
  testing::TargetShape shape;
  DType dtype;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class TargetReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(TargetReferenceTest, LogitsAndTapsMatchTheReference) {
  const Case& c = GetParam();
  const testing::TinyTarget t = testing::random_target(c.shape, 11, c.dtype);
  auto backend = cpu::make_cpu_backend(2);
  TargetOptions opt{{1, 3}, 4, 64, nullptr, true};
  auto target = Target::create(*backend, *t.weights, t.cfg, opt, c.name);
  ASSERT_TRUE(target.ok()) << target.error().message();
  Rand r(5);
  const std::vector<uint32_t> ids = random_ids(r, 13, c.shape.vocab);
  const testing::TargetRef ref = testing::reference_target(*t.weights, t.cfg, ids);
  std::vector<TargetOut> out;
  const TargetRows rows{0, ids, LogitRows::kAll, {}};
  ASSERT_TRUE((*target)->forward_fetching_taps({&rows, 1}, out).ok());
  expect_near_rows(out[0].logits, ref.logits, "logits");
  // Tap rows: layer 1 then layer 3, side by side.
  testing::Rows taps;
  for (size_t p = 0; p < ids.size(); ++p) {
    std::vector<double> row = ref.hidden.at(1)[p];
    row.insert(row.end(), ref.hidden.at(3)[p].begin(), ref.hidden.at(3)[p].end());
    taps.push_back(row);
  }
  expect_near_rows(out[0].taps, taps, "taps");
  EXPECT_EQ((*target)->cache().length(0), ids.size());
}

testing::TargetShape with(auto edit) {
  testing::TargetShape s;
  edit(s);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TargetReferenceTest,
    ::testing::Values(Case{"untied_f32_gqa", {}, DType::kF32},
                      Case{"tied_bf16", with([](auto& s) { s.tied = true; }), DType::kBF16},
                      Case{"f16_mha_bias", with([](auto& s) { s.kv_heads = 4; s.bias = true; }), DType::kF16},
                      Case{"sliding_window_3", with([](auto& s) { s.window = 3; }), DType::kF32},
                      Case{"head_dim_not_hidden_over_heads",
                           with([](auto& s) { s.head_dim = 16; s.rope_theta = 1e6f; }), DType::kF32}),
    [](const auto& p) { return std::string(p.param.name); });

class TargetRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    t_ = testing::random_target({}, 21);
    backend_ = cpu::make_cpu_backend(2);
  }
  std::unique_ptr<Target> make(const ir::BucketTable* table = nullptr) {
    auto target = Target::create(*backend_, *t_.weights, t_.cfg, TargetOptions{{0, 2}, 4, 64, table, true}, "tiny");
    EXPECT_TRUE(target.ok()) << target.error().message();
    return std::move(target).value();
  }
  TargetOut run_alone(const std::vector<uint32_t>& ids) {
    auto target = make();
    std::vector<TargetOut> out;
    const TargetRows rows{0, ids, LogitRows::kAll, {}};
    EXPECT_TRUE(target->forward_fetching_taps({&rows, 1}, out).ok());
    return out[0];
  }
  testing::TinyTarget t_;
  std::unique_ptr<ir::Backend> backend_;
};

TEST_F(TargetRunsTest, BatchedSequencesEqualEachAloneBitForBit) {
  Rand r(3);
  const std::vector<std::vector<uint32_t>> prompts = {random_ids(r, 7, 48), random_ids(r, 1, 48),
                                                      random_ids(r, 12, 48)};
  auto target = make();
  std::vector<TargetRows> rows;
  const uint32_t slots[] = {2, 0, 3};
  for (size_t i = 0; i < prompts.size(); ++i) rows.push_back({slots[i], prompts[i], LogitRows::kAll, {}});
  std::vector<TargetOut> out;
  ASSERT_TRUE(target->forward_fetching_taps(rows, out).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const TargetOut alone = run_alone(prompts[i]);
    EXPECT_EQ(out[i].logits.data, alone.logits.data) << "sequence " << i;
    EXPECT_EQ(out[i].taps.data, alone.taps.data) << "sequence " << i;
    EXPECT_EQ(target->cache().length(slots[i]), prompts[i].size());
  }
}

// A server's warm-up lowers every plan that rounds of up to `seqs` requests with 1 or `block` new rows
// can pick, and no such round lowers another; a prompt longer than that still lowers its own later.
TEST_F(TargetRunsTest, PrepareRoundsLowersEveryPlanARoundUses) {
  auto table = ir::BucketTable::parse(
      "target 2 1 2\ntarget 4 1 4\ntarget 4 2 4\ntarget 8 2 8\ntarget 8 4 8\ntarget 16 4 16\ntarget 32 4 32\n",
      "small");
  ASSERT_TRUE(table.ok());
  auto target = make(&*table);
  EXPECT_EQ(target->plans(), 0u);
  auto lowered = target->prepare_rounds(3, 4);  // 3 requests, blocks of 4: at most 12 rows, 3 sequences
  ASSERT_TRUE(lowered.ok()) << lowered.error().message();
  EXPECT_EQ(*lowered, 6u);  // all but 32/4: no round of 3 requests of up to 4 rows needs it
  EXPECT_EQ(target->plans(), 6u);
  EXPECT_EQ(*target->prepare_rounds(3, 4), 0u);  // already there
  Rand r(5);
  std::vector<TargetOut> out;
  for (uint32_t seqs = 1; seqs <= 3; ++seqs) {
    for (const uint32_t rows : {1u, 4u}) {
      std::vector<std::vector<uint32_t>> ids;
      std::vector<TargetRows> batch;
      for (uint32_t s = 0; s < seqs; ++s) ids.push_back(random_ids(r, rows, 48));
      for (uint32_t s = 0; s < seqs; ++s) batch.push_back({s, ids[s], LogitRows::kAll, {}});
      ASSERT_TRUE(target->forward(batch, out).ok());
      for (uint32_t s = 0; s < seqs; ++s) ASSERT_TRUE(target->cache().crop(s, 0).ok());
    }
  }
  EXPECT_EQ(target->plans(), 6u) << "a round lowered a plan the warm-up missed";
  const std::vector<uint32_t> prompt = random_ids(r, 20, 48);
  const TargetRows long_prompt{0, prompt, LogitRows::kLast, {}};
  ASSERT_TRUE(target->forward({&long_prompt, 1}, out).ok());
  EXPECT_EQ(target->plans(), 7u);
}

// A stop during the warm-up is noticed between plans: it ends at the next one (kCancelled, saying how
// far it got), and a later warm-up lowers only what is left.
TEST_F(TargetRunsTest, PrepareRoundsStopsBetweenPlans) {
  auto table = ir::BucketTable::parse(
      "target 2 1 2\ntarget 4 1 4\ntarget 4 2 4\ntarget 8 2 8\ntarget 8 4 8\ntarget 16 4 16\ntarget 32 4 32\n",
      "small");
  ASSERT_TRUE(table.ok());
  auto target = make(&*table);
  int asked = 0;
  auto stopped = target->prepare_rounds(3, 4, [&] { return ++asked > 2; });  // told to stop after two plans
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().kind(), ErrorKind::kCancelled);
  EXPECT_EQ(stopped.error().message(), "stopped while warming up stage 'target' (2 of its 6 buckets ready)");
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(target->plans(), 2u);
  auto rest = target->prepare_rounds(3, 4, [] { return false; });
  ASSERT_TRUE(rest.ok()) << rest.error().message();
  EXPECT_EQ(*rest, 4u);
}

TEST_F(TargetRunsTest, ChunkedPrefillEqualsOneRun) {
  auto table = ir::BucketTable::parse("target 4 1 4\ntarget 8 2 8\n", "small");
  ASSERT_TRUE(table.ok());
  Rand r(4);
  const std::vector<uint32_t> a = random_ids(r, 19, 48), b = random_ids(r, 6, 48);
  auto target = make(&*table);
  const TargetRows rows[] = {{0, a, LogitRows::kAll, {}}, {1, b, LogitRows::kLast, {}}};
  std::vector<TargetOut> out;
  ASSERT_TRUE(target->forward_fetching_taps(rows, out).ok());
  const TargetOut alone_a = run_alone(a), alone_b = run_alone(b);
  EXPECT_EQ(out[0].logits.data, alone_a.logits.data);
  EXPECT_EQ(out[0].taps.data, alone_a.taps.data);
  ASSERT_EQ(out[1].logits.rows, 1u);
  EXPECT_EQ(out[1].logits.data, std::vector<float>(alone_b.logits.data.end() - 48, alone_b.logits.data.end()));
}

TEST_F(TargetRunsTest, CropThenRerunEqualsAFreshRun) {
  Rand r(6);
  std::vector<uint32_t> ids = random_ids(r, 10, 48);
  auto target = make();
  std::vector<TargetOut> out;
  TargetRows rows{1, ids, LogitRows::kAll, {}};
  ASSERT_TRUE(target->forward_fetching_taps({&rows, 1}, out).ok());
  ASSERT_TRUE(target->cache().crop(1, 6).ok());
  EXPECT_EQ(target->cache().length(1), 6u);
  // Rows 6.. replaced by other tokens, as after a rejected draft.
  std::vector<uint32_t> tail = random_ids(r, 4, 48);
  rows = {1, tail, LogitRows::kAll, {}};
  ASSERT_TRUE(target->forward_fetching_taps({&rows, 1}, out).ok());
  std::copy(tail.begin(), tail.end(), ids.begin() + 6);
  const TargetOut fresh = run_alone(ids);
  EXPECT_EQ(out[0].logits.data, std::vector<float>(fresh.logits.data.begin() + 6 * 48, fresh.logits.data.end()));
}

TEST_F(TargetRunsTest, RejectsRunsPastCapacityAndBadCrops) {
  auto target = make();
  std::vector<uint32_t> ids(60, 3);
  TargetRows rows{0, ids, LogitRows::kLast, {}};
  std::vector<TargetOut> out;
  ASSERT_TRUE(target->forward_fetching_taps({&rows, 1}, out).ok());
  std::vector<uint32_t> more(5, 3);
  rows = {0, more, LogitRows::kLast, {}};
  const Status st = target->forward_fetching_taps({&rows, 1}, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kCapacity);
  EXPECT_NE(st.error().message().find("holds 60 positions; 5 more pass its capacity of 64"), std::string::npos)
      << st.error().message();
  const Status crop = target->cache().crop(0, 61);
  ASSERT_FALSE(crop.ok());
  EXPECT_NE(crop.error().message().find("cannot crop cache slot 0 to 61 positions: it holds 60"), std::string::npos);
  rows = {7, more, LogitRows::kLast, {}};
  const Status slot = target->forward_fetching_taps({&rows, 1}, out);
  ASSERT_FALSE(slot.ok());
  EXPECT_NE(slot.error().message().find("cache slot 7 does not exist (4 slots)"), std::string::npos);
}

TEST_F(TargetRunsTest, RejectsTapsBeyondTheDepth) {
  auto target = Target::create(*backend_, *t_.weights, t_.cfg, TargetOptions{{1, 4}, 1, 8, nullptr, true}, "tiny");
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.error().message().find("tap layer 4 (entry 1) is beyond the target's 4 layers"),
            std::string::npos)
      << target.error().message();
}

}  // namespace
}  // namespace tandem::models::qwen3
