// The quantized GEMM kernels (issue 14) through their launcher, each test on four paths: CUDA cores
// (kernels/qgemm.cu), tensor cores (kernels/qgemm_tc.cu) and tensor cores on codes in the tensor-core layout
// (engine/cuda/qgemm_layout.h; k it cannot hold is refused), in the sliced and the whole-K mapping. Against a
// float64 reference over the dequantized weight: int8 and int4 codes, groups of 32/64/128, F16 and BF16 scales,
// 1 to 64 rows, every element-type variant and epilogue, K split into slices that cut groups; rows past the real
// count keep their sentinel, a row's bits do not depend on the row count, and the two mappings give the same
// bits.
#include <cmath>
#include <string>
#include <vector>

#include "engine/cuda/qgemm_layout.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr ir::Bucket kBucket{64, 4, 8};

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

// The error bound's factor on Σ|x·w|. Every product enters the sums exactly (codes are small integers and
// scales apply in FP32; the tensor cores multiply exact 16-bit operands, an FP32 x split exactly into three
// bf16 levels), so the error is the FP32 additions': at most one 2^-23 (an ulp: the tensor cores align
// by truncating) of the running magnitude each. CUDA cores: k additions. Tensor cores: levels · k inside the
// mmas, two per group (scale, accumulate), the slices; 2 · levels · k bounds them all.
double sum_bound(const QuantCase& c, Dt in, bool tensor_cores) {
  const double levels = in == Dt::kF32 ? 3.0 : 1.0;
  return (tensor_cores ? 2.0 * levels : 1.0) * double(c.k) * std::ldexp(1.0, -23);
}

// Runs the kernel on `rows` real rows and checks every output: |got − want| <= sum_bound · Σ|x·w| + the
// output type's rounding; padding rows keep the sentinel. Returns the outputs of the real rows.
// The kernels under test: CUDA cores and tensor cores on the checkpoint's codes, and tensor cores on the same
// codes in the tensor-core layout (qgemm_layout.h).
enum class Path { kCudaCores, kTensorCores, kTensorCoresPacked, kTensorCoresWholeK };

bool packed_codes(Path p) { return p == Path::kTensorCoresPacked || p == Path::kTensorCoresWholeK; }

QGemmKernel kernel_of(Path p) {
  return p == Path::kCudaCores           ? QGemmKernel::kCudaCores
         : p == Path::kTensorCoresWholeK ? QGemmKernel::kTensorCoresWholeK
                                         : QGemmKernel::kTensorCores;
}

