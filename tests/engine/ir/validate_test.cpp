// validate(): a graph whose operands disagree is refused, naming the op and the value.
#include <gtest/gtest.h>

#include <string>

#include "engine/ir/executor.h"

namespace tandem::ir {
namespace {

TEST(Validate, NamesTheOpAndTheMismatch) {
  Graph g;
  const WeightId w = g.add_weight({"layers.0.w"}, {32, 16});
  const Val a = g.add_val(Rows::kTokens, 16, "a");
  const Val out = g.add_val(Rows::kTokens, 32, "out");
  g.add_op(Gemm{a, w, std::nullopt, Epilogue::kNone, out});
  EXPECT_TRUE(validate(g).ok());

  Graph bad = g;
  bad.vals[out.index].width = 30;
  auto st = validate(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("graph op 0 (gemm): weight layers.0.w is [32, 16], expected [30, 16]"),
            std::string::npos)
      << st.error().message();

  // A Gemm of the weight's first rows (a draft vocabulary over a head) may be narrower than the weight, never
  // wider, and only when it says so.
  Graph first = bad;
  std::get<Gemm>(first.ops[0]).first_rows = true;
  EXPECT_TRUE(validate(first).ok()) << validate(first).error().message();
  first.vals[out.index].width = 33;
  st = validate(first);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("gemm 'out': weight layers.0.w is [32, 16], not at least 33 rows of 16"),
            std::string::npos)
      << st.error().message();

  Graph rows = g;
  rows.vals[out.index].rows = Rows::kSeqs;
  st = validate(rows);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("'a' and 'out' have different rows"), std::string::npos) << st.error().message();

  Graph attn;
  const Val qkv = attn.add_val(Rows::kTokens, 3 * 2 * 64, "qkv");
  const Val o = attn.add_val(Rows::kTokens, 64, "o");
  attn.add_op(Attention{qkv, 2, 64, std::nullopt, o});
  st = validate(attn);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("attention output 'o' is 64 wide, expected 128"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace tandem::ir
