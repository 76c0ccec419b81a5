// The tensor-core layout of quantized codes (qgemm_layout.h).
#include "engine/cuda/qgemm_layout.h"

namespace tandem::cuda {
namespace {

// Where each destination code comes from within a lane's 8 codes of one chunk (destination position ->
// source k offset): the kernel's decode pairs positions (j, j + 4) for int4 and bytes (0, 2), (1, 3) of each
// word for int8, and each pair must be two consecutive k.
constexpr uint32_t kInt4From[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr uint32_t kInt8From[8] = {0, 2, 1, 3, 4, 6, 5, 7};

uint32_t nibble(const uint8_t* p, uint32_t i) { return (p[i / 2] >> (4 * (i % 2))) & 0xfu; }

}  // namespace

Result<std::vector<uint8_t>> pack_qgemm_tc_codes(std::span<const uint8_t> codes, uint32_t cols, uint32_t k,
                                                 uint32_t bits) {
  if (bits != 8 && bits != 4) return Error::make(ErrorKind::kInvalidArgument, "packing int{} codes: 8 or 4 bits", bits);
  const uint32_t per = qgemm_tc_pack_chunks(bits);
  if (!qgemm_tc_packable(k, bits)) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "packing int{} codes: k {} is not a multiple of {} (the 16-byte words of the tensor-core "
                       "layout hold {} chunks of 32)",
                       bits, k, 32 * per, per);
  }
  const size_t row_bytes = size_t{k} * bits / 8;
  if (codes.size() != size_t{cols} * row_bytes) {
    return Error::make(ErrorKind::kInvalidArgument, "packing int{} codes: {} bytes for {} columns of k {} ({} expected)",
                       bits, codes.size(), cols, k, size_t{cols} * row_bytes);
  }
  const uint32_t lane_bytes = 8 * bits / 8;  // a lane's 8 codes of one chunk
  std::vector<uint8_t> out(codes.size(), 0);
  for (uint32_t col = 0; col < cols; ++col) {
    const uint8_t* src = codes.data() + col * row_bytes;
    uint8_t* dst = out.data() + col * row_bytes;
    for (uint32_t c = 0; c < k / 32; ++c) {
      for (uint32_t t = 0; t < 4; ++t) {
        const uint8_t* from = src + size_t{c} * 32 * bits / 8 + size_t{t} * lane_bytes;
        uint8_t* to = dst + (size_t{c / per} * 4 + t) * 16 + (c % per) * lane_bytes;
        if (bits == 8) {
          for (uint32_t i = 0; i < 8; ++i) to[i] = from[kInt8From[i]];
        } else {
          for (uint32_t i = 0; i < 8; ++i) to[i / 2] |= static_cast<uint8_t>(nibble(from, kInt4From[i]) << (4 * (i % 2)));
        }
      }
    }
  }
  return out;
}

}  // namespace tandem::cuda
