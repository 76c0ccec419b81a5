// Packed varlen self-attention (graph.h Attention, scorer.md §2): per sequence and head, query i sees
// keys j of its own sequence with |i − j| <= window (all of them without a window). One task per
// (sequence, head); no task reads another sequence's rows.
#include <vector>

#include "engine/cpu/attention_core_impl.h"
#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {
namespace {

struct AttentionJob {
  const ir::Batch* batch;
  Mat qkv;
  uint32_t heads;
  uint32_t head_dim;
  std::optional<uint32_t> window;
  Mat out;
};

template <int L>
[[gnu::always_inline]] inline void attention_tasks(const AttentionJob& job, size_t begin, size_t end) {
  thread_local std::vector<float> kt;
  thread_local std::vector<float> vc;
  thread_local std::vector<float> scores;
  const size_t hd = job.head_dim;
  const float scale = attention_scale(hd);
  QueryBlock<L> block;
  for (size_t t = begin; t < end; ++t) {
    const uint32_t s = static_cast<uint32_t>(t / job.heads);
    const size_t h = t % job.heads;
    const size_t r0 = job.batch->cu[s];
    const size_t n = job.batch->seq_len(s);
    if (n == 0) continue;
    // Scratch only grows; each buffer is sized for what this task needs.
    kt.resize(std::max(kt.size(), padded_keys(n) * hd));
    vc.resize(std::max(vc.size(), n * hd));
    scores.resize(std::max(scores.size(), QueryBlock<L>::kMax * padded_keys(n)));
    const float* base = job.qkv.row(r0);
    transpose_keys(base + (job.heads + h) * hd, job.qkv.width, n, hd, kt.data());
    gather_rows(base + (2 * size_t{job.heads} + h) * hd, job.qkv.width, n, hd, vc.data());
    for (size_t i = 0; i < n; ++i) {
      size_t j0 = 0;
      size_t j1 = n;
      if (job.window) {
        j0 = i > *job.window ? i - *job.window : 0;
        j1 = std::min(n, i + *job.window + 1);
      }
      block.add(job.qkv.row(r0 + i) + h * hd, job.out.row(r0 + i) + h * hd, j0, j1);
      if (block.n == QueryBlock<L>::kMax || i + 1 == n) {
        attend<L>(block, kt.data(), n, vc.data(), hd, scale, scores.data());
      }
    }
  }
}

TANDEM_CPU_ISA_VARIANTS(run_attention_tasks, attention_tasks,
                        (const AttentionJob& job, size_t begin, size_t end), (job, begin, end))

}  // namespace

void attention(const Exec& ex, const ir::Batch& batch, Mat qkv, uint32_t heads, uint32_t head_dim,
               std::optional<uint32_t> window, Mat out) {
  const AttentionJob job{&batch, qkv, heads, head_dim, window, out};
  const auto fn = run_attention_tasks_for(ex.isa);
  ex.pool.parallel_for(size_t{batch.seqs()} * heads, 1, [&](size_t begin, size_t end) { fn(job, begin, end); });
}

}  // namespace tandem::cpu
