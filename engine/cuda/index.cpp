// Index buffer layout and filling.
#include "engine/cuda/index_impl.h"

#include <cstring>

#include "kernels/args.cuh"

namespace tandem::cuda {

IndexLayout IndexLayout::for_bucket(const ir::Bucket& b, uint32_t caches) {
  IndexLayout l;
  l.tiles_max = (b.tokens + kernels::kTileRows - 1) / kernels::kTileRows + b.seqs;
  l.qtiles_max = (b.tokens + kernels::kQTileRows - 1) / kernels::kQTileRows + b.seqs;
  l.cache_count = caches;
  size_t at = kernels::kHeaderWords;
  auto take = [&at](size_t n) {
    const size_t here = at;
    at += n;
    return here;
  };
  l.ids = take(b.tokens);
  l.pos = take(b.tokens);
  l.seq = take(b.tokens);
  l.cu = take(size_t{b.seqs} + 1);
  l.pcu = take(size_t{b.seqs} + 1);
  l.prow = take(b.picks);
  l.qtype = take(b.seqs);
  l.tiles = take(l.tiles_max);
  at = (at + 3) / 4 * 4;  // spans are read as 16-byte vectors
  l.spans = take(size_t{4} * l.tiles_max);
  l.start = take(b.seqs);
  l.slot = take(b.seqs);
  l.sampling = take(size_t{4} * b.seqs);
  l.qtiles = take(l.qtiles_max);
  at = (at + 1) / 2 * 2;  // 8-byte addresses
  l.caches = take(size_t{4} * caches);
  l.features = take(kernels::kFeatWords);
  l.feat_rows = take(b.tokens);
  l.proposals = take(size_t{kernels::kProposalWords} * b.seqs);
  l.words = at;
  return l;
}

// INVARIANT: w holds l.words u32, and the batch fits the bucket l was made for (the executor chose the
// bucket, ir::check validated the batch), so every index below stays inside its table.
void fill_index(const IndexLayout& l, const ir::Batch& batch, uint32_t* w, const BoundCaches& caches) {
  const uint32_t seqs = batch.seqs();
  uint32_t tiles = 0, qtiles = 0;
  for (uint32_t s = 0; s < seqs; ++s) {
    const uint32_t lo = batch.cu[s], hi = batch.cu[s + 1];
    const uint32_t start = batch.seq_start(s);
    for (uint32_t r = lo; r < hi; ++r) {
      w[l.pos + r] = start + (r - lo);
      w[l.seq + r] = s;
    }
    for (uint32_t r = lo; r < hi; r += kernels::kTileRows) {
      uint32_t* span = w + l.spans + size_t{4} * tiles;
      span[0] = r;
      span[1] = lo;
      span[2] = hi;
      span[3] = start;
      w[l.tiles + tiles++] = r;
    }
    for (uint32_t m = batch.pcu[s]; m < batch.pcu[s + 1]; ++m) w[l.prow + m] = lo + batch.picks[m];
    w[l.qtype + s] = batch.qtype[s];
    for (uint32_t r = lo; r < hi; r += kernels::kQTileRows) w[l.qtiles + qtiles++] = r;
    w[l.start + s] = start;
    w[l.slot + s] = batch.seq_slot(s);
    const ir::SamplingParams p = batch.sampling.empty() ? ir::SamplingParams{} : batch.sampling[s];
    uint32_t* sp = w + l.sampling + size_t{4} * s;
    std::memcpy(&sp[0], &p.temperature, 4);
    std::memcpy(&sp[1], &p.top_p, 4);
    sp[2] = static_cast<uint32_t>(p.seed);
    sp[3] = static_cast<uint32_t>(p.seed >> 32);
  }
  for (uint32_t r = 0; r < batch.tokens(); ++r) w[l.ids + r] = batch.ids[r];
  for (uint32_t s = 0; s <= seqs && !batch.cu.empty(); ++s) {
    w[l.cu + s] = batch.cu[s];
    w[l.pcu + s] = batch.pcu[s];
  }
  if (batch.cu.empty()) {  // the empty batch: one sequence boundary at 0 keeps cu/pcu well formed
    w[l.cu] = 0;
    w[l.pcu] = 0;
  }
  w[0] = batch.tokens();
  w[1] = seqs;
  w[2] = batch.num_picks();
  w[kernels::kHeaderTiles] = tiles;
  w[kernels::kHeaderCapacity] = caches.capacity;
  w[kernels::kHeaderQTiles] = qtiles;
  for (uint32_t i = kernels::kHeaderQTiles + 1; i < kernels::kHeaderWords; ++i) w[i] = 0;
  // INVARIANT: l.caches is 2-word aligned and holds cache_count CacheTable entries (for_bucket).
  if (caches.table != nullptr) std::memcpy(w + l.caches, caches.table, l.cache_count * sizeof(kernels::CacheTable));
}

void fill_features(const IndexLayout& l, const ir::Batch& batch, uint32_t* w, const void* staging, uint32_t width) {
  const bool device = batch.device_features();
  const void* data = device ? batch.feature_source.data : staging;
  const auto address = reinterpret_cast<uintptr_t>(data);
  uint32_t* src = w + l.features;
  src[0] = static_cast<uint32_t>(address);
  src[1] = static_cast<uint32_t>(static_cast<uint64_t>(address) >> 32);
  src[2] = device ? batch.feature_source.stride : width;
  src[3] = kernels::kFeatF32;
  if (device) {
    switch (batch.feature_source.storage) {
      case ir::Storage::kF16: src[3] = kernels::kFeatF16; break;
      case ir::Storage::kBF16: src[3] = kernels::kFeatBF16; break;
      case ir::Storage::kF32:
      case ir::Storage::kU32: break;  // u32 sources are refused by ir::check and CudaPlan::check_batch
    }
  }
  for (uint32_t r = 0; r < batch.tokens(); ++r) w[l.feat_rows + r] = device ? batch.feature_rows[r] : r;
}

namespace {

void put_address(uint32_t* w, const void* data) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  w[0] = static_cast<uint32_t>(address);
  w[1] = static_cast<uint32_t>(static_cast<uint64_t>(address) >> 32);
}

}  // namespace

void fill_proposals(const IndexLayout& l, const ir::Batch& batch, uint32_t* w) {
  // INVARIANT: w holds l.words u32 and the batch fits the bucket l was made for, so each sequence's
  // kProposalWords lie inside the table; the addresses are the batch's own (CudaPlan::check_batch).
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    uint32_t* p = w + l.proposals + size_t{kernels::kProposalWords} * s;
    std::memset(p, 0, kernels::kProposalWords * sizeof(uint32_t));
    if (!batch.has_proposals(s)) continue;
    const ir::ProposalRows& r = batch.proposals[s];
    put_address(p, r.values.data);
    p[2] = r.values.stride;
    p[3] = r.values.width;
    if (!r.dense()) {
      put_address(p + 4, r.ids.data);
      p[6] = r.ids.stride;
    }
    p[7] = r.dense() ? kernels::kProposalDense : kernels::kProposalSparse;
  }
}

}  // namespace tandem::cuda