std::vector<float> check(const QuantCase& c, uint32_t rows, const QRun& r, std::mt19937& rng, const std::string& what,
                         Path path) {
  const bool tensor_cores = path != Path::kCudaCores;
  std::vector<uint8_t> code_bytes = c.codes;
  if (packed_codes(path)) {  // k the layout's words cannot hold is refused, named
    auto packed = pack_qgemm_tc_codes(c.codes, c.cols, c.k, c.bits);
    if (c.k % (32 * qgemm_tc_pack_chunks(c.bits)) != 0) {
      EXPECT_FALSE(packed.ok()) << what;
      if (!packed.ok()) {
        EXPECT_NE(packed.error().message().find("is not a multiple of"), std::string::npos) << what;
      }
      return {};
    }
    EXPECT_TRUE(packed.ok()) << what << ": " << packed.error().message();
    if (!packed.ok()) return {};
    code_bytes = std::move(packed).value();
  }
  std::mt19937 brng(rows * 7919u + c.cols);
  ir::Batch batch = make_batch({rows}, {0}, 50, brng);
  const auto d = device_batch(batch, kBucket);
  const std::vector<float> x = rounded_to(random_floats(size_t{kBucket.tokens} * c.k, rng, 1.0f), r.in);
  const std::vector<float> bias = random_floats(c.cols, rng, 0.5f);
  std::vector<float> prior = rounded_to(random_floats(size_t{kBucket.tokens} * c.cols, rng, 1.0f), r.out);
  for (size_t i = size_t{rows} * c.cols; i < prior.size(); ++i) prior[i] = kSentinel;
  DeviceBuffer xd = typed_buffer(x, r.in);
  DeviceBuffer codes = to_device(code_bytes);
  DeviceBuffer scales = to_device(c.scale_bits);
  DeviceBuffer bd = to_device(bias);
  DeviceBuffer yd = r.accumulate ? typed_buffer(prior, r.out) : sentinel_buffer(kBucket.tokens, c.cols, r.out);
  QuantWeight w;
  w.codes = codes.data();
  w.scales = scales.as<const uint16_t>();
  w.scale_bf16 = c.bf16;
  w.bits = c.bits;
  w.group = c.group;
  w.packed = packed_codes(path);
  run_step(qgemm_step(d->ctx, make_loc(xd, ir::Rows::kTokens, c.k, r.in, "x"), w,
                      r.bias ? bd.as<const float>() : nullptr, r.act, r.accumulate,
                      make_loc(yd, ir::Rows::kTokens, c.cols, r.out, "y"), kernel_of(path)));
  std::vector<double> want, mag;
  reference(c, x, rows, want, mag);
  const std::vector<float> got = read_floats(yd, size_t{kBucket.tokens} * c.cols, r.out);
  const double gamma = sum_bound(c, r.in, tensor_cores);
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
    EXPECT_LE(std::fabs(double(got[i]) - v), bound)
        << what << ": row " << i / c.cols << " column " << j << " is " << got[i] << ", expected " << v;
    if (!(std::fabs(double(got[i]) - v) <= bound)) return {};
  }
  for (size_t i = want.size(); i < got.size(); ++i) {
    EXPECT_EQ(got[i], kSentinel) << what << ": padding row " << i / c.cols << " column " << i % c.cols
                                 << " was written";
    if (got[i] != kSentinel) return {};
  }
  return std::vector<float>(got.begin(), got.begin() + static_cast<long>(want.size()));
}

class QGemmTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(20260101);
  }
  bool tensor_cores() const { return GetParam() != Path::kCudaCores; }
  std::vector<float> check(const QuantCase& c, uint32_t rows, const QRun& r, const std::string& what) {
    return test::check(c, rows, r, rng_, what, GetParam());
  }
  std::mt19937 rng_;
};

constexpr uint32_t kRowCounts[] = {1, 3, 8, 16, 17, 32, 64};

// 40 columns (a partial tile of 16 and a partial block of warps), k = 384 (the tensor cores split it in two
// slices of 192, which cut a group of 128): every group size and scale type at every row count.
TEST_P(QGemmTest, Int8AndInt4MatchTheFloat64DequantizedReference) {
  for (uint32_t bits : {8u, 4u}) {
    for (uint32_t group : {32u, 64u, 128u}) {
      for (bool bf16 : {false, true}) {
        const QuantCase c = make_case(40, 384, bits, group, bf16, rng_);
        for (uint32_t rows : kRowCounts) {
          check(c, rows, QRun{},
                fmt::format("int{} group {} {} scales, {} rows", bits, group, bf16 ? "bf16" : "f16", rows));
        }
      }
    }
  }
}

// k = 2048: the tensor cores' K split at its most (8 slices of 256), and k = 224 (7 chunks: one slice, a
// partial unroll); the CUDA cores' row tiles of kQGemmRows past the first.
TEST_P(QGemmTest, LongAndShortK) {
  for (uint32_t bits : {8u, 4u}) {
    const QuantCase lng = make_case(24, 2048, bits, 128, bits == 4, rng_);
    const QuantCase shrt = make_case(24, 224, bits, 32, bits == 8, rng_);
    for (uint32_t rows : {9u, 33u}) {
      check(lng, rows, QRun{}, fmt::format("int{} k 2048, {} rows", bits, rows));
      check(shrt, rows, QRun{}, fmt::format("int{} k 224, {} rows", bits, rows));
    }
  }
}

