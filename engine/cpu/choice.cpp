// Ops over picked rows (graph.h): PickRows gathers them; Argmax, TopK and Sample choose tokens from
// logits rows exactly as engine/ir/sampling.h defines, writing ids as u32 bits into the f32 arena;
// SelectorWalk walks each sequence's pick rows as engine/ir/selector.h defines.
#include <cstring>
#include <vector>

#include "engine/cpu/ops_impl.h"
#include "engine/ir/sampling.h"
#include "engine/ir/selector.h"

namespace tandem::cpu {
namespace {

// INVARIANT: u32 values occupy their arena slots exactly as f32 ones do (4 bytes per element).
uint32_t* ids_of(Mat m, size_t r) { return reinterpret_cast<uint32_t*>(m.row(r)); }

}  // namespace

void pick_rows(const ir::Batch& batch, Mat h, Mat out) {
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    for (uint32_t p = batch.pcu[s]; p < batch.pcu[s + 1]; ++p) {
      std::memcpy(out.row(p), h.row(batch.cu[s] + batch.picks[p]), size_t{h.width} * sizeof(float));
    }
  }
}

void argmax(const Exec& ex, Mat x, uint32_t columns, Mat out) {
  for_rows(ex, x.rows, 4, [&](size_t r) { ids_of(out, r)[0] = ir::argmax({x.row(r), columns}); });
}

void top_k(const Exec& ex, Mat x, uint32_t columns, uint32_t k, Mat ids, Mat values) {
  for_rows(ex, x.rows, 4, [&](size_t r) {
    ir::top_k({x.row(r), columns}, k, {ids_of(ids, r), k}, {values.row(r), k});
  });
}

void sample(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t columns, Mat out) {
  for_rows(ex, batch.seqs(), 1, [&](size_t s) {
    const ir::SamplingParams params = batch.sampling.empty() ? ir::SamplingParams{} : batch.sampling[s];
    for (uint32_t p = batch.pcu[s]; p < batch.pcu[s + 1]; ++p) {
      const uint32_t position = batch.seq_start(static_cast<uint32_t>(s)) + batch.picks[p];
      ids_of(out, p)[0] = ir::sample_token({x.row(p), columns}, params, position + 1);
    }
  });
}

void selector_walk(const Exec& ex, const ir::Batch& batch, Mat cand, Mat values, Mat sel, const float* pred,
                   const float* succ, float softcap, float multiplier, Mat ids, Mat q) {
  const uint32_t k = cand.width, rank = sel.width;
  for_rows(ex, batch.seqs(), 1, [&](size_t s) {
    const ir::SamplingParams params = batch.sampling.empty() ? ir::SamplingParams{} : batch.sampling[s];
    std::vector<double> energy(k), probs(k);
    // INVARIANT: the first token and every candidate are below the codebooks' rows (the drafter checks
    // the anchor against its vocabulary; candidates come from a TopK over at most that many columns).
    uint32_t prev = batch.ids[batch.cu[s]];
    for (uint32_t p = batch.pcu[s]; p < batch.pcu[s + 1]; ++p) {
      const uint32_t* c = ids_of(cand, p);
      const std::span<const float> pred_row(pred + size_t{prev} * rank, size_t{rank}), sel_row(sel.row(p), size_t{rank});
      for (uint32_t j = 0; j < k; ++j) {
        const std::span<const float> succ_row(succ + size_t{c[j]} * rank, size_t{rank});
        energy[j] = ir::selector_energy(values.row(p)[j], pred_row, sel_row, succ_row, softcap, multiplier);
      }
      const uint32_t position = batch.seq_start(static_cast<uint32_t>(s)) + batch.picks[p];
      const uint32_t pick = ir::selector_pick(energy, params.temperature, params.seed, position, probs);
      for (uint32_t j = 0; j < k; ++j) q.row(p)[j] = static_cast<float>(probs[j]);
      prev = c[pick];
      ids_of(ids, p)[0] = prev;
    }
  });
}

}  // namespace tandem::cpu
