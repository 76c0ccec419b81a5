// KV-cache ops (graph.h CacheAppend, CacheAttention; dflash.md §1.4-1.5): rows write their K/V at
// (their sequence's slot, their absolute position), then attend over the slot's cache. Causal rows see
// positions <= their own; block rows see every position < start + rows; a window keeps
// |q_pos − k_pos| < window. GQA: q_heads / kv_heads query heads share one key head.
#include <cstring>
#include <vector>

#include "engine/cpu/attention_core_impl.h"
#include "engine/cpu/ops_impl.h"

namespace tandem::cpu {

void cache_append(const ir::Batch& batch, Mat k, Mat v, const CacheView& cache) {
  const size_t bytes = size_t{cache.width} * sizeof(float);
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    const uint32_t start = batch.seq_start(s);
    const uint32_t slot = batch.seq_slot(s);
    for (uint32_t i = 0; i < batch.seq_len(s); ++i) {
      const size_t at = cache.offset(slot, start + i);
      std::memcpy(cache.k + at, k.row(batch.cu[s] + i), bytes);
      std::memcpy(cache.v + at, v.row(batch.cu[s] + i), bytes);
    }
  }
}

namespace {

struct CacheAttentionJob {
  const ir::Batch* batch;
  Mat q;
  CacheView cache;
  uint32_t q_heads;
  uint32_t kv_heads;
  uint32_t head_dim;
  bool causal;
  std::optional<uint32_t> window;
  Mat out;
};

// Key positions [lo, hi) that the query at `pos` sees, for a sequence whose rows end at `end`.
struct KeyRange {
  size_t lo;
  size_t hi;
};
inline KeyRange key_range(const CacheAttentionJob& job, size_t pos, size_t end) {
  KeyRange r{0, job.causal ? pos + 1 : end};
  if (job.window) {
    const size_t w = *job.window;
    r.lo = pos + 1 > w ? pos + 1 - w : 0;
    r.hi = std::min(r.hi, pos + w);
  }
  return r;
}

template <int L>
[[gnu::always_inline]] inline void cache_attention_tasks(const CacheAttentionJob& job, size_t begin, size_t end) {
  thread_local std::vector<float> kt;
  thread_local std::vector<float> vc;
  thread_local std::vector<float> scores;
  const size_t hd = job.head_dim;
  const size_t group = job.q_heads / job.kv_heads;
  const float scale = attention_scale(hd);
  QueryBlock<L> block;
  for (size_t t = begin; t < end; ++t) {
    const uint32_t s = static_cast<uint32_t>(t / job.kv_heads);
    const size_t g = t % job.kv_heads;
    const size_t n = job.batch->seq_len(s);
    if (n == 0) continue;
    const size_t r0 = job.batch->cu[s];
    const size_t start = job.batch->seq_start(s);
    const uint32_t slot = job.batch->seq_slot(s);
    // Keys every row of the sequence may see: from the first row's lower bound to the sequence's end.
    const size_t k_lo = key_range(job, start, start + n).lo;
    const size_t count = start + n - k_lo;
    // Scratch only grows; each buffer is sized for what this task needs.
    kt.resize(std::max(kt.size(), padded_keys(count) * hd));
    vc.resize(std::max(vc.size(), count * hd));
    scores.resize(std::max(scores.size(), QueryBlock<L>::kMax * padded_keys(count)));
    const size_t at = job.cache.offset(slot, static_cast<uint32_t>(k_lo)) + g * hd;
    transpose_keys(job.cache.k + at, job.cache.width, count, hd, kt.data());
    gather_rows(job.cache.v + at, job.cache.width, count, hd, vc.data());
    for (size_t h = g * group; h < (g + 1) * group; ++h) {
      for (size_t i = 0; i < n; ++i) {
        const KeyRange r = key_range(job, start + i, start + n);
        block.add(job.q.row(r0 + i) + h * hd, job.out.row(r0 + i) + h * hd, std::max(r.lo, k_lo) - k_lo,
                  std::max(r.hi, k_lo) - k_lo);
        if (block.n == QueryBlock<L>::kMax) attend<L>(block, kt.data(), count, vc.data(), hd, scale, scores.data());
      }
    }
    if (block.n > 0) attend<L>(block, kt.data(), count, vc.data(), hd, scale, scores.data());
  }
}

TANDEM_CPU_ISA_VARIANTS(run_cache_attention_tasks, cache_attention_tasks,
                        (const CacheAttentionJob& job, size_t begin, size_t end), (job, begin, end))

}  // namespace

void cache_attention(const Exec& ex, const ir::Batch& batch, Mat q, const CacheView& cache, uint32_t q_heads,
                     uint32_t kv_heads, uint32_t head_dim, bool causal, std::optional<uint32_t> window,
                     Mat out) {
  const CacheAttentionJob job{&batch, q, cache, q_heads, kv_heads, head_dim, causal, window, out};
  const auto fn = run_cache_attention_tasks_for(ex.isa);
  ex.pool.parallel_for(size_t{batch.seqs()} * kv_heads, 1, [&](size_t begin, size_t end) { fn(job, begin, end); });
}

}  // namespace tandem::cpu
