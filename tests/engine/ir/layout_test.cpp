// layout(): live values never share arena space, dead ones do, sizes are aligned, outputs live to the end.
#include <gtest/gtest.h>

#include <random>

#include "engine/ir/layout.h"

namespace tandem::ir {
namespace {

size_t rows_of(Rows r) { return r == Rows::kTokens ? 100 : r == Rows::kSeqs ? 7 : 13; }

// Live range of every value: [first op, last op] (outputs: to the end).
void expect_no_live_overlap(const Graph& g, const Layout& l) {
  const size_t n = g.vals.size();
  std::vector<long> first(n, -1), last(n, -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Uses u = uses(g.ops[i]);
    for (const auto* list : {&u.reads, &u.writes}) {
      for (Val v : *list) {
        if (first[v.index] < 0) first[v.index] = static_cast<long>(i);
        last[v.index] = static_cast<long>(i);
      }
    }
  }
  for (const Output& o : g.outputs) last[o.val.index] = static_cast<long>(g.ops.size());
  for (size_t a = 0; a < n; ++a) {
    if (first[a] < 0) {
      EXPECT_EQ(l.offset[a], kNotPlaced) << "value " << a << " is never touched";
      continue;
    }
    EXPECT_EQ(l.offset[a] % kArenaAlign, 0u);
    EXPECT_EQ(l.size[a] % kArenaAlign, 0u);
    EXPECT_GE(l.size[a], rows_of(g.vals[a].rows) * g.vals[a].width);
    EXPECT_LE(l.offset[a] + l.size[a], l.len);
    for (size_t b = a + 1; b < n; ++b) {
      if (first[b] < 0 || first[a] > last[b] || first[b] > last[a]) continue;
      const bool disjoint = l.offset[a] + l.size[a] <= l.offset[b] || l.offset[b] + l.size[b] <= l.offset[a];
      EXPECT_TRUE(disjoint) << "values " << a << " and " << b << " are live together and overlap";
    }
  }
}

TEST(Layout, AChainReusesTwoBuffers) {
  Graph g;
  const WeightId table = g.add_weight({"emb"}, {10, 16});
  const WeightId w = g.add_weight({"w"}, {16, 16});
  Val x = g.add_val(Rows::kTokens, 16, "x0");
  g.add_op(Embed{table, x});
  for (int i = 0; i < 6; ++i) {
    Val y = g.add_val(Rows::kTokens, 16, "x");
    g.add_op(Gemm{x, w, std::nullopt, Epilogue::kNone, y});
    x = y;
  }
  g.add_output("out", x);
  const Layout l = layout(g, rows_of);
  expect_no_live_overlap(g, l);
  EXPECT_EQ(l.len, 2 * 100 * 16u) << "a chain needs exactly two buffers";
}

TEST(Layout, RandomGraphsNeverOverlapLiveValues) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Graph g;
    const WeightId w = g.add_weight({"w"}, {8, 8});
    const WeightId table = g.add_weight({"emb"}, {10, 8});
    std::vector<Val> live;
    Val first = g.add_val(Rows::kTokens, 8, "v");
    g.add_op(Embed{table, first});
    live.push_back(first);
    for (int i = 0; i < 40; ++i) {
      const Val a = live[rng() % live.size()];
      if (rng() % 3 == 0) {
        g.add_op(Gemm{a, w, std::nullopt, Epilogue::kAccumulate, live[rng() % live.size()]});
      } else {
        const Val out = g.add_val(Rows::kTokens, 8, "v");
        g.add_op(Gemm{a, w, std::nullopt, Epilogue::kNone, out});
        live.push_back(out);
      }
    }
    g.add_val(Rows::kSeqs, 3, "never touched");
    g.add_output("out", live[rng() % live.size()]);
    const Layout l = layout(g, rows_of);
    expect_no_live_overlap(g, l);
  }
}

}  // namespace
}  // namespace tandem::ir
