// The decoder's row-wise kernel families (rms_norm, head_norm_rope, qkv_prep, swiglu, tap, cache_append, and the
// BF16 staging cast) through their launchers against float64 host versions: a bucket larger than the
// batch so padding rows keep their sentinel, sequences at absolute positions far from 0 in their own
// cache slots, every type variant. |got − want| <= tol · (1 + |want|).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ir/graph.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr ir::Bucket kBucket{64, 4, 8};
const std::vector<uint32_t> kLengths = {9, 0, 1, 30};
const std::vector<uint32_t> kStarts = {1000, 3, 70000, 17};
const std::vector<uint32_t> kSlots = {2, 0, 1, 3};
constexpr uint32_t kCapacity = 70016;

class DecoderKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(99);
    ir::Batch b = make_batch(kLengths, {2, 0, 1, 3}, 50, rng_);
    b.start = kStarts;
    b.slot = kSlots;
    batch_ = device_batch(std::move(b), kBucket);
  }
  const ir::Batch& batch() const { return batch_->batch; }
  const StepContext& ctx() const { return batch_->ctx; }
  uint32_t pos(uint32_t row) const {
    for (uint32_t s = 0; s < batch().seqs(); ++s) {
      if (row < batch().cu[s + 1]) return batch().seq_start(s) + (row - batch().cu[s]);
    }
    return 0;
  }
  std::mt19937 rng_;
  std::unique_ptr<DeviceBatch> batch_;
};

std::string variant(const char* family, Dt in, Dt out) {
  return std::string(family) + "_" + dt_name(in) + "_" + dt_name(out);
}

TEST_F(DecoderKernelsTest, RmsNormEveryVariantAndWidth) {
  const std::pair<Dt, Dt> variants[] = {{Dt::kF32, Dt::kF32},  {Dt::kF32, Dt::kF16},  {Dt::kF32, Dt::kBF16},
                                        {Dt::kF16, Dt::kF32},  {Dt::kF16, Dt::kF16},  {Dt::kBF16, Dt::kF32},
                                        {Dt::kBF16, Dt::kBF16}};
  for (const auto& [in, out] : variants) {
    for (uint32_t d : {1u, 37u, 128u, 4096u, 5120u}) {
      const uint32_t n = kBucket.tokens;
      const std::vector<float> x = rounded_to(random_floats(size_t{n} * d, rng_, 3.0f), in);
      const std::vector<float> w = random_floats(d, rng_);
      DeviceBuffer xd = typed_buffer(x, in), wd = to_device(w), yd = sentinel_buffer(n, d, out);
      run_step(rms_norm_step(ctx(), make_loc(xd, ir::Rows::kTokens, d, in, "x"), make_loc(yd, ir::Rows::kTokens, d, out, "y"),
                             wd.as<float>(), 1e-6f));
      std::vector<double> want;
      for (uint32_t r = 0; r < batch().tokens(); ++r) {
        double sq = 0.0;
        for (uint32_t c = 0; c < d; ++c) sq += double{x[size_t{r} * d + c]} * x[size_t{r} * d + c];
        const double scale = 1.0 / std::sqrt(sq / d + 1e-6);
        for (uint32_t c = 0; c < d; ++c) want.push_back(w[c] * (x[size_t{r} * d + c] * scale));
      }
      expect_rows(read_floats(yd, size_t{n} * d, out), want, batch().tokens(), d, 4e-6 + storage_tolerance(out),
                  variant("rms_norm", in, out) + " width " + std::to_string(d));
    }
  }
}

