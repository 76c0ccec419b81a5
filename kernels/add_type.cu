// Question-type embedding (scorer.md §2 AddType): h[r] += table[qtype[seq[r]]], in place, one block per
// token row.
#include "prelude.cuh"

using namespace tandem::kernels;

extern "C" __global__ void __launch_bounds__(256) add_type_f32_f32(AddTypeArgs a) {
  enter_grid();
  const unsigned row = blockIdx.x;
  if (row >= real_rows(a.n, kRowsTokens)) return;
  // INVARIANT: row < the real tokens; qtype < the table's rows (ir::check).
  const float* t = a.table + static_cast<unsigned long long>(a.qtype[a.seq[row]]) * a.width;
  float* h = a.h + static_cast<unsigned long long>(row) * a.width;
  for (unsigned c = threadIdx.x; c < a.width; c += blockDim.x) h[c] += t[c];
}
