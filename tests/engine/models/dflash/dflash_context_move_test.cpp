// A drafter context moved to another drafter (decode::CacheSlots::export_rows / import_rows, what a drain
// hands over between drafter ranks): the shipped pylm-dflash and pylm-dflash2 on the CPU backend settle a
// context in one drafter's slot, its rows go into another drafter's other slot, and both then draft the
// same bits (logits and picks), greedy and seeded; the rows come back out unchanged; a slot asked for more
// than it holds, or rows that do not fit, are refused naming the slot.
#include <gtest/gtest.h>

#include <random>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"

namespace tandem::models::dflash {
namespace {

const std::string kRoot = TANDEM_SOURCE_DIR;

std::unique_ptr<Drafter> open(ir::Backend& backend, const std::string& dir) {
  auto d = Drafter::open(backend, kRoot + "/models/" + dir, kRoot + "/models/pylm",
                         DrafterOptions{2, 64, 8, std::nullopt, nullptr});
  EXPECT_TRUE(d.ok()) << d.error().message();
  return d.ok() ? std::move(d).value() : nullptr;
}

BlockOut draft(Drafter& d, uint32_t slot, uint32_t anchor, ir::SamplingParams walk) {
  std::vector<BlockOut> out;
  const BlockRows rows{slot, anchor, walk};
  Status s = d.draft({&rows, 1}, 8, out, true, false);
  EXPECT_TRUE(s.ok()) << s.error().message();
  return s.ok() ? std::move(out[0]) : BlockOut{};
}

TEST(DrafterContextMove, TheMovedContextDraftsTheSameBits) {
  auto backend = cpu::make_cpu_backend(1);
  for (const std::string dir : {"pylm-dflash", "pylm-dflash2"}) {
    SCOPED_TRACE(dir);
    auto from = open(*backend, dir);
    auto to = open(*backend, dir);
    ASSERT_TRUE(from && to);
    // Any tap rows will do: the context is whatever settle made of them.
    const uint32_t positions = 21, width = from->tap_width();
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> taps(size_t{positions} * width);
    for (float& x : taps) x = dist(rng);
    const SettleRows first{0, std::span<const float>(taps).first(size_t{13} * width), {}};
    const SettleRows rest{0, std::span<const float>(taps).subspan(size_t{13} * width), {}};
    ASSERT_TRUE(from->settle({&first, 1}).ok());
    ASSERT_TRUE(from->settle({&rest, 1}).ok());
    ASSERT_EQ(from->context().length(0), positions);

    std::vector<float> rows;
    Status s = from->context().export_rows(0, positions, rows);
    ASSERT_TRUE(s.ok()) << s.error().message();
    ASSERT_EQ(rows.size(), size_t{positions} * from->context().row_width());
    s = to->context().import_rows(1, positions, rows);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(to->context().length(1), positions);
    std::vector<float> back;
    ASSERT_TRUE(to->context().export_rows(1, positions, back).ok());
    EXPECT_EQ(back, rows);

    for (const ir::SamplingParams walk : {ir::SamplingParams{}, ir::SamplingParams{0.8f, 1.0f, 77}}) {
      const BlockOut want = draft(*from, 0, 42, walk);
      const BlockOut got = draft(*to, 1, 42, walk);
      EXPECT_EQ(got.logits.data, want.logits.data) << "temperature " << walk.temperature;
      EXPECT_EQ(got.ids, want.ids) << "temperature " << walk.temperature;
      EXPECT_FALSE(got.ids.empty());
    }
    // A shorter hand-over is the context cut there.
    ASSERT_TRUE(from->context().export_rows(0, 5, rows).ok());
    EXPECT_EQ(rows.size(), size_t{5} * from->context().row_width());
  }
}

TEST(DrafterContextMove, RowsThatDoNotFitAreRefused) {
  auto backend = cpu::make_cpu_backend(1);
  auto d = open(*backend, "pylm-dflash");
  ASSERT_TRUE(d);
  std::vector<float> rows;
  Status s = d->context().export_rows(0, 1, rows);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "cannot export 1 positions of cache slot 0: it holds 0");
  s = d->context().export_rows(2, 0, rows);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("cache slot 2"), std::string::npos) << s.error().message();
  const uint32_t w = d->context().row_width();
  s = d->context().import_rows(1, 3, std::vector<float>(size_t{3} * w - 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("into cache slot 1"), std::string::npos) << s.error().message();
  s = d->context().import_rows(0, 65, std::vector<float>(size_t{65} * w));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("2 slots of 64 positions"), std::string::npos) << s.error().message();
  EXPECT_EQ(d->context().length(0), 0u);
  EXPECT_EQ(d->context().length(1), 0u);
}

}  // namespace
}  // namespace tandem::models::dflash
