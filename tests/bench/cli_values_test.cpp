// The benchmarks' command-line values (bench/cli_values.h): lists and counts parsed, bad values refused with the
// flag and the item named.
#include "bench/cli_values.h"

#include <gtest/gtest.h>

namespace tandem::bench {
namespace {

TEST(CliValues, CountListsParse) {
  auto v = count_list("--batches", "1,8,32");
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(*v, (std::vector<uint32_t>{1, 8, 32}));
  auto one = count("--reps", "50");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, 50u);
}

TEST(CliValues, AcceptanceListsTakeRealsAndB) {
  auto v = number_list("--acceptance", "1,6.5,B", {false, 16.0, true});
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(*v, (std::vector<double>{1.0, 6.5, 0.0}));
}

TEST(CliValues, BadItemsAreRefusedWithTheFlagNamed) {
  struct Case {
    const char* text;
    const char* item;
  };
  for (const Case& c : {Case{"1,,8", "''"}, Case{"1,x", "'x'"}, Case{"0", "'0'"}, Case{"-4", "'-4'"},
                        Case{"2.5", "'2.5'"}, Case{"8,", "''"}, Case{"3e9", "'3e9'"}, Case{"B", "'B'"},
                        Case{"inf", "'inf'"}, Case{"nan", "'nan'"}}) {
    auto v = count_list("--kernel-rows", c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_NE(v.error().message().find("--kernel-rows"), std::string::npos) << v.error().message();
    EXPECT_NE(v.error().message().find(c.item), std::string::npos) << v.error().message();
  }
  auto big = number_list("--acceptance", "17", {false, 16.0, true});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message().find("'17'"), std::string::npos) << big.error().message();
}

TEST(CliValues, ExactCountsAreCounted) {
  auto two = counts_of("--kernel-shape", "4096,1024", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<uint32_t>{4096, 1024}));
  auto three = counts_of("--kernel-shape", "1,2,3", 2);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.error().message().find("3 values, 2 wanted"), std::string::npos) << three.error().message();
  EXPECT_FALSE(count("--reps", "5,5").ok());
  EXPECT_FALSE(count("--reps", "200000", 100000).ok());
}

}  // namespace
}  // namespace tandem::bench
