// Every kernel family through its launcher, against a float64 host version (scorer.md §5): a bucket
// larger than the batch, so rows past the real counts keep their sentinel (7.0); sequences of lengths
// 37, 0, 1, 150 and 5; every input/output type variant. Tolerances: |got − want| <= tol · (1 + |want|).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// Tolerances by family (kime's kernel tests): FP16 outputs carry their own rounding.
constexpr double kTolNorm = 1e-5, kTolHalfOut = 1e-3, kTolRope = 1e-6, kTolAttention = 1e-4,
                 kTolAttentionTc = 2e-3;

const std::vector<uint32_t> kLengths = {37, 0, 1, 150, 5};
const std::vector<uint32_t> kMarkers = {3, 0, 1, 5, 2};
constexpr ir::Bucket kBucket{224, 8, 32};

class KernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(1234);
    batch_ = device_batch(make_batch(kLengths, kMarkers, 50, rng_), kBucket);
  }
  const ir::Batch& batch() const { return batch_->batch; }
  const StepContext& ctx() const { return batch_->ctx; }
  uint32_t real(ir::Rows r) const {
    switch (r) {
      case ir::Rows::kTokens: return batch().tokens();
      case ir::Rows::kSeqs: return batch().seqs();
      case ir::Rows::kPicks: return batch().num_picks();
    }
    return 0;
  }
  std::mt19937 rng_;
  std::unique_ptr<DeviceBatch> batch_;
};

// Input values as the kernel sees them: rounded to half when the input type is FP16.
std::vector<float> as_input(const std::vector<float>& x, Dt type) {
  return type == Dt::kF32 ? x : from_halves(to_halves(x));
}

DeviceBuffer input_buffer(const std::vector<float>& x, Dt type) {
  return type == Dt::kF32 ? to_device(x) : to_device(to_halves(x));
}

constexpr Dt kTypes[] = {Dt::kF32, Dt::kF16};

std::string variant(const char* family, Dt in, Dt out) {
  return std::string(family) + "_" + dt_name(in) + "_" + dt_name(out);
}

TEST_F(KernelsTest, EmbedCopiesTableRows) {
  const uint32_t vocab = 50, d = 96;
  const std::vector<float> table = random_floats(size_t{vocab} * d, rng_);
  DeviceBuffer t = to_device(table), out = sentinel_buffer(kBucket.tokens, d, Dt::kF32);
  run_step(embed_step(ctx(), make_loc(out, ir::Rows::kTokens, d, Dt::kF32, "emb"), t.as<float>(), vocab));
  std::vector<double> want;
  for (uint32_t id : batch().ids) {
    for (uint32_t c = 0; c < d; ++c) want.push_back(table[size_t{id} * d + c]);
  }
  expect_rows(to_host<float>(out, size_t{kBucket.tokens} * d), want, batch().tokens(), d, 0.0, "embed");
}

TEST_F(KernelsTest, LayerNormEveryVariantWidthAndRowKind) {
  for (Dt in : kTypes) {
    for (Dt out_type : kTypes) {
      for (uint32_t d : {1u, 37u, 128u, 1024u}) {
        for (ir::Rows rows : {ir::Rows::kTokens, ir::Rows::kPicks}) {
          for (bool bias : {false, true}) {
            const uint32_t n = kBucket.rows(rows);
            const std::vector<float> x = as_input(random_floats(size_t{n} * d, rng_, 3.0f), in);
            const std::vector<float> w = random_floats(d, rng_), b = random_floats(d, rng_);
            DeviceBuffer xd = input_buffer(x, in), wd = to_device(w), bd = to_device(b);
            DeviceBuffer yd = sentinel_buffer(n, d, out_type);
            run_step(layer_norm_step(ctx(), make_loc(xd, rows, d, in, "x"), make_loc(yd, rows, d, out_type, "y"),
                                     wd.as<float>(), bias ? bd.as<float>() : nullptr, 1e-5f));
            std::vector<double> want;
            for (uint32_t r = 0; r < real(rows); ++r) {
              double mean = 0, var = 0;
              for (uint32_t c = 0; c < d; ++c) mean += x[size_t{r} * d + c];
              mean /= d;
              for (uint32_t c = 0; c < d; ++c) var += std::pow(x[size_t{r} * d + c] - mean, 2);
              var /= d;
              for (uint32_t c = 0; c < d; ++c) {
                want.push_back((x[size_t{r} * d + c] - mean) / std::sqrt(var + 1e-5) * w[c] + (bias ? b[c] : 0.0));
              }
            }
            const double tol = out_type == Dt::kF16 ? kTolHalfOut : kTolNorm;
            expect_rows(read_floats(yd, size_t{n} * d, out_type), want, real(rows), d, tol,
                        variant("layer_norm", in, out_type) + " width " + std::to_string(d));
          }
        }
      }
    }
  }
}

