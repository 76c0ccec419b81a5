// Index buffer layout and filling.
#include "engine/cuda/index_impl.h"

#include "kernels/args.cuh"

namespace tandem::cuda {

IndexLayout IndexLayout::for_bucket(const ir::Bucket& b) {
  IndexLayout l;
  l.tiles_max = (b.tokens + kernels::kTileRows - 1) / kernels::kTileRows + b.seqs;
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
  l.mcu = take(size_t{b.seqs} + 1);
  l.mrow = take(b.markers);
  l.qtype = take(b.seqs);
  l.tiles = take(l.tiles_max);
  at = (at + 3) / 4 * 4;  // spans are read as 16-byte vectors
  l.spans = take(size_t{4} * l.tiles_max);
  l.words = at;
  return l;
}

// INVARIANT: w holds l.words u32, and the batch fits the bucket l was made for (the executor chose the
// bucket, ir::check validated the batch), so every index below stays inside its table.
void fill_index(const IndexLayout& l, const ir::Batch& batch, uint32_t* w) {
  const uint32_t seqs = batch.seqs();
  uint32_t tiles = 0;
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
    for (uint32_t m = batch.mcu[s]; m < batch.mcu[s + 1]; ++m) w[l.mrow + m] = lo + batch.markers[m];
    w[l.qtype + s] = batch.qtype[s];
  }
  for (uint32_t r = 0; r < batch.tokens(); ++r) w[l.ids + r] = batch.ids[r];
  for (uint32_t s = 0; s <= seqs && !batch.cu.empty(); ++s) {
    w[l.cu + s] = batch.cu[s];
    w[l.mcu + s] = batch.mcu[s];
  }
  if (batch.cu.empty()) {  // the empty batch: one sequence boundary at 0 keeps cu/mcu well formed
    w[l.cu] = 0;
    w[l.mcu] = 0;
  }
  w[0] = batch.tokens();
  w[1] = seqs;
  w[2] = batch.num_markers();
  w[kernels::kHeaderTiles] = tiles;
  for (uint32_t i = kernels::kHeaderTiles + 1; i < kernels::kHeaderWords; ++i) w[i] = 0;
}

}  // namespace tandem::cuda
