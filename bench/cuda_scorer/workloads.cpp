#include "bench/cuda_scorer/workloads.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace tandem::bench {
namespace {

// A compat question: [CLS] question [SEP] ([MASK] option×3)×options [SEP] state [SEP], `len` tokens.
void add_question(ir::Batch& b, uint32_t len, uint32_t options, uint64_t& state) {
  std::vector<uint32_t> ids(len), markers;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<uint32_t>((state >> 33) % 50000);
  }
  ids[0] = 50281;
  for (uint32_t o = 0; o < options && 22 + 4 * o < len; ++o) {
    markers.push_back(22 + 4 * o);
    ids[22 + 4 * o] = 50284;
  }
  b.add_sequence(ids, markers, 0);
}

// Per-run overhead in token equivalents when splitting by cost (a run's fixed launch and copy time).
constexpr uint64_t kRunCostTokens = 256;

// The cheapest way to run the questions in order as consecutive batches: bucket tokens plus a fixed cost
// per run, the way the batcher splits work (scorer.md §2).
std::vector<std::pair<size_t, size_t>> split_by_cost(const std::vector<ir::Batch>& qs, const ir::BucketTable& table) {
  const size_t n = qs.size();
  std::vector<uint64_t> best(n + 1, UINT64_MAX);
  std::vector<size_t> from(n + 1, 0);
  best[0] = 0;
  for (size_t end = 1; end <= n; ++end) {
    uint32_t t = 0, m = 0;
    for (size_t begin = end; begin-- > 0;) {
      t += qs[begin].tokens();
      m += qs[begin].num_picks();
      auto bucket = table.smallest("compat", t, static_cast<uint32_t>(end - begin), m);
      if (!bucket.ok() || best[begin] == UINT64_MAX) continue;
      if (best[begin] + bucket->tokens + kRunCostTokens < best[end]) {
        best[end] = best[begin] + bucket->tokens + kRunCostTokens;
        from[end] = begin;
      }
    }
  }
  std::vector<std::pair<size_t, size_t>> parts;
  for (size_t end = n; end > 0; end = from[end]) parts.emplace_back(from[end], end);
  std::reverse(parts.begin(), parts.end());
  return parts;
}

ir::Batch join(const std::vector<ir::Batch>& qs, size_t begin, size_t end) {
  ir::Batch b;
  for (size_t i = begin; i < end; ++i) {
    b.add_sequence(qs[i].ids, qs[i].picks, qs[i].qtype[0]);
  }
  return b;
}

}  // namespace

Workloads make_workloads(bool tiny, const ir::BucketTable& table, const ir::Executor& exec) {
  Workloads w;
  uint64_t state = 7;
  w.w1_len = tiny ? 40 : 136;
  add_question(w.w1, w.w1_len, 4, state);
  std::vector<ir::Batch> w3q(10);
  w.w3_len = tiny ? 24 : 512;
  for (ir::Batch& q : w3q) add_question(q, w.w3_len, 4, state);
  w.w3 = join(w3q, 0, w3q.size());
  for (const auto& [b, e] : split_by_cost(w3q, table)) {
    w.w3_parts.push_back(join(w3q, b, e));
    auto bucket = exec.bucket_for(w.w3_parts.back());
    w.w3_split += (w.w3_split.empty() ? "" : " + ") + (bucket.ok() ? ir::to_string(*bucket) : std::string("?"));
  }
  const uint32_t question = tiny ? 32 : 128;  // the full buckets' question length
  for (uint32_t tokens : {512u, 1024u, 2048u, 4096u, 8192u, 16384u}) {
    if (tiny && tokens > 512) break;
    ir::Batch b;
    for (uint32_t s = 0; s < (tiny ? 128u : tokens) / question; ++s) add_question(b, question, 4, state);
    w.full.push_back(std::move(b));
  }
  const uint32_t serving_tokens = tiny ? 3 * w.w1_len : 4096;
  for (uint32_t s = 0; s < serving_tokens / w.w1_len; ++s) add_question(w.serving, w.w1_len, 4, state);
  return w;
}

Status run_parts(ir::Executor& exec, const std::vector<ir::Batch>& parts, ir::Outputs& out) {
  for (const ir::Batch& b : parts) TANDEM_TRY(exec.run(b, nullptr, out));
  return {};
}

}  // namespace tandem::bench