TEST_F(KernelsTest, LayerNormRefusesRowsWiderThanAWarpHolds) {
  DeviceBuffer x = sentinel_buffer(1, 1, Dt::kF32);
  auto step = layer_norm_step(ctx(), make_loc(x, ir::Rows::kTokens, 1025, Dt::kF32, "wide"),
                              make_loc(x, ir::Rows::kTokens, 1025, Dt::kF32, "out"), nullptr, nullptr, 1e-5f);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(step.error().message().find("'wide'"), std::string::npos) << step.error().message();
}

TEST_F(KernelsTest, BiasActEveryActivation) {
  for (uint32_t d : {300u, 512u}) {  // element-wise and 8-wide paths
  for (Dt type : kTypes) {
    for (unsigned act : {kernels::kActNone, kernels::kActGelu, kernels::kActRelu}) {
      for (bool bias : {false, true}) {
        const std::vector<float> x = as_input(random_floats(size_t{kBucket.tokens} * d, rng_, 2.0f), type);
        const std::vector<float> b = random_floats(d, rng_);
        std::vector<float> padded = x;
        for (size_t i = size_t{batch().tokens()} * d; i < padded.size(); ++i) padded[i] = kSentinel;
        DeviceBuffer xd = input_buffer(padded, type), bd = to_device(b);
        run_step(bias_act_step(ctx(), make_loc(xd, ir::Rows::kTokens, d, type, "x"), bias ? bd.as<float>() : nullptr,
                               act));
        std::vector<double> want;
        for (uint32_t r = 0; r < batch().tokens(); ++r) {
          for (uint32_t c = 0; c < d; ++c) {
            double v = x[size_t{r} * d + c] + (bias ? b[c] : 0.0);
            if (act == kernels::kActGelu) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
            if (act == kernels::kActRelu) v = std::max(v, 0.0);
            want.push_back(v);
          }
        }
        expect_rows(read_floats(xd, padded.size(), type), want, batch().tokens(), d,
                    type == Dt::kF16 ? kTolHalfOut : kTolNorm,
                    variant("bias_act", type, type) + " width " + std::to_string(d) + " act " + std::to_string(act));
      }
    }
  }
  }
}

