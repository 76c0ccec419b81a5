// Arena layout by live range: a value lives from the first to the last op touching it. Values sorted by
// (size desc, index asc) take the lowest offset that overlaps no placed value whose range overlaps.
#include "engine/ir/layout.h"

#include <algorithm>
#include <numeric>

namespace tandem::ir {

Layout layout(const Graph& graph, const std::function<size_t(Rows)>& rows_of) {
  const size_t n = graph.vals.size();
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> first(n, kNone), last(n, 0);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Uses u = uses(graph.ops[i]);
    for (const auto* list : {&u.reads, &u.writes}) {
      for (Val v : *list) {
        if (first[v.index] == kNone) first[v.index] = i;
        last[v.index] = std::max(last[v.index], i);
      }
    }
  }
  for (const Output& o : graph.outputs) {
    if (first[o.val.index] == kNone) first[o.val.index] = graph.ops.size();
    last[o.val.index] = static_cast<size_t>(-2);  // to the end
  }

  Layout out;
  out.offset.assign(n, kNotPlaced);
  out.size.assign(n, 0);
  std::vector<size_t> order;
  for (size_t v = 0; v < n; ++v) {
    if (first[v] == kNone) continue;
    const size_t elems = rows_of(graph.vals[v].rows) * graph.vals[v].width;
    out.size[v] = (elems + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
    order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.size[a] > out.size[b]; });

  std::vector<size_t> placed;
  for (size_t v : order) {
    // Intervals taken by values whose live range overlaps v's, sorted by offset.
    std::vector<std::pair<size_t, size_t>> taken;
    for (size_t p : placed) {
      if (first[p] <= last[v] && first[v] <= last[p]) taken.push_back({out.offset[p], out.offset[p] + out.size[p]});
    }
    std::sort(taken.begin(), taken.end());
    size_t at = 0;
    for (const auto& [lo, hi] : taken) {
      if (at + out.size[v] <= lo) break;
      at = std::max(at, hi);
    }
    out.offset[v] = at;
    out.len = std::max(out.len, at + out.size[v]);
    placed.push_back(v);
  }
  return out;
}

}  // namespace tandem::ir
