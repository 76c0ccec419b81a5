// The quantized GEMM kernel (kernels/qgemm.cu, issue 14) through its launcher against a float64 reference
// over the dequantized weight: int8 and int4 codes, groups of 32/64/128, F16 and BF16 scales, 1, 3 and 16
// rows, the element-type variants and the epilogues; rows past the real count keep their sentinel.
#include <cmath>
#include <string>
#include <vector>

#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr ir::Bucket kBucket{32, 4, 8};

// One quantized matrix [cols, k] as the checkpoint stores it, and its codes as integers.
struct QuantCase {
  uint32_t cols = 0, k = 0, bits = 8, group = 32;
  bool bf16 = false;
  std::vector<int32_t> q;           // [cols, k]
  std::vector<uint8_t> codes;       // I8 [cols, k] or packed U8 [cols, k / 2]
  std::vector<uint16_t> scale_bits; // [cols, k / group]
  std::vector<float> scales;        // the same, exactly widened
};

QuantCase make_case(uint32_t cols, uint32_t k, uint32_t bits, uint32_t group, bool bf16, std::mt19937& rng) {
  QuantCase c{cols, k, bits, group, bf16, {}, {}, {}, {}};
  const int32_t lo = bits == 8 ? -127 : -8, hi = bits == 8 ? 127 : 7;
  std::uniform_int_distribution<int32_t> code(lo, hi);
  c.q.resize(size_t{cols} * k);
  for (int32_t& v : c.q) v = code(rng);
  for (uint32_t r = 0; r < cols; ++r) {
    for (uint32_t j = 0; j < k; j += (bits == 8 ? 1 : 2)) {
      const size_t at = size_t{r} * k + j;
      if (bits == 8) {
        c.codes.push_back(static_cast<uint8_t>(static_cast<int8_t>(c.q[at])));
      } else {
        c.codes.push_back(static_cast<uint8_t>((c.q[at] + 8) | ((c.q[at + 1] + 8) << 4)));
      }
    }
  }
  const float amax = bits == 8 ? 127.0f : 7.0f;
  std::vector<float> s = random_floats(size_t{cols} * (k / group), rng, 0.6f / amax);
  s[1] = 0.0f;  // an all-zero group
  c.scale_bits = bf16 ? to_bf16s(s) : to_halves(s);
  c.scales = bf16 ? from_bf16s(c.scale_bits) : from_halves(c.scale_bits);
  return c;
}

// y[b, j] = Σ_c x[b, c] · q[j, c] · s[j, c / group] in float64, and Σ |x · w| (the error scale).
void reference(const QuantCase& c, const std::vector<float>& x, uint32_t rows, std::vector<double>& y,
               std::vector<double>& mag) {
  y.assign(size_t{rows} * c.cols, 0.0);
  mag.assign(y.size(), 0.0);
  for (uint32_t b = 0; b < rows; ++b) {
    for (uint32_t j = 0; j < c.cols; ++j) {
      double sum = 0.0, m = 0.0;
      for (uint32_t i = 0; i < c.k; ++i) {
        const double w = double(c.q[size_t{j} * c.k + i]) * c.scales[size_t{j} * (c.k / c.group) + i / c.group];
        sum += double(x[size_t{b} * c.k + i]) * w;
        m += std::fabs(double(x[size_t{b} * c.k + i]) * w);
      }
      y[size_t{b} * c.cols + j] = sum;
      mag[size_t{b} * c.cols + j] = m;
    }
  }
}

struct QRun {
  Dt in = Dt::kF32, out = Dt::kF32;
  unsigned act = kernels::kActNone;
  bool accumulate = false;
  bool bias = false;
};

double act_f64(double v, unsigned act) {
  if (act == kernels::kActGelu) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  if (act == kernels::kActRelu) return v > 0.0 ? v : 0.0;
  return v;
}

// Runs the kernel on `rows` real rows and checks every output: |got − want| <= k·2^-23 · Σ|x·w| (f32
// accumulation in any order) + the output type's rounding; padding rows keep the sentinel.
void check(const QuantCase& c, uint32_t rows, const QRun& r, std::mt19937& rng, const std::string& what) {
  std::mt19937 brng(rows * 7919u + c.cols);
  ir::Batch batch = make_batch({rows}, {0}, 50, brng);
  const auto d = device_batch(batch, kBucket);
  const std::vector<float> x = rounded_to(random_floats(size_t{kBucket.tokens} * c.k, rng, 1.0f), r.in);
  const std::vector<float> bias = random_floats(c.cols, rng, 0.5f);
  std::vector<float> prior = rounded_to(random_floats(size_t{kBucket.tokens} * c.cols, rng, 1.0f), r.out);
  for (size_t i = size_t{rows} * c.cols; i < prior.size(); ++i) prior[i] = kSentinel;
  DeviceBuffer xd = typed_buffer(x, r.in);
  DeviceBuffer codes = to_device(c.codes);
  DeviceBuffer scales = to_device(c.scale_bits);
  DeviceBuffer bd = to_device(bias);
  DeviceBuffer yd = r.accumulate ? typed_buffer(prior, r.out) : sentinel_buffer(kBucket.tokens, c.cols, r.out);
  QuantWeight w;
  w.codes = codes.data();
  w.scales = scales.as<const uint16_t>();
  w.scale_bf16 = c.bf16;
  w.bits = c.bits;
  w.group = c.group;
  run_step(qgemm_step(d->ctx, make_loc(xd, ir::Rows::kTokens, c.k, r.in, "x"), w,
                      r.bias ? bd.as<const float>() : nullptr, r.act, r.accumulate,
                      make_loc(yd, ir::Rows::kTokens, c.cols, r.out, "y")));
  std::vector<double> want, mag;
  reference(c, x, rows, want, mag);
  const std::vector<float> got = read_floats(yd, size_t{kBucket.tokens} * c.cols, r.out);
  const double gamma = double(c.k) * std::ldexp(1.0, -23);
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t j = i % c.cols;
    double v = want[i] + (r.bias ? double(bias[j]) : 0.0);
    double bound = gamma * (mag[i] + (r.bias ? std::fabs(double(bias[j])) : 0.0));
    if (r.act == kernels::kActGelu) bound = 1.2 * bound + 1e-6;  // gelu' <= 1.13; erff's own error
    v = act_f64(v, r.act);
    if (r.accumulate) {
      bound += gamma * std::fabs(double(prior[i]));
      v += prior[i];
    }
    bound += storage_tolerance(r.out) * (1.0 + std::fabs(v));
    ASSERT_LE(std::fabs(double(got[i]) - v), bound)
        << what << ": row " << i / c.cols << " column " << j << " is " << got[i] << ", expected " << v;
  }
  for (size_t i = want.size(); i < got.size(); ++i) {
    ASSERT_EQ(got[i], kSentinel) << what << ": padding row " << i / c.cols << " column " << i % c.cols << " was written";
  }
}

class QGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(20260101);
  }
  std::mt19937 rng_;
};

// 40 columns (a partial block of warps), k = 256: every group size and scale type, at 1, 3 and 16 rows.
TEST_F(QGemmTest, Int8AndInt4MatchTheFloat64DequantizedReference) {
  for (uint32_t bits : {8u, 4u}) {
    for (uint32_t group : {32u, 64u, 128u}) {
      for (bool bf16 : {false, true}) {
        const QuantCase c = make_case(40, 256, bits, group, bf16, rng_);
        for (uint32_t rows : {1u, 3u, 16u}) {
          check(c, rows, QRun{}, rng_,
                fmt::format("int{} group {} {} scales, {} rows", bits, group, bf16 ? "bf16" : "f16", rows));
        }
      }
    }
  }
}

// Rows beyond one tile of kQGemmRows (the grid's second dimension) and the most rows a block serves.
TEST_F(QGemmTest, ManyRowTiles) {
  const QuantCase c = make_case(24, 128, 4, 64, false, rng_);
  for (uint32_t rows : {9u, 32u}) check(c, rows, QRun{}, rng_, fmt::format("int4, {} rows", rows));
}

// Every element-type variant, the bias and activations, and accumulation into the output.
TEST_F(QGemmTest, TypesAndEpilogues) {
  const QuantCase c8 = make_case(16, 128, 8, 32, true, rng_);
  const QuantCase c4 = make_case(16, 128, 4, 128, false, rng_);
  const std::pair<Dt, Dt> types[] = {{Dt::kF32, Dt::kF32}, {Dt::kF16, Dt::kF16}, {Dt::kF16, Dt::kF32},
                                     {Dt::kF32, Dt::kF16}, {Dt::kBF16, Dt::kBF16}, {Dt::kBF16, Dt::kF32},
                                     {Dt::kF32, Dt::kBF16}};
  for (const auto& [in, out] : types) {
    for (const QuantCase* c : {&c8, &c4}) {
      const std::string what = fmt::format("int{} {} -> {}", c->bits, dt_name(in), dt_name(out));
      check(*c, 5, QRun{in, out, kernels::kActNone, false, true}, rng_, what + " bias");
      check(*c, 5, QRun{in, out, kernels::kActGelu, false, true}, rng_, what + " bias gelu");
      check(*c, 5, QRun{in, out, kernels::kActRelu, false, false}, rng_, what + " relu");
      check(*c, 5, QRun{in, out, kernels::kActNone, true, true}, rng_, what + " accumulate");
    }
  }
}

TEST_F(QGemmTest, RefusesGroupsTheKernelCannotRead) {
  std::mt19937 brng(3);
  const auto d = device_batch(make_batch({2}, {0}, 50, brng), kBucket);
  DeviceBuffer xd = to_device(std::vector<float>(size_t{kBucket.tokens} * 64, 0.0f));
  DeviceBuffer yd = to_device(std::vector<float>(size_t{kBucket.tokens} * 8, 0.0f));
  DeviceBuffer codes = to_device(std::vector<uint8_t>(8 * 64, 0));
  DeviceBuffer scales = to_device(std::vector<uint16_t>(8 * 4, 0));
  QuantWeight w;
  w.codes = codes.data();
  w.scales = scales.as<const uint16_t>();
  w.bits = 8;
  w.group = 16;
  const auto step = qgemm_step(d->ctx, make_loc(xd, ir::Rows::kTokens, 64, Dt::kF32, "x"), w, nullptr,
                               kernels::kActNone, false, make_loc(yd, ir::Rows::kTokens, 8, Dt::kF32, "y"));
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().message(),
            "qgemm: 'x' (tokens × 64 f32) into 'y' (tokens × 8 f32) (int8 codes, groups of 16): bits 8 or 4, a group "
            "that is a multiple of 32 and divides k");
}

}  // namespace
}  // namespace tandem::cuda::test
