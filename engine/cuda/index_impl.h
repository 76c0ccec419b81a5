// The per-plan index buffer (scorer.md §3): the batch's tables as u32 words, copied to the device once
// per run in one block and sized for the bucket; attention tiles are anchored at sequence starts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"

// Layout: header [tokens, seqs, markers, attention tiles, 0...] (kernels/args.cuh), then ids[T],
// pos[T], seq[T], cu[S+1], mcu[S+1], mrow[M] (cu[s] + marker), qtype[S], tiles[⌈T/64⌉ + S] (each
// sequence's every 64th row), then at a multiple of 4 words spans[tiles][4]: each tile's first row, its
// sequence's start and end rows and the position of the start (one 16-byte read gives a block its tile).
namespace tandem::cuda {

struct IndexLayout {
  size_t ids = 0, pos = 0, seq = 0, cu = 0, mcu = 0, mrow = 0, qtype = 0, tiles = 0, spans = 0;
  size_t words = 0;
  uint32_t tiles_max = 0;  // attention tiles the bucket can need: ⌈T/64⌉ + S

  static IndexLayout for_bucket(const ir::Bucket& bucket);
};

// Fills `words` (layout.words u32) for a batch the bucket holds; words past the batch's counts are left
// as they are, since no kernel reads them.
void fill_index(const IndexLayout& layout, const ir::Batch& batch, uint32_t* words);

}  // namespace tandem::cuda