TEST_F(KernelsTest, CastRoundsToNearestEvenLikeTheHost) {
  const uint32_t d = 64;
  std::vector<float> x = random_floats(size_t{kBucket.tokens} * d, rng_, 100.0f);
  // Ties, subnormals, overflow and zeros.
  const float specials[] = {1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, 65520.0f, 70000.0f, -0.0f, 1e-6f, 3e-8f,
                            -65504.0f, 2.9802322e-08f, 6.1035156e-05f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  DeviceBuffer xd = to_device(x);
  DeviceBuffer yd = to_device(std::vector<uint16_t>(x.size(), 0x7e7e));
  run_step(cast_step(ctx(), make_loc(xd, ir::Rows::kTokens, d, Dt::kF32, "x"), yd.data(), Dt::kF16));
  const std::vector<uint16_t> got = to_host<uint16_t>(yd, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t want = i < size_t{batch().tokens()} * d ? float_to_half(x[i]) : uint16_t{0x7e7e};
    ASSERT_EQ(got[i], want) << "element " << i << " (" << x[i] << ")";
  }
}

// Rotate-half RoPE in double with the kernel's f32 tables.
void rotate(std::vector<double>& x, size_t at, uint32_t half, const std::vector<float>& table, uint32_t positions,
            uint32_t pos) {
  for (uint32_t j = 0; j < half; ++j) {
    const double c = table[size_t{pos} * half + j], s = table[size_t{positions} * half + size_t{pos} * half + j];
    const double a = x[at + j], b = x[at + j + half];
    x[at + j] = a * c - b * s;
    x[at + j + half] = b * c + a * s;
  }
}

TEST_F(KernelsTest, RopeStandaloneOnAColumnRange) {
  const uint32_t heads = 3, hd = 32, col = 16, width = 16 + heads * hd + 8, positions = kBucket.tokens;
  const std::vector<float> table = rope_table(10000.0f, hd / 2, positions);
  DeviceBuffer td = to_device(table);
  const RopeTable rt{td.as<float>(), td.as<float>() + size_t{positions} * hd / 2};
  for (Dt type : kTypes) {
    std::vector<float> x = as_input(random_floats(size_t{kBucket.tokens} * width, rng_), type);
    for (size_t i = size_t{batch().tokens()} * width; i < x.size(); ++i) x[i] = kSentinel;
    DeviceBuffer xd = input_buffer(x, type);
    run_step(rope_step(ctx(), make_loc(xd, ir::Rows::kTokens, width, type, "x"), ir::Rope{{}, col, heads, hd, 10000.0f}, rt));
    std::vector<double> want(x.begin(), x.end());
    for (uint32_t s = 0; s < batch().seqs(); ++s) {
      for (uint32_t r = batch().cu[s]; r < batch().cu[s + 1]; ++r) {
        for (uint32_t h = 0; h < heads; ++h) rotate(want, size_t{r} * width + col + h * hd, hd / 2, table, positions, r - batch().cu[s]);
      }
    }
    expect_rows(read_floats(xd, x.size(), type), want, batch().tokens(), width,
                type == Dt::kF16 ? kTolHalfOut : kTolRope, variant("rope", type, type));
  }
}

struct AttentionCase {
  CudaAttention path;
  Dt in, out;
  bool rope;
  int window;  // < 0: none
};

const char* family(CudaAttention path) {
  switch (path) {
    case CudaAttention::kTc2: return "attention_tc2";
    case CudaAttention::kTc2Split: return "attention_tc2s";
    case CudaAttention::kTc: return "attention_tc";
    case CudaAttention::kSimt: return "attention";
  }
  return "?";
}

std::vector<double> attention_reference(const ir::Batch& b, const std::vector<float>& qkv, uint32_t heads, int window,
                                        const std::vector<float>* table, uint32_t positions) {
  const uint32_t hd = 64, ld = 3 * heads * hd, width = heads * hd;
  std::vector<double> out(size_t{b.tokens()} * width, 0.0);
  for (uint32_t s = 0; s < b.seqs(); ++s) {
    const uint32_t lo = b.cu[s], hi = b.cu[s + 1];
    for (uint32_t h = 0; h < heads; ++h) {
      std::vector<double> q(size_t{hi - lo} * hd), k(q.size()), v(q.size());
      for (uint32_t r = lo; r < hi; ++r) {
        for (uint32_t c = 0; c < hd; ++c) {
          q[size_t{r - lo} * hd + c] = qkv[size_t{r} * ld + h * hd + c];
          k[size_t{r - lo} * hd + c] = qkv[size_t{r} * ld + (heads + h) * hd + c];
          v[size_t{r - lo} * hd + c] = qkv[size_t{r} * ld + (2 * heads + h) * hd + c];
        }
        if (table != nullptr) {
          rotate(q, size_t{r - lo} * hd, 32, *table, positions, r - lo);
          rotate(k, size_t{r - lo} * hd, 32, *table, positions, r - lo);
        }
      }
      for (uint32_t i = lo; i < hi; ++i) {
        std::vector<double> sc;
        std::vector<uint32_t> keys;
        for (uint32_t j = lo; j < hi; ++j) {
          if (window >= 0 && (i > j ? i - j : j - i) > static_cast<uint32_t>(window)) continue;
          double dot = 0;
          for (uint32_t c = 0; c < hd; ++c) dot += q[size_t{i - lo} * hd + c] * 0.125 * k[size_t{j - lo} * hd + c];
          sc.push_back(dot);
          keys.push_back(j);
        }
        if (sc.empty()) continue;
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (size_t t = 0; t < keys.size(); ++t) {
          for (uint32_t c = 0; c < hd; ++c) {
            out[size_t{i} * width + h * hd + c] += sc[t] / sum * v[size_t{keys[t] - lo} * hd + c];
          }
        }
      }
    }
  }
  return out;
}

// One attention launch over `qkv` for the batch, as the case says; returns the output buffer's values.
std::vector<float> run_attention(const ir::Batch& b, const AttentionCase& c, const std::vector<float>& qkv,
                                 uint32_t heads, const RopeTable& rt, int sms = -1, ir::Bucket bucket = kBucket) {
  auto db = device_batch(b, bucket, c.path);
  if (sms >= 0) db->ctx.sms = static_cast<uint32_t>(sms);  // 0: attention_tc2 gets a grid of one block
  const uint32_t width = heads * 64;
  // Padding rows are NaN: a kernel that lets one into a product (even times a zero weight) shows.
  std::vector<float> poisoned = qkv;
  std::fill(poisoned.begin() + static_cast<long>(size_t{b.tokens()} * 3 * width), poisoned.end(), std::nanf(""));
  DeviceBuffer qd = input_buffer(poisoned, c.in), od = sentinel_buffer(bucket.tokens, width, c.out);
  ir::Attention op{{}, heads, 64, std::nullopt, {}};
  if (c.window >= 0) op.window = static_cast<uint32_t>(c.window);
  run_step(attention_step(db->ctx, make_loc(qd, ir::Rows::kTokens, 3 * width, c.in, "qkv"),
                          make_loc(od, ir::Rows::kTokens, width, c.out, "att"), op, c.rope ? &rt : nullptr));
  return read_floats(od, size_t{bucket.tokens} * width, c.out);
}

TEST_F(KernelsTest, AttentionEveryPathWindowAndRope) {
  const uint32_t heads = 2, width = heads * 64, positions = kBucket.tokens;
  const std::vector<float> table = rope_table(160000.0f, 32, positions);
  DeviceBuffer td = to_device(table);
  const RopeTable rt{td.as<float>(), td.as<float>() + size_t{positions} * 32};
  std::vector<AttentionCase> cases;
  for (Dt in : kTypes) {
    for (Dt out : kTypes) cases.push_back({CudaAttention::kSimt, in, out, true, 16});
  }
  cases.push_back({CudaAttention::kSimt, Dt::kF32, Dt::kF32, false, -1});
  cases.push_back({CudaAttention::kSimt, Dt::kF32, Dt::kF32, true, -1});
  for (CudaAttention path : {CudaAttention::kTc, CudaAttention::kTc2, CudaAttention::kTc2Split}) {
    for (Dt out : kTypes) {
      cases.push_back({path, Dt::kF32, out, true, 16});
      cases.push_back({path, Dt::kF32, out, false, -1});
    }
    cases.push_back({path, Dt::kF32, Dt::kF32, true, -1});
  }
  cases.push_back({CudaAttention::kTc2, Dt::kF32, Dt::kF16, true, 64});  // ModernBERT's local window
  cases.push_back({CudaAttention::kTc2, Dt::kF32, Dt::kF32, false, 0});  // every row sees itself only
  for (const AttentionCase& c : cases) {
    const std::vector<float> qkv = as_input(random_floats(size_t{kBucket.tokens} * 3 * width, rng_), c.in);
    const std::vector<double> want =
        attention_reference(batch(), qkv, heads, c.window, c.rope ? &table : nullptr, positions);
    double tol = c.path == CudaAttention::kSimt ? kTolAttention : kTolAttentionTc;
    if (c.out == Dt::kF16) tol = std::max(tol, kTolHalfOut);
    const std::string what = variant(family(c.path), c.in, c.out) + (c.rope ? " rope" : "") + " window " +
                             std::to_string(c.window);
    const std::vector<float> got = run_attention(batch(), c, qkv, heads, rt);
    double worst = 0;
    for (size_t i = 0; i < size_t{batch().tokens()} * width; ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
    }
    std::cout << what << ": largest error " << worst << " (tolerance " << tol << ")\n";
    expect_rows(got, want, batch().tokens(), width, tol, what);
  }
}

// attention_tc2's blocks loop over tiles when the grid is smaller than the batch's tiles: one block
// doing every tile in turn must give the bits of one block per tile.
TEST_F(KernelsTest, AttentionTc2GivesTheSameBitsWhateverItsGrid) {
  const uint32_t heads = 2, width = heads * 64, positions = kBucket.tokens;
  const std::vector<float> table = rope_table(10000.0f, 32, positions);
  DeviceBuffer td = to_device(table);
  const RopeTable rt{td.as<float>(), td.as<float>() + size_t{positions} * 32};
  for (int window : {-1, 64}) {
    const AttentionCase c{window < 0 ? CudaAttention::kTc2 : CudaAttention::kTc2Split, Dt::kF32, Dt::kF16, true,
                          window};
    const std::vector<float> qkv = random_floats(size_t{kBucket.tokens} * 3 * width, rng_, 2.0f);
    const std::vector<float> wide = run_attention(batch(), c, qkv, heads, rt, 132);
    const std::vector<float> narrow = run_attention(batch(), c, qkv, heads, rt, 0);
    ASSERT_EQ(wide.size(), narrow.size());
    EXPECT_EQ(std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)), 0) << "window " << window;
    const std::vector<double> want = attention_reference(batch(), qkv, heads, window, &table, positions);
    expect_rows(narrow, want, batch().tokens(), width, kTolAttentionTc, "attention_tc2 on a grid of one block");
  }
}