// Per-head RMSNorm then rotate-half RoPE at each row's absolute position (angle f32 product, cos/sin in
// f64), in place; also each half alone (no weight: rope only; no frequencies: norm only).
TEST_F(DecoderKernelsTest, HeadNormRopeAtAbsolutePositions) {
  for (Dt type : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (uint32_t hd : {8u, 32u, 64u, 128u}) {
      for (int mode = 0; mode < 3; ++mode) {  // 0 norm + rope, 1 rope only, 2 norm only
        const uint32_t heads = 3, ld = heads * hd + 8;  // rows wider than the heads: columns past them stay
        const float theta = hd == 128 ? 1e7f : 1e6f;
        const uint32_t n = kBucket.tokens;
        std::vector<float> x = rounded_to(random_floats(size_t{n} * ld, rng_, 2.0f), type);
        const std::vector<float> w = random_floats(hd, rng_);
        const std::vector<float> inv = ir::rope_inv_freq(theta, hd);
        DeviceBuffer xd = typed_buffer(x, type), wd = to_device(w), fd = to_device(inv);
        run_step(head_norm_rope_step(ctx(), make_loc(xd, ir::Rows::kTokens, ld, type, "q"), heads, hd,
                                     mode == 1 ? nullptr : wd.as<float>(), 1e-6f, mode == 2 ? nullptr : fd.as<float>()));
        std::vector<double> want(x.begin(), x.end());
        for (uint32_t r = 0; r < batch().tokens(); ++r) {
          for (uint32_t h = 0; h < heads; ++h) {
            double* v = want.data() + size_t{r} * ld + size_t{h} * hd;
            if (mode != 1) {
              double sq = 0.0;
              for (uint32_t c = 0; c < hd; ++c) sq += v[c] * v[c];
              const double scale = 1.0 / std::sqrt(sq / hd + 1e-6);
              for (uint32_t c = 0; c < hd; ++c) v[c] = w[c] * (v[c] * scale);
            }
            if (mode != 2) {
              for (uint32_t i = 0; i < hd / 2; ++i) {
                const double angle = static_cast<float>(pos(r)) * inv[i];
                const double c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
                const double a = v[i], b = v[i + hd / 2];
                v[i] = a * c - b * s;
                v[i + hd / 2] = b * c + a * s;
              }
            }
          }
        }
        const std::vector<float> got = read_floats(xd, size_t{n} * ld, type);
        const double tol = 4e-6 + storage_tolerance(type);
        const std::string what = std::string("head_norm_rope_") + dt_name(type) + " head_dim " + std::to_string(hd) +
                                 " mode " + std::to_string(mode);
        for (size_t i = 0; i < got.size(); ++i) {
          const bool real = i / ld < batch().tokens();
          const double expect = real ? want[i] : x[i];  // padding rows are left as they were
          ASSERT_LE(std::fabs(got[i] - expect), tol * (1.0 + std::fabs(expect)))
              << what << ": row " << i / ld << " column " << i % ld << " got " << got[i] << " want " << expect;
        }
      }
    }
  }
}

TEST_F(DecoderKernelsTest, SwigluEveryVariant) {
  const std::pair<Dt, Dt> variants[] = {
      {Dt::kF32, Dt::kF32}, {Dt::kF32, Dt::kF16}, {Dt::kF32, Dt::kBF16}, {Dt::kF16, Dt::kF16}, {Dt::kBF16, Dt::kBF16}};
  for (const auto& [in, out] : variants) {
    for (uint32_t inter : {7u, 96u, 12288u}) {
      const uint32_t n = kBucket.tokens;
      const std::vector<float> x = rounded_to(random_floats(size_t{n} * 2 * inter, rng_, 3.0f), in);
      DeviceBuffer xd = typed_buffer(x, in), yd = sentinel_buffer(n, inter, out);
      run_step(swiglu_step(ctx(), make_loc(xd, ir::Rows::kTokens, 2 * inter, in, "gu"),
                           make_loc(yd, ir::Rows::kTokens, inter, out, "m")));
      std::vector<double> want;
      for (uint32_t r = 0; r < batch().tokens(); ++r) {
        for (uint32_t c = 0; c < inter; ++c) {
          const double g = x[size_t{r} * 2 * inter + c], u = x[size_t{r} * 2 * inter + inter + c];
          want.push_back(g / (1.0 + std::exp(-g)) * u);
        }
      }
      expect_rows(read_floats(yd, size_t{n} * inter, out), want, batch().tokens(), inter, 2e-6 + storage_tolerance(out),
                  variant("swiglu", in, out) + " " + std::to_string(inter));
    }
  }
}

TEST_F(DecoderKernelsTest, TapWritesItsColumnsOfTheJoinedRow) {
  for (Dt out : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (const auto& [width, col, ld] : {std::tuple{64u, 64u, 192u}, std::tuple{13u, 3u, 20u}, std::tuple{16u, 0u, 16u}}) {
      const uint32_t n = kBucket.tokens;
      const std::vector<float> x = random_floats(size_t{n} * width, rng_, 4.0f);
      DeviceBuffer xd = to_device(x), yd = sentinel_buffer(n, ld, out);
      run_step(tap_step(ctx(), make_loc(xd, ir::Rows::kTokens, width, Dt::kF32, "x"),
                        make_loc(yd, ir::Rows::kTokens, ld, out, "taps"), col));
      const std::vector<float> got = read_floats(yd, size_t{n} * ld, out);
      const std::vector<float> want = rounded_to(x, out);
      for (uint32_t r = 0; r < n; ++r) {
        for (uint32_t c = 0; c < ld; ++c) {
          const bool written = r < batch().tokens() && c >= col && c < col + width;
          const float expect = written ? want[size_t{r} * width + (c - col)] : kSentinel;
          ASSERT_EQ(got[size_t{r} * ld + c], expect) << "tap to " << dt_name(out) << " row " << r << " column " << c;
        }
      }
    }
  }
}