// Every element-type variant, the bias and activations, and accumulation into the output, in one row block
// and in two.
TEST_P(QGemmTest, TypesAndEpilogues) {
  const QuantCase c8 = make_case(16, 128, 8, 32, true, rng_);
  const QuantCase c4 = make_case(16, 128, 4, 128, false, rng_);
  const std::pair<Dt, Dt> types[] = {{Dt::kF32, Dt::kF32}, {Dt::kF16, Dt::kF16}, {Dt::kF16, Dt::kF32},
                                     {Dt::kF32, Dt::kF16}, {Dt::kBF16, Dt::kBF16}, {Dt::kBF16, Dt::kF32},
                                     {Dt::kF32, Dt::kBF16}};
  for (const auto& [in, out] : types) {
    for (const QuantCase* c : {&c8, &c4}) {
      for (uint32_t rows : {5u, 35u}) {
        const std::string what = fmt::format("int{} {} -> {}, {} rows", c->bits, dt_name(in), dt_name(out), rows);
        check(*c, rows, QRun{in, out, kernels::kActNone, false, true}, what + " bias");
        check(*c, rows, QRun{in, out, kernels::kActGelu, false, true}, what + " bias gelu");
        check(*c, rows, QRun{in, out, kernels::kActRelu, false, false}, what + " relu");
        check(*c, rows, QRun{in, out, kernels::kActNone, true, true}, what + " accumulate");
      }
    }
  }
}

// The same rows give the same bits whether the launch has 1, 17 or 64 of them (the determinism rule the
// decoder plans keep: the K split comes from the shape, never from the rows).
TEST_P(QGemmTest, RowBitsDoNotDependOnTheRowCount) {
  const QuantCase c = make_case(40, 512, 4, 64, false, rng_);
  for (const auto& [in, out] : {std::pair{Dt::kBF16, Dt::kBF16}, std::pair{Dt::kF32, Dt::kF32}}) {
    std::vector<std::vector<float>> got;
    for (uint32_t rows : {1u, 17u, 64u}) {
      rng_.seed(7);  // the same x for every row count
      got.push_back(check(c, rows, QRun{in, out, kernels::kActNone, false, true},
                          fmt::format("{} -> {}, {} rows", dt_name(in), dt_name(out), rows)));
      ASSERT_FALSE(got.back().empty());
    }
    for (size_t i = 0; i + 1 < got.size(); ++i) {
      for (size_t e = 0; e < got[i].size(); ++e) {
        ASSERT_EQ(got[i][e], got.back()[e]) << dt_name(in) << ": row " << e / c.cols << " column " << e % c.cols
                                            << " differs between " << got[i].size() / c.cols << " and 64 rows";
      }
    }
  }
}

// Lowers one qgemm of 8 columns over 64-wide FP32 rows (zeros: only the lowering is under test) with the
// codes `w` describes (its codes and scales are set here).
Result<KernelStep> lower_small(QuantWeight w, uint32_t k, QGemmKernel kernel) {
  std::mt19937 brng(3);
  const auto d = device_batch(make_batch({2}, {0}, 50, brng), kBucket);
  DeviceBuffer xd = to_device(std::vector<float>(size_t{kBucket.tokens} * k, 0.0f));
  DeviceBuffer yd = to_device(std::vector<float>(size_t{kBucket.tokens} * 8, 0.0f));
  DeviceBuffer codes = to_device(std::vector<uint8_t>(size_t{8} * k, 0));
  DeviceBuffer scales = to_device(std::vector<uint16_t>(size_t{8} * k / 16, 0));
  w.codes = codes.data();
  w.scales = scales.as<const uint16_t>();
  return qgemm_step(d->ctx, make_loc(xd, ir::Rows::kTokens, k, Dt::kF32, "x"), w, nullptr, kernels::kActNone, false,
                    make_loc(yd, ir::Rows::kTokens, 8, Dt::kF32, "y"), kernel);
}

TEST_P(QGemmTest, RefusesGroupsTheKernelCannotRead) {
  QuantWeight w;
  w.bits = 8;
  w.group = 16;
  const auto step = lower_small(w, 64, kernel_of(GetParam()));
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().message(),
            "qgemm: 'x' (tokens × 64 f32) into 'y' (tokens × 8 f32) (int8 codes, groups of 16): bits 8 or 4, a group "
            "that is a multiple of 32 and divides k");
}