// The tensor-core kernels over long sequences (many 64-key steps through both stages, more tiles than
// the grid has blocks, windows that start mid-sequence), on the GPU only: the emulator would take minutes.
TEST_F(KernelsTest, AttentionTensorCoresOnLongSequences) {
  if (emulated()) GTEST_SKIP() << "left to the GPU run (the short sequences above run on the emulator)";
  const ir::Bucket bucket{1024, 8, 32};
  const ir::Batch b = make_batch({512, 300, 64, 65, 1}, {1, 1, 1, 1, 1}, 50, rng_);
  const uint32_t heads = 4, width = heads * 64, positions = bucket.tokens;
  const std::vector<float> table = rope_table(160000.0f, 32, positions);
  DeviceBuffer td = to_device(table);
  const RopeTable rt{td.as<float>(), td.as<float>() + size_t{positions} * 32};
  for (CudaAttention path : {CudaAttention::kTc2, CudaAttention::kTc2Split, CudaAttention::kTc}) {
    for (int window : {-1, 64}) {
      const AttentionCase c{path, Dt::kF32, Dt::kF16, true, window};
      // Unit-variance activations. (tc2 rounds v to f16: its error grows with |v|, about 2^-11 · |v|.)
      const std::vector<float> qkv = random_floats(size_t{bucket.tokens} * 3 * width, rng_);
      const std::vector<double> want = attention_reference(b, qkv, heads, window, &table, positions);
      const std::string what = std::string(family(path)) + " long sequences window " + std::to_string(window);
      const std::vector<float> got = run_attention(b, c, qkv, heads, rt, 4, bucket);  // 4 SMs: looping blocks
      double worst = 0;
      for (size_t i = 0; i < size_t{b.tokens()} * width; ++i) {
        worst = std::max(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
      }
      std::cout << what << ": largest error " << worst << "\n";
      expect_rows(got, want, b.tokens(), width, kTolAttentionTc, what);
    }
  }
}

TEST_F(KernelsTest, AttentionRefusesOtherHeadSizes) {
  DeviceBuffer x = sentinel_buffer(1, 1, Dt::kF32);
  ir::Attention op{{}, 2, 32, std::nullopt, {}};
  auto step = attention_step(ctx(), make_loc(x, ir::Rows::kTokens, 192, Dt::kF32, "qkv"),
                             make_loc(x, ir::Rows::kTokens, 64, Dt::kF32, "out"), op, nullptr);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().kind(), ErrorKind::kUnsupported);
}

