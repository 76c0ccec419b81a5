// The decoder runtime (dflash.md §1.7): SeqRunner runs a decoder graph over rows of several sequences
// at once, each continuing its cache slot (cache_slots.h), packing them into batches that fit the
// stage's buckets and splitting long prompts into chunks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/executor.h"
#include "engine/decode/cache_slots.h"

namespace tandem::decode {

// Rows of one sequence for a run. They sit at positions length(slot) .. length(slot) + rows − 1.
struct SeqRows {
  uint32_t slot = 0;
  std::span<const uint32_t> ids;      // the rows' tokens; empty when the graph reads only features
  std::span<const float> features;    // rows × feature width, for graphs with an Input op
  // Or the features where a run left them (a target's tap rows, one per row): read on the device. The
  // sequences of one call that use them must share one device output (owner, storage, stride).
  ir::DeviceRows device_features = {};
  std::span<const uint32_t> picks;    // ascending rows whose pick-row outputs are wanted (logit rows)
  bool commit = true;                 // advance the slot's length past the rows (false: transient rows)
  ir::SamplingParams sampling;        // for the graph's Sample ops
  // A verify block's proposals for the graph's RejectSample (one row per draft: rows 1.. of ids, every row
  // picked); such a sequence never splits over runs.
  ir::ProposalRows proposals = {};
};

// One sequence's share of each host output (Placement::kHost), in Graph::outputs order: its token rows,
// or its pick rows. Device outputs stay empty here: a run's device rows reach the ChunkSink instead.
using SeqOutputs = std::vector<ir::Tensor2>;

// A sequence's device rows of one run: rows [first, first + count) of the sequence, of every device
// output (in Graph::outputs order; host outputs are left empty), valid only during the call, since the
// next run of the same plan overwrites them. Consumers copy or send what they keep.
struct DeviceChunk {
  size_t seq = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  std::span<const ir::DeviceRows> outputs;
  // No later run of the same call follows: the rows stay valid after run() returns, until the plan
  // runs again (earlier chunks are overwritten by the call's later runs).
  bool last = false;
};
using ChunkSink = std::function<Status(const DeviceChunk&)>;

class SeqRunner {
 public:
  // `split`: a sequence too long for one bucket runs in chunks (causal graphs only; a block-mode graph
  // must see all its rows at once). Graph, weights and table must outlive the runner.
  SeqRunner(ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph, const ir::BucketTable& table,
            std::string stage, uint32_t vocab, bool split);

  // Runs every sequence's rows (each slot at most once); `out` gets one entry per sequence, and `sink`
  // (if set) each run's device rows per sequence, in row order.
  Status run(std::span<const SeqRows> seqs, CacheSlots& caches, std::vector<SeqOutputs>& out,
             const ChunkSink& sink = {});
  // A server's warm-up: lowers now every bucket that a run of 1..max_seqs sequences of 1..max_rows rows
  // each can pick (each sequence's rows picked all, last or all but one per sequence), so no round
  // pays for a bucket's first use (on CUDA: GEMM probes, timing and graph capture, seconds each).
  // Returns how many plans were lowered by this call. `stopping` (if set) is asked before each bucket: a
  // job told to stop while it warms up leaves at the next bucket (kCancelled) instead of after all.
  Result<size_t> prepare(uint32_t max_seqs, uint32_t max_rows, const std::function<bool()>& stopping = {});
  // The most sequences of `rows` rows and `picks` picks each that one run holds (0: not even one).
  uint32_t seqs_per_run(uint32_t rows, uint32_t picks) const;
  size_t plans() const { return exec_.plans(); }
  size_t plan_bytes() const { return exec_.plan_bytes(); }

 private:
  struct Chunk {
    size_t seq;
    uint32_t begin;
    uint32_t rows;
  };
  Status check_seqs(std::span<const SeqRows> seqs, const CacheSlots& caches) const;
  uint32_t rows_of(const SeqRows& s) const;
  // Batch::feature_source over every sequence's device rows, and each sequence's first row in it.
  Status device_source(std::span<const SeqRows> seqs, ir::DeviceRows& source, std::vector<uint32_t>& first) const;
  uint32_t picks_in(const SeqRows& s, uint32_t begin, uint32_t end) const;
  bool fits(uint32_t tokens, uint32_t seqs, uint32_t picks) const;
  Status run_chunks(std::span<const SeqRows> seqs, const std::vector<Chunk>& chunks,
                    const std::vector<uint32_t>& starts, CacheSlots& caches, std::vector<SeqOutputs>& out,
                    const ChunkSink& sink, bool last);

  ir::Executor exec_;
  const ir::BucketTable& table_;
  std::string stage_;
  uint32_t vocab_;
  bool split_;
  ir::Batch batch_;
  ir::Outputs outputs_;
  std::vector<ir::DeviceRows> device_rows_;
  ir::DeviceRows feature_source_;
  std::vector<uint32_t> feature_first_;
};

}  // namespace tandem::decode
