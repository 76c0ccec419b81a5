// Embedding lookup (scorer.md §2 Embed): out[r] = table[ids[r]], one block per token row.
#include "prelude.cuh"

using namespace tandem::kernels;

extern "C" __global__ void __launch_bounds__(256) embed_f32_f32(EmbedArgs a) {
  enter_grid();
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsTokens)) return;
  // INVARIANT: row < the real tokens <= bucket rows of out; ids < vocab (ir::check) index the table.
  const float* src = a.table + static_cast<unsigned long long>(a.ids[row]) * a.width;
  float* dst = a.out + static_cast<unsigned long long>(row) * a.width;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) dst[c] = src[c];
}
