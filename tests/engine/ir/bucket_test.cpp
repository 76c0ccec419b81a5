// Bucket tables: the embedded default (scorer.md §2's 20 compat buckets), smallest-fit lookup, and errors
// naming the line of a malformed table.
#include <gtest/gtest.h>

#include <string>

#include "engine/ir/bucket.h"

namespace tandem::ir {
namespace {

TEST(BucketTable, TheDefaultHasTheTwentyCompatBuckets) {
  const auto& compat = BucketTable::defaults().stage("compat");
  ASSERT_EQ(compat.size(), 20u);
  EXPECT_EQ(compat.front(), (Bucket{32, 8, 32}));
  EXPECT_EQ(compat[14], (Bucket{512, 128, 512}));
  EXPECT_EQ(compat.back(), (Bucket{16384, 1024, 8192}));
  for (size_t i = 1; i < compat.size(); ++i) EXPECT_LT(compat[i - 1], compat[i]);
}

TEST(BucketTable, SmallestBucketThatHoldsAllThreeCounts) {
  const auto& t = BucketTable::defaults();
  EXPECT_EQ(*t.smallest("compat", 136, 1, 4), (Bucket{160, 40, 160}));
  EXPECT_EQ(*t.smallest("compat", 32, 8, 32), (Bucket{32, 8, 32}));
  EXPECT_EQ(*t.smallest("compat", 33, 1, 1), (Bucket{48, 12, 48}));
  EXPECT_EQ(*t.smallest("compat", 40, 30, 0), (Bucket{128, 32, 128})) << "sequences decide";
  EXPECT_EQ(*t.smallest("compat", 5120, 10, 40), (Bucket{8192, 1024, 8192}));
  auto none = t.smallest("compat", 20000, 1, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind(), ErrorKind::kCapacity);
  EXPECT_NE(none.error().message().find("20000 tokens"), std::string::npos) << none.error().message();
  EXPECT_FALSE(t.smallest("nope", 1, 1, 1).ok());
  EXPECT_EQ(*t.ceiling("compat"), (Bucket{16384, 1024, 8192}));
}

TEST(BucketTable, MalformedTablesNameTheirLine) {
  const std::pair<const char*, const char*> bad[] = {
      {"compat 32 8\n", "t.txt:1: expected 'stage tokens seqs picks', got 3 fields"},
      {"# c\ncompat 32 x 8\n", "t.txt:2: seqs 'x' is not a non-negative integer"},
      {"compat -1 8 8\n", "t.txt:1: tokens '-1' is not a non-negative integer"},
      {"compat 0 8 8\n", "t.txt:1: a bucket needs at least one token and one sequence"},
      {"compat 32 8 8\ncompat 32 8 8\n", "t.txt:2: bucket 32/8/8 of stage compat is listed twice"},
      {"# only comments\n\n", "t.txt: no buckets"},
  };
  for (const auto& [text, message] : bad) {
    auto t = BucketTable::parse(text, "t.txt");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_NE(t.error().message().find(message), std::string::npos) << t.error().message();
  }
  auto ok = BucketTable::parse("b 64 4 0  # comment\na 8 1 1\nb 16 2 0\n", "t.txt");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->stage("b").front(), (Bucket{16, 2, 0}));
  EXPECT_EQ(ok->stages().size(), 2u);
}

}  // namespace
}  // namespace tandem::ir
