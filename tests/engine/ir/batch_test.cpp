// ir::check(): every malformed batch field is rejected with a message naming it; valid batches pass.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "engine/ir/batch.h"

namespace tandem::ir {
namespace {

Batch two_questions() {
  Batch b;
  b.add_sequence({1, 7, 4, 9, 4, 2}, {2, 4}, 0);
  b.add_sequence({1, 5, 2}, {}, 2);
  return b;
}

const BatchLimits kScorer{.vocab = 16};

// Device feature rows for every token of b: row 0 of a source of `rows` rows of `width` (a dummy address:
// check() never reads it; the backend that runs the batch checks the owner).
void with_source(Batch& b, uint32_t rows, uint32_t width) {
  static const float data = 0.0f;
  b.feature_source = {&data, rows, width, width, Storage::kF32, nullptr};
  b.feature_rows.assign(b.ids.size(), 0);
}

TEST(BatchCheck, WellFormedBatchesPass) {
  EXPECT_TRUE(check(two_questions(), kScorer).ok());
  EXPECT_TRUE(check(Batch{}, kScorer).ok()) << "an empty batch is valid";
  Batch empty_seq;
  empty_seq.add_sequence({}, {}, 1);
  EXPECT_TRUE(check(empty_seq, kScorer).ok()) << "an empty sequence without markers is valid";
}

struct Case {
  const char* name;
  std::function<void(Batch&, BatchLimits&)> damage;
  const char* message;  // substring the error must contain
};

TEST(BatchCheck, EveryMalformedFieldIsRejectedByName) {
  const Case cases[] = {
      {"cu too short", [](Batch& b, BatchLimits&) { b.cu.pop_back(); }, "cu has 2 entries, expected 3"},
      {"cu not starting at 0", [](Batch& b, BatchLimits&) { b.cu[0] = 1; }, "cu[0] = 1, expected 0"},
      {"cu decreasing", [](Batch& b, BatchLimits&) { b.cu[1] = 7; b.cu[2] = 6; }, "cu[2] = 6 is less than cu[1] = 7"},
      {"cu total wrong", [](Batch& b, BatchLimits&) { b.ids.push_back(3); }, "cu[2] = 9, expected the number of ids (10)"},
      {"pcu too long", [](Batch& b, BatchLimits&) { b.pcu.push_back(2); }, "pcu has 4 entries, expected 3"},
      {"pcu total wrong", [](Batch& b, BatchLimits&) { b.picks.push_back(0); }, "pcu[2] = 2, expected the number of picks (3)"},
      {"qtype out of range", [](Batch& b, BatchLimits&) { b.qtype[1] = 3; }, "qtype[1] = 3 is not a question type"},
      {"marker outside its sequence", [](Batch& b, BatchLimits&) { b.picks[1] = 6; }, "picks[1] = 6 is outside sequence 0 of 6 tokens"},
      {"id outside vocab", [](Batch& b, BatchLimits&) { b.ids[7] = 16; }, "ids[7] = 16 is outside the vocabulary of 16"},
      {"features for a graph without input", [](Batch& b, BatchLimits&) { b.features = {1.0f}; }, "features has 1 values but this graph reads none"},
      {"features of the wrong size", [](Batch& b, BatchLimits& l) { l.feature_width = 2; b.features.assign(17, 0.5f); }, "features has 17 values, expected 18"},
      {"features not finite", [](Batch& b, BatchLimits& l) { l.feature_width = 1; b.features.assign(9, 0.f); b.features[4] = NAN; }, "features[4] is not finite"},
      {"feature rows for a graph without input", [](Batch& b, BatchLimits&) { b.feature_rows.assign(9, 0); }, "feature_rows has 9 entries but this graph reads none"},
      {"feature rows and host features", [](Batch& b, BatchLimits& l) { l.feature_width = 1; with_source(b, 9, 1); b.features.assign(9, 0.f); }, "features has 9 values and feature_rows 9: give one of them"},
      {"feature rows too few", [](Batch& b, BatchLimits& l) { l.feature_width = 1; with_source(b, 9, 1); b.feature_rows.pop_back(); }, "feature_rows has 8 entries, expected one per token (9)"},
      {"feature source of another width", [](Batch& b, BatchLimits& l) { l.feature_width = 2; with_source(b, 9, 3); }, "feature_source rows are 3 wide (3 apart), the graph reads rows of 2"},
      {"feature row outside the source", [](Batch& b, BatchLimits& l) { l.feature_width = 1; with_source(b, 4, 1); b.feature_rows[6] = 4; }, "feature_rows[6] = 4 is outside the 4 rows of feature_source"},
      {"feature source without data", [](Batch& b, BatchLimits& l) { l.feature_width = 1; with_source(b, 9, 1); b.feature_source.data = nullptr; }, "feature_source has no data"},
      {"feature source of ids", [](Batch& b, BatchLimits& l) { l.feature_width = 1; with_source(b, 9, 1); b.feature_source.storage = Storage::kU32; }, "feature_source holds u32 ids"},
      {"decoder batch without starts", [](Batch& b, BatchLimits& l) { l.slots = 4; l.capacity = 64; b.slot = {0, 1}; }, "start has 0 entries, expected one per sequence (2)"},
      {"slot out of range", [](Batch& b, BatchLimits& l) { l.slots = 2; l.capacity = 64; b.start = {0, 0}; b.slot = {0, 2}; }, "slot[1] = 2 is outside the 2 cache slots"},
      {"two sequences in one slot", [](Batch& b, BatchLimits& l) { l.slots = 2; l.capacity = 64; b.start = {0, 0}; b.slot = {1, 1}; }, "two sequences share a cache slot"},
      {"rows past the cache", [](Batch& b, BatchLimits& l) { l.slots = 2; l.capacity = 8; b.start = {3, 0}; b.slot = {0, 1}; }, "start[0] = 3 plus 6 rows passes the cache capacity of 8"},
      {"starts for a graph without caches", [](Batch& b, BatchLimits&) { b.start = {0, 0}; b.slot = {0, 1}; }, "start/slot are set but this graph has no caches"},
  };
  for (const Case& c : cases) {
    Batch b = two_questions();
    BatchLimits limits = kScorer;
    c.damage(b, limits);
    const Status st = check(b, limits);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidArgument) << c.name;
    EXPECT_NE(st.error().message().find(c.message), std::string::npos)
        << c.name << ": got '" << st.error().message() << "'";
    EXPECT_EQ(st.error().message().rfind("batch.", 0), 0u) << c.name << ": the message starts with the field";
  }
}

TEST(BatchCheck, DeviceFeatureRowsPass) {
  Batch b = two_questions();
  with_source(b, 12, 3);
  b.feature_rows = {11, 0, 5, 5, 1, 2, 3, 4, 6};
  EXPECT_TRUE(check(b, BatchLimits{.vocab = 16, .feature_width = 3}).ok());
}

TEST(BatchCheck, DecoderBatchesWithinTheirCachesPass) {
  Batch b = two_questions();
  b.start = {10, 0};
  b.slot = {3, 0};
  EXPECT_TRUE(check(b, BatchLimits{.vocab = 16, .slots = 4, .capacity = 16}).ok());
}

}  // namespace
}  // namespace tandem::ir
