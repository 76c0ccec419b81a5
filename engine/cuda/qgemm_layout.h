// The tensor-core layout of quantized codes (kernels/args.cuh QGemmTcArgs::packed): the checkpoint's codes
// [cols, k · bits / 8] rearranged so that kernels/qgemm_tc.cu loads a lane's codes of 16 / bits chunks (32 k
// each) in one 16-byte word and its rows need no reordering. Host code: the layout is made once, at upload.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/result.h"

namespace tandem::cuda {

// Chunks (32 k) one 16-byte word of a lane holds: 4 for int4, 2 for int8.
constexpr uint32_t qgemm_tc_pack_chunks(uint32_t bits) { return 16 / bits; }

// Whether the layout holds codes of `bits` (8 or 4) over `k`: k a whole number of 16-byte words a lane.
constexpr bool qgemm_tc_packable(uint64_t k, uint32_t bits) {
  return (bits == 8 || bits == 4) && k != 0 && k % (32 * qgemm_tc_pack_chunks(bits)) == 0;
}

// Per column, per group of qgemm_tc_pack_chunks chunks, per lane t (0..3, k0 = 32c + 8t of each chunk): 16
// bytes, chunk by chunk, each chunk's 8 codes in the order the mma pairs them (int4: nibbles k0, k2, k4, k6, k1,
// k3, k5, k7 from the low one; int8: bytes k0, k2, k1, k3, k4, k6, k5, k7), so that the kernel's decode, which
// pairs nibble j with j + 4 and byte 0 with 2, 1 with 3, yields (k, k + 1) pairs. Refused, with the reason, for
// bits other than 8 and 4, k not a multiple of 32 · qgemm_tc_pack_chunks(bits), or a size that is not cols rows.
Result<std::vector<uint8_t>> pack_qgemm_tc_codes(std::span<const uint8_t> codes, uint32_t cols, uint32_t k,
                                                 uint32_t bits);

}  // namespace tandem::cuda