// Rows land at (their sequence's slot, their absolute position) of the cache the index names; nothing
// else of any cache changes.
TEST_F(DecoderKernelsTest, CacheAppendWritesEachRowAtItsSlotAndPosition) {
  for (Dt type : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (uint32_t width : {64u, 12u}) {
      const uint32_t slots = 4, capacity = kCapacity;
      const size_t cache_elems = size_t{slots} * capacity * width;
      DeviceBuffer k0 = sentinel_buffer(cache_elems, 1, type), v0 = sentinel_buffer(cache_elems, 1, type);
      DeviceBuffer k1 = sentinel_buffer(cache_elems, 1, type), v1 = sentinel_buffer(cache_elems, 1, type);
      const std::vector<kernels::CacheTable> table = {
          {reinterpret_cast<unsigned long long>(k0.data()), reinterpret_cast<unsigned long long>(v0.data())},
          {reinterpret_cast<unsigned long long>(k1.data()), reinterpret_cast<unsigned long long>(v1.data())}};
      auto bound = device_batch(batch(), kBucket, CudaAttention::kSimt, table, capacity);
      const uint32_t n = kBucket.tokens;
      const std::vector<float> k = rounded_to(random_floats(size_t{n} * width, rng_), type);
      const std::vector<float> v = rounded_to(random_floats(size_t{n} * width, rng_), type);
      DeviceBuffer kd = typed_buffer(k, type), vd = typed_buffer(v, type);
      run_step(cache_append_step(bound->ctx, make_loc(kd, ir::Rows::kTokens, width, type, "k"),
                                 make_loc(vd, ir::Rows::kTokens, width, type, "v"), 1, type));
      const std::vector<float> gk = read_floats(k1, cache_elems, type), gv = read_floats(v1, cache_elems, type);
      std::vector<float> wk(cache_elems, kSentinel), wv(cache_elems, kSentinel);
      for (uint32_t r = 0; r < batch().tokens(); ++r) {
        uint32_t s = 0;
        while (r >= batch().cu[s + 1]) ++s;
        const size_t at = (size_t{batch().seq_slot(s)} * capacity + pos(r)) * width;
        std::memcpy(wk.data() + at, k.data() + size_t{r} * width, width * sizeof(float));
        std::memcpy(wv.data() + at, v.data() + size_t{r} * width, width * sizeof(float));
      }
      ASSERT_EQ(gk, wk) << "K of cache 1, " << dt_name(type) << " width " << width;
      ASSERT_EQ(gv, wv) << "V of cache 1, " << dt_name(type) << " width " << width;
      const std::vector<float> untouched = read_floats(k0, cache_elems, type);
      for (float f : untouched) ASSERT_EQ(f, kSentinel) << "cache 0 was written";
    }
  }
}

