// Ops over picked rows (graph.h): PickRows gathers them; Argmax, TopK and Sample choose tokens from
// logits rows exactly as engine/ir/sampling.h defines, writing ids as u32 bits into the f32 arena.
#include <cstring>

#include "engine/cpu/ops_impl.h"
#include "engine/ir/sampling.h"

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

}  // namespace tandem::cpu
