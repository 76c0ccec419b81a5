// The benchmark's batches (scorer.md §4): W1 = one `choice` question with 4 options over a 96-token state
// (136 tokens); W3 = ten questions over a 512-token state (5,120 tokens), as one batch and split by bucket
// cost the way the batcher would; full buckets of 128-token questions from 512 to 16,384 tokens; and the
// serving batch: as many W1 questions as a 4,096-token batch holds (30), what the serving job runs. The
// tiny shapes (the emulator's smoke run, where attention runs on the SIMT scheduler at O(tokens²)) are a
// 40-token W1, ten 24-token W3 questions, one 128-token full bucket and three W1s for serving.
#pragma once

#include <string>
#include <vector>

#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "engine/ir/executor.h"

namespace tandem::bench {

struct Workloads {
  ir::Batch w1, w3;
  std::vector<ir::Batch> w3_parts;
  std::string w3_split;  // its buckets
  uint32_t w1_len = 0, w3_len = 0;
  std::vector<ir::Batch> full;  // 512 .. 16384 tokens
  ir::Batch serving;            // 30 W1-shaped questions (4,080 tokens)
};

Workloads make_workloads(bool tiny, const ir::BucketTable& table, const ir::Executor& exec);

// Runs the parts one after the other (W3 split).
Status run_parts(ir::Executor& exec, const std::vector<ir::Batch>& parts, ir::Outputs& out);

}  // namespace tandem::bench