TEST_F(KernelsTest, GegluEveryVariant) {
  for (uint32_t inter : {192u, 100u}) {  // 8-wide and element-wise paths
  for (Dt in : kTypes) {
    for (Dt out : kTypes) {
      const std::vector<float> x = as_input(random_floats(size_t{kBucket.tokens} * 2 * inter, rng_, 2.0f), in);
      DeviceBuffer xd = input_buffer(x, in), yd = sentinel_buffer(kBucket.tokens, inter, out);
      run_step(geglu_step(ctx(), make_loc(xd, ir::Rows::kTokens, 2 * inter, in, "x"),
                          make_loc(yd, ir::Rows::kTokens, inter, out, "y")));
      std::vector<double> want;
      for (uint32_t r = 0; r < batch().tokens(); ++r) {
        for (uint32_t c = 0; c < inter; ++c) {
          const double a = x[size_t{r} * 2 * inter + c], g = x[size_t{r} * 2 * inter + inter + c];
          want.push_back(0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))) * g);
        }
      }
      expect_rows(read_floats(yd, size_t{kBucket.tokens} * inter, out), want, batch().tokens(), inter,
                  out == Dt::kF16 ? kTolHalfOut : kTolNorm, variant("geglu", in, out) + " inter " + std::to_string(inter));
    }
  }
  }
}

