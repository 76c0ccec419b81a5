// DFlash v1/v2 drafters on the CPU backend against the independent double-precision block forward
// (tests/engine/models/qwen3/reference.cpp): block logits and selector rows after settling target taps,
// for plain, sliding-window (causal by default, or is_causal false), causal and reduced-vocabulary
// drafters; settles in pieces, batched blocks, the transience of block rows and the block-size range.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "tests/engine/models/qwen3/reference_impl.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::models::dflash {
namespace {

using testing::Rand;

constexpr double kTol = 1e-4;

void expect_near_rows(const ir::Tensor2& got, const testing::Rows& want, uint32_t cols, const std::string& what) {
  ASSERT_EQ(got.rows, want.size()) << what;
  ASSERT_EQ(got.width, cols) << what;
  for (uint32_t r = 0; r < got.rows; ++r) {
    for (uint32_t c = 0; c < cols; ++c) {
      const double w = want[r][c];
      ASSERT_LE(std::abs(got.at(r, c) - w), kTol * std::max(1.0, std::abs(w)))
          << what << " row " << r << " col " << c << ": " << got.at(r, c) << " vs " << w;
    }
  }
}

struct Case {
  const char* name;
  testing::DrafterShape shape;
  std::optional<uint32_t> draft_vocab;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

testing::DrafterShape shape(uint32_t version, auto edit) {
  testing::DrafterShape s;
  s.version = version;
  s.mask = 47;
  edit(s);
  return s;
}

class DrafterFixture {
 public:
  explicit DrafterFixture(const testing::DrafterShape& s, std::optional<uint32_t> draft_vocab = std::nullopt,
                          bool fuse_qkv = true)
      : target(testing::random_target({}, 31)), drafter(testing::random_drafter(target.cfg, s, 32)),
        backend(cpu::make_cpu_backend(2)) {
    auto t = qwen3::Target::create(*backend, *target.weights, target.cfg,
                                   qwen3::TargetOptions{drafter.cfg.target_layer_ids, 4, 64, nullptr, true}, "target");
    EXPECT_TRUE(t.ok()) << t.error().message();
    tgt = std::move(t).value();
    DrafterOptions opt{4, 64, 0, draft_vocab, nullptr, std::nullopt, fuse_qkv};
    auto d = Drafter::create(*backend, drafter.weights, drafter.cfg, *target.weights, target.cfg, opt, "drafter");
    EXPECT_TRUE(d.ok()) << d.error().message();
    dft = std::move(d).value();
  }
  // The target's tap rows for a prompt (in its slot 0).
  ir::Tensor2 taps_of(const std::vector<uint32_t>& prompt, uint32_t slot) {
    std::vector<qwen3::TargetOut> out;
    const qwen3::TargetRows rows{slot, prompt, qwen3::LogitRows::kNone, {}};
    EXPECT_TRUE(tgt->forward_fetching_taps({&rows, 1}, out).ok());
    return out[0].taps;
  }
  static testing::Rows as_rows(const ir::Tensor2& t) {
    testing::Rows rows;
    for (uint32_t r = 0; r < t.rows; ++r) {
      rows.emplace_back(t.data.begin() + ptrdiff_t{r} * t.width, t.data.begin() + ptrdiff_t{r + 1} * t.width);
    }
    return rows;
  }

