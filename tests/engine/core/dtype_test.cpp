// Exact f16/bf16 conversions: every half round-trips, rounding is to nearest even, and overflow, NaN and
// subnormals behave as IEEE 754 says.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "engine/core/dtype.h"

namespace tandem {
namespace {

TEST(Dtype, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
      continue;
    }
    EXPECT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

TEST(Dtype, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24)) << "smallest subnormal";
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  const float one_ulp = std::ldexp(1.0f, -10);
  EXPECT_EQ(float_to_half(1.0f + one_ulp / 2), 0x3c00) << "a tie goes to the even mantissa";
  EXPECT_EQ(float_to_half(1.0f + 3 * one_ulp / 2), 0x3c02) << "a tie goes to the even mantissa";
  EXPECT_EQ(float_to_half(1.0f + one_ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01) << "above the tie rounds up";
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00) << "rounds past 65504 to infinity";
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000) << "half the smallest subnormal ties to even (zero)";
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
}

TEST(Dtype, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80) << "tie to even";
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82) << "tie to even";
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  const uint16_t h[3] = {0x3c00, 0xc000, 0x0000};
  float out[3];
  convert_to_f32(DType::kF16, h, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.0f);
  convert_to_f32(DType::kBF16, nullptr, 0, nullptr);  // empty: must not touch the pointers
}

}  // namespace
}  // namespace tandem