// qkv_prep is three launches in one: the fused [q | k | v] rows and the cache it writes must hold exactly the
// bits of head_norm_rope on q, head_norm_rope on k and cache_append, run on a copy of the same inputs.
TEST_F(DecoderKernelsTest, QkvPrepLeavesTheBitsOfTheThreeLaunchesItReplaces) {
  for (Dt type : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (uint32_t hd : {64u, 128u, 24u}) {
      const uint32_t heads = 4, kv_heads = 2, width = kv_heads * hd, ld = (heads + 2 * kv_heads) * hd + 8;
      const uint32_t slots = 4, capacity = kCapacity, n = kBucket.tokens;
      const size_t cache_elems = size_t{slots} * capacity * width;
      const std::vector<float> x = rounded_to(random_floats(size_t{n} * ld, rng_, 2.0f), type);
      const std::vector<float> wq = random_floats(hd, rng_), wk = random_floats(hd, rng_);
      const std::vector<float> inv = ir::rope_inv_freq(1e6f, hd);
      DeviceBuffer wqd = to_device(wq), wkd = to_device(wk), fd = to_device(inv);
      std::vector<float> rows[2], keys[2], values[2];
      for (int fused = 0; fused < 2; ++fused) {
        DeviceBuffer kc = sentinel_buffer(cache_elems, 1, type), vc = sentinel_buffer(cache_elems, 1, type);
        const std::vector<kernels::CacheTable> table = {
            {reinterpret_cast<unsigned long long>(kc.data()), reinterpret_cast<unsigned long long>(vc.data())}};
        auto bound = device_batch(batch(), kBucket, CudaAttention::kSimt, table, capacity);
        DeviceBuffer xd = typed_buffer(x, type);
        const Loc row = make_loc(xd, ir::Rows::kTokens, ld, type, "qkv");
        if (fused == 1) {
          run_step(qkv_prep_step(bound->ctx, row, QkvPrepShape{heads, kv_heads, hd, 1e-6f}, wqd.as<float>(),
                                 wkd.as<float>(), fd.as<float>(), 0, type));
        } else {
          run_step(head_norm_rope_step(bound->ctx, row, heads, hd, wqd.as<float>(), 1e-6f, fd.as<float>(), 0));
          run_step(head_norm_rope_step(bound->ctx, row, kv_heads, hd, wkd.as<float>(), 1e-6f, fd.as<float>(),
                                       heads * hd));
          run_step(cache_append_step(bound->ctx, row, row, 0, type, width, heads * hd, (heads + kv_heads) * hd));
        }
        rows[fused] = read_floats(xd, size_t{n} * ld, type);
        keys[fused] = read_floats(kc, cache_elems, type);
        values[fused] = read_floats(vc, cache_elems, type);
      }
      const std::string what = std::string("qkv_prep_") + dt_name(type) + " head_dim " + std::to_string(hd);
      // Bit equality (NaN-free inputs: == on floats is bit equality here, sentinels included).
      ASSERT_EQ(rows[1], rows[0]) << what << ": the fused rows";
      ASSERT_EQ(keys[1], keys[0]) << what << ": the K cache";
      ASSERT_EQ(values[1], values[0]) << what << ": the V cache";
      // And the launches did something: the q heads of row 0 were normed and rotated, the cache written.
      ASSERT_NE(rows[1][0], x[0]) << what;
      ASSERT_NE(std::count(keys[1].begin(), keys[1].end(), kSentinel), static_cast<long>(cache_elems)) << what;
    }
  }
  DeviceBuffer a = sentinel_buffer(64, 64, Dt::kF32);
  auto refused = qkv_prep_step(ctx(), make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "qkv"), QkvPrepShape{4, 2, 16, 1e-6f},
                               nullptr, nullptr, nullptr, 0, Dt::kF32);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("4 + 2 x 2 heads of 16 on 'qkv'"), std::string::npos)
      << refused.error().message();
}

TEST_F(DecoderKernelsTest, CastToBf16RoundsToNearestEven) {
  const uint32_t d = 40;
  std::vector<float> x = random_floats(size_t{kBucket.tokens} * d, rng_, 50.0f);
  const float specials[] = {0.0f, -0.0f, 1.0f + 0x1.0p-8f, 1.0f + 0x1.8p-8f, 3.0e38f, -1.0e-40f, 65504.0f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  DeviceBuffer xd = to_device(x);
  DeviceBuffer yd = to_device(std::vector<uint16_t>(x.size(), 0x7e7e));
  run_step(cast_step(ctx(), make_loc(xd, ir::Rows::kTokens, d, Dt::kF32, "x"), yd.data(), Dt::kBF16));
  const std::vector<uint16_t> got = to_host<uint16_t>(yd, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t want = i / d < batch().tokens() ? float_to_bf16(x[i]) : uint16_t{0x7e7e};
    ASSERT_EQ(got[i], want) << "element " << i << " (" << x[i] << ")";
  }
}

TEST_F(DecoderKernelsTest, LaunchersRefuseMismatchedOperands) {
  DeviceBuffer a = sentinel_buffer(64, 64, Dt::kF32), b = sentinel_buffer(64, 64, Dt::kBF16);
  auto st = rms_norm_step(ctx(), make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "x"),
                          make_loc(b, ir::Rows::kTokens, 32, Dt::kBF16, "y"), nullptr, 1e-6f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("rms_norm: 'x' (tokens × 64 f32) and 'y' (tokens × 32 bf16) differ"),
            std::string::npos) << st.error().message();
  auto hn = head_norm_rope_step(ctx(), make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "q"), 4, 32, nullptr, 0.0f, nullptr);
  ASSERT_FALSE(hn.ok());
  EXPECT_NE(hn.error().message().find("4 heads of 32 from column 0 on 'q'"), std::string::npos) << hn.error().message();
  auto ca = cache_append_step(ctx(), make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "k"),
                              make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "v"), 0, Dt::kBF16);
  ASSERT_FALSE(ca.ok());
  EXPECT_NE(ca.error().message().find("into a bf16 cache"), std::string::npos) << ca.error().message();
}

}  // namespace
}  // namespace tandem::cuda::test