// Codes in the tensor-core layout run on the tensor-core kernel only, with K slices of whole 16-byte words,
// and need k the words can hold.
TEST_P(QGemmTest, PackedCodesNeedTheTensorCoreKernel) {
  QuantWeight w;
  w.bits = 4;
  w.group = 32;
  w.packed = true;
  const auto step = lower_small(w, 384, kernel_of(GetParam()));
  if (tensor_cores()) {
    ASSERT_TRUE(step.ok()) << step.error().message();
    const auto& args = std::get<kernels::QGemmTcArgs>(step->args);
    EXPECT_EQ(args.packed, 1u);
    EXPECT_EQ(args.splits, 2u);
    EXPECT_EQ(args.slice_chunks, 8u);  // 12 chunks in two slices of 6, rounded up to whole words of 4 chunks
    EXPECT_EQ(step->id, GetParam() == Path::kTensorCoresWholeK ? KernelId::qgemm_tc_whole_k_f32_f32
                                                               : KernelId::qgemm_tc_f32_f32);
    const auto short_k = lower_small(w, 96, kernel_of(GetParam()));
    ASSERT_FALSE(short_k.ok());
    EXPECT_NE(short_k.error().message().find("need k a multiple of 128"), std::string::npos)
        << short_k.error().message();
  } else {
    ASSERT_FALSE(step.ok());
    EXPECT_NE(step.error().message().find("codes in the tensor-core layout need the tensor-core kernel"),
              std::string::npos)
        << step.error().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, QGemmTest,
                         ::testing::Values(Path::kCudaCores, Path::kTensorCores, Path::kTensorCoresPacked,
                                           Path::kTensorCoresWholeK),
                         [](const auto& p) {
                           return p.param == Path::kCudaCores           ? std::string("CudaCores")
                                  : p.param == Path::kTensorCores       ? std::string("TensorCores")
                                  : p.param == Path::kTensorCoresPacked ? std::string("TensorCoresPacked")
                                                                        : std::string("TensorCoresWholeK");
                         });

// The whole-K mapping against the sliced one on the same packed codes and rows: every output bit for bit, with
// K in 1, 2 and 8 slices (cutting groups), a partial tile and a partial block of tiles (40 and 136 columns),
// 1 to 64 rows (one and two row blocks, both fragment counts of the packed loop), 16-bit and FP32 rows.
TEST(QGemmWholeK, GivesTheSlicedMappingsBits) {
  TANDEM_REQUIRE_GPU();
  std::mt19937 rng(41);
  struct Shape {
    uint32_t cols, k, bits, group;
  };
  for (const Shape& sh : {Shape{40, 128, 4, 32}, Shape{136, 384, 4, 128}, Shape{40, 2048, 4, 64},
                          Shape{136, 512, 8, 64}}) {
    const QuantCase c = make_case(sh.cols, sh.k, sh.bits, sh.group, sh.bits == 8, rng);
    for (const auto& [in, out] : {std::pair{Dt::kBF16, Dt::kBF16}, std::pair{Dt::kF16, Dt::kF32},
                                  std::pair{Dt::kF32, Dt::kF32}}) {
      for (uint32_t rows : {1u, 13u, 32u, 45u, 64u}) {
        const std::string what = fmt::format("{} columns, k {}, int{}, {} -> {}, {} rows", sh.cols, sh.k, sh.bits,
                                             dt_name(in), dt_name(out), rows);
        std::vector<std::vector<float>> got;
        for (Path path : {Path::kTensorCoresPacked, Path::kTensorCoresWholeK}) {
          std::mt19937 same(rows);  // the same x, bias and prior for both mappings
          got.push_back(check(c, rows, QRun{in, out, kernels::kActGelu, false, true}, same, what, path));
          ASSERT_FALSE(got.back().empty()) << what;
        }
        for (size_t e = 0; e < got[0].size(); ++e) {
          ASSERT_EQ(got[0][e], got[1][e]) << what << ": row " << e / c.cols << " column " << e % c.cols;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