TEST_F(KernelsTest, AddTypeAddsEachSequencesTypeRow) {
  const uint32_t d = 80;
  const std::vector<float> table = random_floats(3 * d, rng_);
  std::vector<float> h = random_floats(size_t{kBucket.tokens} * d, rng_);
  for (size_t i = size_t{batch().tokens()} * d; i < h.size(); ++i) h[i] = kSentinel;
  DeviceBuffer hd = to_device(h), td = to_device(table);
  run_step(add_type_step(ctx(), make_loc(hd, ir::Rows::kTokens, d, Dt::kF32, "h"), td.as<float>()));
  std::vector<double> want;
  for (uint32_t s = 0; s < batch().seqs(); ++s) {
    for (uint32_t r = batch().cu[s]; r < batch().cu[s + 1]; ++r) {
      for (uint32_t c = 0; c < d; ++c) {
        want.push_back(static_cast<double>(h[size_t{r} * d + c] + table[size_t{batch().qtype[s]} * d + c]));
      }
    }
  }
  expect_rows(to_host<float>(hd, h.size()), want, batch().tokens(), d, 0.0, "add_type");
}

TEST_F(KernelsTest, PickRowsEveryVariant) {
  const uint32_t d = 72;
  for (Dt in : kTypes) {
    for (Dt out : kTypes) {
      const std::vector<float> h = as_input(random_floats(size_t{kBucket.tokens} * d, rng_), in);
      DeviceBuffer hd = input_buffer(h, in), yd = sentinel_buffer(kBucket.picks, d, out);
      run_step(pick_rows_step(ctx(), make_loc(hd, ir::Rows::kTokens, d, in, "h"),
                           make_loc(yd, ir::Rows::kPicks, d, out, "m")));
      std::vector<double> want;
      for (uint32_t s = 0; s < batch().seqs(); ++s) {
        for (uint32_t m = batch().pcu[s]; m < batch().pcu[s + 1]; ++m) {
          for (uint32_t c = 0; c < d; ++c) {
            const float v = h[size_t{batch().cu[s] + batch().picks[m]} * d + c];
            want.push_back(out == Dt::kF16 ? half_to_float(float_to_half(v)) : v);
          }
        }
      }
      expect_rows(read_floats(yd, size_t{kBucket.picks} * d, out), want, batch().num_picks(), d, 0.0,
                  variant("pick_rows", in, out));
    }
  }
}

