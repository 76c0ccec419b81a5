// Result/Error: values and errors travel, TANDEM_TRY/TANDEM_ASSIGN propagate, context prefixes.
#include <gtest/gtest.h>

#include "engine/core/result.h"

namespace tandem {
namespace {

Result<int> half_of(int x) {
  if (x % 2) return Error::make(ErrorKind::kInvalidArgument, "{} is odd", x);
  return x / 2;
}

Result<int> quarter_of(int x) {
  TANDEM_ASSIGN(int h, half_of(x));
  TANDEM_ASSIGN(int q,
                half_of(h));  // split over lines on purpose: the macro must not depend on __LINE__
  return q;
}

Status check_even(int x) {
  TANDEM_TRY(half_of(x));
  return {};
}

TEST(Result, ValuesErrorsAndContext) {
  EXPECT_EQ(*quarter_of(12), 3);
  auto r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "3 is odd");
  EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidArgument);
  auto c = std::move(r).context("quartering 6");
  EXPECT_EQ(c.error().message(), "quartering 6: 3 is odd");
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_EQ(check_even(5).error().message(), "5 is odd");
  EXPECT_EQ(to_string(ErrorKind::kCapacity), "capacity");
}

}  // namespace
}  // namespace tandem