  testing::TinyTarget target;
  testing::TinyDrafter drafter;
  std::unique_ptr<ir::Backend> backend;
  std::unique_ptr<qwen3::Target> tgt;
  std::unique_ptr<Drafter> dft;
};

class DrafterReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(DrafterReferenceTest, BlockLogitsAndSelectorMatchTheReference) {
  const Case& c = GetParam();
  DrafterFixture f(c.shape, c.draft_vocab);
  ASSERT_TRUE(f.dft);
  Rand r(8);
  std::vector<uint32_t> prompt(9);
  for (uint32_t& id : prompt) id = r.below(48);
  const ir::Tensor2 taps = f.taps_of(prompt, 0);
  const SettleRows settle{2, taps.data};
  ASSERT_TRUE(f.dft->settle({&settle, 1}).ok());
  EXPECT_EQ(f.dft->context().length(2), 9u);
  for (uint32_t block : {2u, 5u, 8u}) {
    std::vector<BlockOut> out;
    const BlockRows rows{2, 17};
    ASSERT_TRUE(f.dft->draft({&rows, 1}, block, out).ok());
    const testing::BlockRef ref = testing::reference_block(*f.drafter.weights, f.drafter.cfg, *f.target.weights,
                                                           f.target.cfg, DrafterFixture::as_rows(taps), 17, block);
    expect_near_rows(out[0].logits, ref.logits, f.dft->draft_vocab(), "logits, block " + std::to_string(block));
    if (c.shape.version == 2) {
      expect_near_rows(out[0].selector, ref.selector, c.shape.rank, "selector, block " + std::to_string(block));
    }
    EXPECT_EQ(f.dft->context().length(2), 9u) << "block rows are transient";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Drafters, DrafterReferenceTest,
    ::testing::Values(Case{"v1", shape(1, [](auto&) {}), std::nullopt},
                      Case{"v1_sliding_window_4", shape(1, [](auto& s) { s.window = 4; }), std::nullopt},
                      Case{"v1_sliding_window_4_not_causal",
                           shape(1, [](auto& s) { s.window = 4; s.is_causal = false; }), std::nullopt},
                      Case{"v1_causal_everywhere", shape(1, [](auto& s) { s.window = 4; s.is_causal = true; }),
                           std::nullopt},
                      Case{"v1_three_taps_mha", shape(1, [](auto& s) { s.taps = {0, 2, 3}; s.kv_heads = 4; }),
                           std::nullopt},
                      Case{"v2", shape(2, [](auto&) {}), std::nullopt},
                      Case{"v2_three_conv_taps_group_4", shape(2, [](auto& s) { s.conv_taps = 3; s.group = 4; }),
                           std::nullopt},
                      Case{"v2_draft_vocab_20", shape(2, [](auto& s) { s.softcap = 0.0f; }), 20u},
                      Case{"v2_sliding_window_3", shape(2, [](auto& s) { s.window = 3; }), std::nullopt},
                      Case{"v2_sliding_window_3_not_causal",
                           shape(2, [](auto& s) { s.window = 3; s.is_causal = false; }), std::nullopt}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(DrafterRuns, CausalDrafterMatchesTheReference) {
  testing::DrafterShape s = shape(1, [](auto&) {});
  testing::TinyTarget target = testing::random_target({}, 31);
  testing::TinyDrafter d = testing::random_drafter(target.cfg, s, 32);
  d.config["dflash_config"]["causal"] = true;
  auto cfg = io::parse_dflash_config(d.config, "causal");
  ASSERT_TRUE(cfg.ok());
  ASSERT_EQ(cfg->causal_layer, (std::vector<bool>{true, true}));
  auto backend = cpu::make_cpu_backend(1);
  auto dft = Drafter::create(*backend, d.weights, *cfg, *target.weights, target.cfg,
                             DrafterOptions{1, 32, 0, std::nullopt, nullptr}, "d");
  ASSERT_TRUE(dft.ok()) << dft.error().message();
  Rand r(2);
  std::vector<float> taps((*dft)->tap_width() * 5);
  for (float& x : taps) x = r.symmetric(2.0f);
  const SettleRows settle{0, taps};
  ASSERT_TRUE((*dft)->settle({&settle, 1}).ok());
  std::vector<BlockOut> out;
  const BlockRows rows{0, 3};
  ASSERT_TRUE((*dft)->draft({&rows, 1}, 6, out).ok());
  ir::Tensor2 t;
  t.rows = 5;
  t.width = (*dft)->tap_width();
  t.data = taps;
  const testing::BlockRef ref =
      testing::reference_block(*d.weights, *cfg, *target.weights, target.cfg, DrafterFixture::as_rows(t), 3, 6);
  expect_near_rows(out[0].logits, ref.logits, 48, "causal logits");
}

// The sliding layer's default causality is what the drafts see: the same weights read with is_causal
// false draft other logits (so the reference cases above cannot pass with causality ignored).
TEST(DrafterRuns, ASlidingLayerIsCausalUnlessIsCausalSaysOtherwise) {
  for (uint32_t version : {1u, 2u}) {
    std::vector<float> logits[2];
    for (const bool explicit_false : {false, true}) {
      DrafterFixture f(shape(version, [&](auto& s) {
        s.window = 16;  // wider than context and block: only causality differs
        if (explicit_false) s.is_causal = false;
      }));
      ASSERT_TRUE(f.dft);
      EXPECT_EQ(f.drafter.cfg.causal_layer, (std::vector<bool>{false, !explicit_false}));
      const ir::Tensor2 taps = f.taps_of({3, 9, 27, 33, 8}, 0);
      const SettleRows settle{0, taps.data};
      ASSERT_TRUE(f.dft->settle({&settle, 1}).ok());
      std::vector<BlockOut> out;
      const BlockRows rows{0, 17};
      ASSERT_TRUE(f.dft->draft({&rows, 1}, 6, out).ok());
      logits[explicit_false] = out[0].logits.data;
    }
    EXPECT_NE(logits[0], logits[1]) << "version " << version;
  }
}

TEST(DrafterRuns, SettleInPiecesAndBatchedBlocksEqualOneGo) {
  for (uint32_t version : {1u, 2u}) {
    DrafterFixture f(shape(version, [](auto&) {}));
    Rand r(9);
    std::vector<uint32_t> a(11), b(4);
    for (uint32_t& id : a) id = r.below(48);
    for (uint32_t& id : b) id = r.below(48);
    const ir::Tensor2 ta = f.taps_of(a, 0), tb = f.taps_of(b, 1);
    const uint32_t tw = f.dft->tap_width();
    // Slot 0 settles a in one go; slot 1 settles a in pieces of 4, 1 and 6 rows; slot 3 settles b.
    SettleRows whole{0, ta.data};
    ASSERT_TRUE(f.dft->settle({&whole, 1}).ok());
    const std::span<const float> all(ta.data);
    uint32_t at = 0;
    for (uint32_t n : {4u, 1u, 6u}) {
      const SettleRows piece{1, all.subspan(size_t{at} * tw, size_t{n} * tw)};
      ASSERT_TRUE(f.dft->settle({&piece, 1}).ok());
      at += n;
    }
    const SettleRows other{3, tb.data};
    ASSERT_TRUE(f.dft->settle({&other, 1}).ok());
    std::vector<BlockOut> alone0, alone1, both;
    const BlockRows r0{0, 5}, r1{1, 5}, r3{3, 9};
    ASSERT_TRUE(f.dft->draft({&r0, 1}, 6, alone0).ok());
    ASSERT_TRUE(f.dft->draft({&r1, 1}, 6, alone1).ok());
    EXPECT_EQ(alone0[0].logits.data, alone1[0].logits.data) << "version " << version;
    const BlockRows pair[] = {r3, r0};
    ASSERT_TRUE(f.dft->draft(pair, 6, both).ok());
    EXPECT_EQ(both[1].logits.data, alone0[0].logits.data) << "version " << version;
    EXPECT_EQ(both[1].selector.data, alone0[0].selector.data) << "version " << version;
    std::vector<BlockOut> alone3;
    ASSERT_TRUE(f.dft->draft({&r3, 1}, 6, alone3).ok());
    EXPECT_EQ(both[0].logits.data, alone3[0].logits.data) << "version " << version;
  }
}

// A block layer's q, k and v as one stacked GEMM (DrafterOptions::fuse_qkv, the default) computes each output
// column as the three GEMMs do: the same logits and selector rows, bit for bit, for both versions.
TEST(DrafterRuns, StackedQkvDraftsTheBitsOfThreeProjections) {
  for (uint32_t version : {1u, 2u}) {
    std::vector<float> logits[2], selector[2];
    for (const bool fused : {false, true}) {
      DrafterFixture f(shape(version, [](auto&) {}), std::nullopt, fused);
      ASSERT_TRUE(f.dft);
      EXPECT_EQ(f.dft->setup().fuse_qkv, fused);
      const ir::Tensor2 taps = f.taps_of({3, 9, 27, 33, 8, 41}, 0);
      const SettleRows settle{0, taps.data};
      ASSERT_TRUE(f.dft->settle({&settle, 1}).ok());
      std::vector<BlockOut> out;
      const BlockRows rows{0, 17};
      ASSERT_TRUE(f.dft->draft({&rows, 1}, 7, out).ok());
      logits[fused] = out[0].logits.data;
      selector[fused] = out[0].selector.data;
    }
    ASSERT_FALSE(logits[0].empty());
    EXPECT_EQ(logits[1], logits[0]) << "version " << version;
    EXPECT_EQ(selector[1], selector[0]) << "version " << version;
  }
}

TEST(DrafterRuns, RejectsBadBlocksAndSettles) {
  DrafterFixture f(shape(1, [](auto&) {}));
  std::vector<BlockOut> out;
  const BlockRows one{0, 5};
  Status st = f.dft->draft({&one, 1}, 1, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "block size 1 is not in 2..16 (a block drafts B − 1 tokens; the 'drafter' buckets "
                                  "hold blocks of at most 16 rows per sequence)");
  st = f.dft->draft({&one, 1}, 17, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("block size 17 is not in 2..16"), std::string::npos) << st.error().message();
  const BlockRows bad{0, 48};
  st = f.dft->draft({&bad, 1}, 4, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("anchor 48 is outside the vocabulary of 48"), std::string::npos);
  std::vector<float> taps(f.dft->tap_width() + 1);
  const SettleRows odd{0, taps};
  st = f.dft->settle({&odd, 1});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("65 tap values are not rows of 64"), std::string::npos)
      << st.error().message();
  const BlockRows late{0, 5};
  std::vector<float> many(size_t{f.dft->tap_width()} * 60);
  const SettleRows fill{0, many};
  ASSERT_TRUE(f.dft->settle({&fill, 1}).ok());
  st = f.dft->draft({&late, 1}, 8, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kCapacity) << st.error().message();
}

}  // namespace
}  // namespace tandem::models::dflash
