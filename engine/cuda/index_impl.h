// The per-plan index buffer (scorer.md §3): the batch's tables as u32 words, copied to the device once
// per run in one block and sized for the bucket; attention tiles are anchored at sequence starts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "kernels/args.cuh"

// Layout: header [tokens, seqs, picks, attention tiles, 0...] (kernels/args.cuh), then ids[T],
// pos[T], seq[T], cu[S+1], pcu[S+1], prow[P] (cu[s] + pick), qtype[S], tiles[⌈T/64⌉ + S] (each
// sequence's every 64th row), then at a multiple of 4 words spans[tiles][4]: each tile's first row, its
// sequence's start and end rows and the position of the start (one 16-byte read gives a block its tile).
// Decoder tables follow: start[S] (absolute position of each sequence's first row), slot[S],
// sampling[S][4] (temperature and top_p as f32 bits, the seed's low and high words), qtiles[⌈T/16⌉ + S]
// (each sequence's every 16th row: the decoder attention's query tiles), and at a multiple of 2 words
// caches[C] (kernels::CacheTable: the bound State's K and V addresses per cache), then Input's feature
// source (kernels::kFeatWords: address, stride, storage) and feat_rows[T] (each token's source row), then
// proposals[S][kernels::kProposalWords] (RejectSample's proposal rows of each sequence).
namespace tandem::cuda {

struct IndexLayout {
  size_t ids = 0, pos = 0, seq = 0, cu = 0, pcu = 0, prow = 0, qtype = 0, tiles = 0, spans = 0;
  size_t start = 0, slot = 0, sampling = 0, qtiles = 0, caches = 0, features = 0, feat_rows = 0, proposals = 0;
  size_t words = 0;
  uint32_t tiles_max = 0;   // attention tiles the bucket can need: ⌈T/64⌉ + S
  uint32_t qtiles_max = 0;  // decoder query tiles: ⌈T/16⌉ + S
  uint32_t cache_count = 0;

  static IndexLayout for_bucket(const ir::Bucket& bucket, uint32_t caches = 0);
};

// The State a decoder run binds: its caches' device addresses and positions per slot.
struct BoundCaches {
  const kernels::CacheTable* table = nullptr;  // cache_count entries
  uint32_t capacity = 0;
};

// Fills `words` (layout.words u32) for a batch the bucket holds; words past the batch's counts are left
// as they are, since no kernel reads them.
void fill_index(const IndexLayout& layout, const ir::Batch& batch, uint32_t* words, const BoundCaches& caches = {});

// Input's feature source for the batch: its device rows (Batch::feature_rows of feature_source), or
// `staging`, the plan's device copy of its host rows (f32, `width` apart, token r at row r).
void fill_features(const IndexLayout& layout, const ir::Batch& batch, uint32_t* words, const void* staging,
                   uint32_t width);

// RejectSample's proposal rows of each sequence (Batch::proposals; kProposalNone where it has none).
void fill_proposals(const IndexLayout& layout, const ir::Batch& batch, uint32_t* words);

}  // namespace tandem::cuda