TEST_F(KernelsTest, ActFeaturesMatchTheReferenceIncludingTiesAndEmptySequences) {
  const uint32_t d = 40;
  std::vector<float> h = random_floats(size_t{kBucket.tokens} * d, rng_);
  std::vector<float> logits = random_floats(kBucket.picks, rng_, 2.0f);
  logits[1] = logits[0];  // a tie at the top of sequence 0 (3 markers)
  DeviceBuffer hd = to_device(h), ld = to_device(logits), od = sentinel_buffer(kBucket.seqs, d + 4, Dt::kF32);
  run_step(act_features_step(ctx(), make_loc(hd, ir::Rows::kTokens, d, Dt::kF32, "h"),
                             make_loc(ld, ir::Rows::kPicks, 1, Dt::kF32, "logits"),
                             make_loc(od, ir::Rows::kSeqs, d + 4, Dt::kF32, "feat")));
  std::vector<double> want;
  for (uint32_t s = 0; s < batch().seqs(); ++s) {
    const uint32_t lo = batch().cu[s], hi = batch().cu[s + 1];
    for (uint32_t c = 0; c < d; ++c) want.push_back(lo < hi ? h[size_t{lo} * d + c] : 0.0);
    const uint32_t m0 = batch().pcu[s], m1 = batch().pcu[s + 1], k = m1 - m0, kf = std::max(k, 2u);
    double top1 = 0, margin = 0, ent = 0;
    if (k > 0) {
      std::vector<double> q;
      double mx = -1e300, sum = 0;
      for (uint32_t m = m0; m < m1; ++m) mx = std::max(mx, static_cast<double>(logits[m]));
      for (uint32_t m = m0; m < m1; ++m) q.push_back(std::exp(logits[m] - mx)), sum += q.back();
      for (double& x : q) x /= sum;
      double first = 0, second = 0;
      for (double x : q) {
        if (x > first) {
          second = first;
          first = x;
        } else if (x > second) {
          second = x;
        }
      }
      top1 = first;
      margin = first - second;
      for (double x : q) ent -= x * std::log(std::max(x, 1e-9));
      ent /= std::log(static_cast<double>(kf));
    }
    want.insert(want.end(), {top1, margin, ent, kf / 255.0});
  }
  expect_rows(to_host<float>(od, size_t{kBucket.seqs} * (d + 4)), want, batch().seqs(), d + 4, 1e-6, "act_features");
  const std::vector<float> got = to_host<float>(od, size_t{kBucket.seqs} * (d + 4));
  EXPECT_EQ(got[d + 1], 0.0f) << "tied top logits give a zero margin";
}

TEST_F(KernelsTest, ZeroRealRowsTouchNothing) {
  auto empty = device_batch(ir::Batch{}, kBucket);
  const uint32_t d = 64;
  DeviceBuffer x = sentinel_buffer(kBucket.tokens, d, Dt::kF32), y = sentinel_buffer(kBucket.tokens, d, Dt::kF32);
  DeviceBuffer w = to_device(std::vector<float>(d, 1.0f));
  run_step(layer_norm_step(empty->ctx, make_loc(x, ir::Rows::kTokens, d, Dt::kF32, "x"),
                           make_loc(y, ir::Rows::kTokens, d, Dt::kF32, "y"), w.as<float>(), nullptr, 1e-5f));
  DeviceBuffer qkv = sentinel_buffer(kBucket.tokens, 3 * 128, Dt::kF32), o = sentinel_buffer(kBucket.tokens, 128, Dt::kF32);
  run_step(attention_step(empty->ctx, make_loc(qkv, ir::Rows::kTokens, 384, Dt::kF32, "qkv"),
                          make_loc(o, ir::Rows::kTokens, 128, Dt::kF32, "o"), ir::Attention{{}, 2, 64, std::nullopt, {}},
                          nullptr));
  expect_rows(to_host<float>(y, size_t{kBucket.tokens} * d), {}, 0, d, 0.0, "layer_norm over no rows");
  expect_rows(to_host<float>(o, size_t{kBucket.tokens} * 128), {}, 0, 128, 0.0, "attention over no rows");
}

}  // namespace
}  // namespace tandem::cuda::test
