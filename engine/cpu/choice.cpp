// Ops over picked rows (graph.h): PickRows gathers them; Argmax, TopK and Sample choose tokens from
// logits rows exactly as engine/ir/sampling.h defines, writing ids as u32 bits into the f32 arena;
// SelectorWalk walks each sequence's pick rows as engine/ir/selector.h defines; RejectSample judges each
// verify block as engine/ir/reject.h does.
#include <cstring>
#include <vector>

#include "engine/cpu/ops_impl.h"
#include "engine/ir/reject.h"
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

void sample(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t columns, ir::Stream stream, Mat out) {
  const uint32_t fill = stream == ir::Stream::kDraft ? 0 : 1;  // graph.h Sample
  for_rows(ex, batch.seqs(), 1, [&](size_t s) {
    const ir::SamplingParams params = batch.sampling.empty() ? ir::SamplingParams{} : batch.sampling[s];
    for (uint32_t p = batch.pcu[s]; p < batch.pcu[s + 1]; ++p) {
      const uint32_t position = batch.seq_start(static_cast<uint32_t>(s)) + batch.picks[p];
      ids_of(out, p)[0] = ir::sample_token({x.row(p), columns}, params, position + fill, stream);
    }
  });
}

void reject_sample(const Exec& ex, const ir::Batch& batch, Mat x, uint32_t columns, Mat ids) {
  for_rows(ex, batch.seqs(), 1, [&](size_t si) {
    const auto s = static_cast<uint32_t>(si);
    if (!batch.has_proposals(s)) return;
    // INVARIANT: ir::check saw every row of the sequence picked, one proposal row per draft (rows 1..),
    // f32 values and u32 candidates of the widths given, at host addresses (CpuBackend::check_run).
    const ir::ProposalRows& pr = batch.proposals[s];
    const ir::SamplingParams params = batch.sampling[s];
    const uint32_t n = batch.seq_len(s) - 1;
    std::vector<ir::Distribution> q(n);
    for (uint32_t i = 0; i < n; ++i) {
      const float* values = static_cast<const float*>(pr.values.data) + size_t{i} * pr.values.stride;
      if (pr.dense()) {
        q[i] = ir::tempered({values, pr.values.width}, params.temperature, 1.0f);
        continue;
      }
      const uint32_t* cand = static_cast<const uint32_t*>(pr.ids.data) + size_t{i} * pr.ids.stride;
      q[i].ids.assign(cand, cand + pr.values.width);
      q[i].probs.assign(values, values + pr.values.width);
    }
    const uint32_t p0 = batch.pcu[s];
    const std::span<const uint32_t> drafts(batch.ids.data() + batch.cu[s] + 1, n);
    const ir::RejectVerdict v = ir::reject_block({x.row(p0), size_t{n + 1} * x.width}, x.width, columns, drafts, q,
                                                 params, batch.seq_start(s));
    for (uint32_t i = 0; i <= n; ++i) ids_of(ids, p0 + i)[0] = i < v.committed.size() ? v.committed[i] : ir::kNoToken;
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
