// layout(): one arena for every value of a graph lowered for a bucket (scorer.md §2). Live ranges,
// largest first, first fit, 16-float alignment; outputs live to the end.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "engine/ir/graph.h"

namespace tandem::ir {

inline constexpr size_t kArenaAlign = 16;  // floats (64 bytes)
inline constexpr size_t kNotPlaced = static_cast<size_t>(-1);

struct Layout {
  std::vector<size_t> offset;  // per value, in floats; kNotPlaced for values no op touches
  std::vector<size_t> size;    // per value, rows · width rounded up to kArenaAlign
  size_t len = 0;              // arena length in floats
};

// rows_of gives the row count of each Rows kind for the bucket being lowered.
Layout layout(const Graph& graph, const std::function<size_t(Rows)>& rows_of);

}  // namespace tandem::ir
