// KV-cache attention (kernels/cache_attention.cu through cache_attention_steps) against a float64 host
// version of graph.h's CacheAttention on random queries and caches: causal and block rows, windows, GQA
// groups 1/4/8, head_dim 32/64/128, 1, 2, 16 and prefill-sized row counts, sequences at their own starts
// and slots in one batch, bucket padding that keeps its sentinel, and rows bit-identical alone and batched.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/cuda/steps_impl.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

// Tolerances, |got − want| <= tol · (1 + |want|). Scores, softmax and sums are FP32 throughout, so the
// FP32 kernels agree with float64 to a few ulps of the sums. 16-bit caches add the output's own rounding
// (u = 2^-11 for f16, 2^-8 for bf16) and, on tensor cores, the rounding of each probability to the
// cache type before p·v: the row sum adds the same rounded p, so the output stays an exactly weighted
// mean of the values whose weights moved by at most u relative each: about u · |v| in practice (at most
// 2u · max|v| when every rounding leans one way), plus u · |out|.
constexpr double kTolF32 = 1e-5;
double tolerance(Dt t, bool tc) {
  switch (t) {
    case Dt::kF32: return kTolF32;
    case Dt::kF16: return tc ? 2e-3 : 1e-3;    // 4u with p rounded, 2u without (seen: 2.6e-4, 2.2e-4)
    case Dt::kBF16: return tc ? 1.6e-2 : 8e-3;  // the same (seen: 3.2e-3, 1.9e-3)
    case Dt::kU32: break;
  }
  return 0.0;
}

std::vector<float> rounded(const std::vector<float>& x, Dt t) {
  std::vector<float> out(x);
  for (float& v : out) {
    if (t == Dt::kF16) v = half_to_float(float_to_half(v));
    if (t == Dt::kBF16) v = bf16_to_float(float_to_bf16(v));
  }
  return out;
}

DeviceBuffer upload(const std::vector<float>& x, Dt t) {
  if (t == Dt::kF32) return to_device(x);
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = t == Dt::kF16 ? float_to_half(x[i]) : float_to_bf16(x[i]);
  return to_device(bits);
}

std::vector<float> download(const DeviceBuffer& b, size_t n, Dt t) {
  if (t == Dt::kF32) return to_host<float>(b, n);
  std::vector<float> out(n);
  const std::vector<uint16_t> bits = to_host<uint16_t>(b, n);
  for (size_t i = 0; i < n; ++i) out[i] = t == Dt::kF16 ? half_to_float(bits[i]) : bf16_to_float(bits[i]);
  return out;
}

// One run's shape: the op, its element type and kernel, the bucket, and the State's slots and positions.
struct Shape {
  uint32_t kv_heads = 2, group = 4, head_dim = 64;
  bool causal = true;
  std::optional<uint32_t> window;
  Dt type = Dt::kF32;
  bool tc = false;  // the tensor-core kernel (16-bit types, head_dim 32/64/128)
  ir::Bucket bucket{64, 8, 64};
  uint32_t slots = 4, capacity = 1600;
  uint32_t q_heads() const { return kv_heads * group; }
  uint32_t width() const { return q_heads() * head_dim; }
  uint32_t kv_width() const { return kv_heads * head_dim; }
  ir::CacheAttention op() const {
    return ir::CacheAttention{ir::Val{0}, 0, q_heads(), kv_heads, head_dim, causal, window, ir::Val{1}, 0};
  }
};

// Sequences: rows, absolute start and slot each.
struct Seq {
  uint32_t rows, start, slot;
};

// The cache's K and V ([slots][capacity][kv_width], rounded to the type) and the batch's queries.
struct Inputs {
  std::vector<float> k, v, q;
};

Inputs random_inputs(const Shape& s, uint32_t tokens, std::mt19937& rng) {
  const size_t cache = size_t{s.slots} * s.capacity * s.kv_width();
  return Inputs{rounded(random_floats(cache, rng), s.type), rounded(random_floats(cache, rng), s.type),
                rounded(random_floats(size_t{tokens} * s.width(), rng), s.type)};
}

ir::Batch make_decoder_batch(const std::vector<Seq>& seqs) {
  ir::Batch b;
  for (const Seq& q : seqs) {
    b.add_sequence(std::vector<uint32_t>(q.rows, 1), {}, 0);
    b.start.push_back(q.start);
    b.slot.push_back(q.slot);
  }
  return b;
}

// float64 reference: out[row, h·hd + d] over the keys graph.h's CacheAttention lets the row see.
std::vector<double> reference(const Shape& s, const ir::Batch& b, const Inputs& in) {
  std::vector<double> out(size_t{b.tokens()} * s.width(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (uint32_t q = 0; q < b.seqs(); ++q) {
    const uint32_t start = b.start[q], n = b.seq_len(q);
    for (uint32_t i = 0; i < n; ++i) {
      const size_t pos = start + i, row = b.cu[q] + i;
      size_t lo = 0, hi = s.causal ? pos + 1 : start + n;
      if (s.window) {
        lo = pos + 1 > *s.window ? pos + 1 - *s.window : 0;
        hi = std::min(hi, pos + *s.window);
      }
      for (uint32_t h = 0; h < s.q_heads(); ++h) {
        const float* qv = &in.q[row * s.width() + size_t{h} * s.head_dim];
        const size_t col = size_t{h / s.group} * s.head_dim;
        std::vector<double> score(hi - lo);
        double mx = -INFINITY, sum = 0.0;
        for (size_t key = lo; key < hi; ++key) {
          const float* kv = &in.k[(size_t{b.slot[q]} * s.capacity + key) * s.kv_width() + col];
          double dot = 0.0;
          for (uint32_t d = 0; d < s.head_dim; ++d) dot += double{qv[d]} * kv[d];
          score[key - lo] = dot * scale;
          mx = std::max(mx, score[key - lo]);
        }
        for (double& x : score) sum += (x = std::exp(x - mx));
        for (size_t key = lo; key < hi; ++key) {
          const float* vv = &in.v[(size_t{b.slot[q]} * s.capacity + key) * s.kv_width() + col];
          for (uint32_t d = 0; d < s.head_dim; ++d) {
            out[row * s.width() + size_t{h} * s.head_dim + d] += score[key - lo] / sum * vv[d];
          }
        }
      }
    }
  }
  return out;
}

// The kernels' output for the batch over the bucket's rows (padding included), as floats.
std::vector<float> run_attention(const Shape& s, const ir::Batch& b, const Inputs& in) {
  DeviceBuffer k = upload(in.k, s.type), v = upload(in.v, s.type);
  std::vector<float> q_rows(size_t{s.bucket.tokens} * s.width(), 0.0f);
  std::copy(in.q.begin(), in.q.begin() + std::min(in.q.size(), q_rows.size()), q_rows.begin());
  DeviceBuffer q = upload(q_rows, s.type);
  DeviceBuffer out = upload(std::vector<float>(q_rows.size(), kSentinel), s.type);
  // Scratch starts as NaN: a partial read before it is written poisons the output.
  auto scratch = DeviceBuffer::make(cache_attention_scratch_bytes(s.bucket, s.op()), "partials");
  EXPECT_TRUE(scratch.ok());
  if (!scratch.ok()) return {};
  EXPECT_EQ(cudaMemsetAsync(scratch->data(), 0xff, scratch->bytes(), gpu().device->stream()), cudaSuccess);

  const kernels::CacheTable table{reinterpret_cast<uintptr_t>(k.data()), reinterpret_cast<uintptr_t>(v.data())};
  const IndexLayout layout = IndexLayout::for_bucket(s.bucket, 1);
  std::vector<uint32_t> words(layout.words, 0xdeadbeefu);
  fill_index(layout, b, words.data(), BoundCaches{&table, s.capacity});
  DeviceBuffer index = to_device(words);
  StepContext c;
  c.bucket = s.bucket;
  c.ix = index_pointers(layout, index.as<const unsigned>());
  c.tiles_max = layout.tiles_max;
  c.sms = static_cast<uint32_t>(gpu().device->info().sms);
  auto steps = cache_attention_steps(c, make_loc(q, ir::Rows::kTokens, s.width(), s.type, "q"),
                                     make_loc(out, ir::Rows::kTokens, s.width(), s.type, "out"), s.op(), s.type,
                                     scratch->data(), scratch->bytes(), s.tc);
  EXPECT_TRUE(steps.ok()) << steps.error().message();
  if (!steps.ok()) return {};
  const KernelId tc_ids[] = {KernelId::cache_attention_tc_f16_h32, KernelId::cache_attention_tc_f16_h64,
                             KernelId::cache_attention_tc_f16_h128, KernelId::cache_attention_tc_bf16_h32,
                             KernelId::cache_attention_tc_bf16_h64, KernelId::cache_attention_tc_bf16_h128};
  EXPECT_EQ(std::find(std::begin(tc_ids), std::end(tc_ids), (*steps)[0].id) != std::end(tc_ids), s.tc)
      << kernel_info((*steps)[0].id).entry;
  for (KernelStep& step : *steps) run_step(step);
  return download(out, q_rows.size(), s.type);
}

std::string describe(const Shape& s, const char* what) {
  return fmt::format("{} ({} {}, kv heads {} × group {}, head_dim {}, {}{})", what, dt_name(s.type),
                     s.tc ? "tensor cores" : "simt", s.kv_heads, s.group, s.head_dim, s.causal ? "causal" : "block",
                     s.window ? fmt::format(", window {}", *s.window) : "");
}

void check_case(const Shape& s, const std::vector<Seq>& seqs, std::mt19937& rng, const char* what) {
  const ir::Batch b = make_decoder_batch(seqs);
  ASSERT_LE(b.tokens(), s.bucket.tokens);
  const Inputs in = random_inputs(s, b.tokens(), rng);
  const std::vector<float> got = run_attention(s, b, in);
  expect_rows(got, reference(s, b, in), b.tokens(), s.width(), tolerance(s.type, s.tc), describe(s, what));
}

class CacheAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(77);
  }
  std::mt19937 rng_;
};

// Decode and verify: 1, 2 and 16 rows at positions from 0 to past a thousand (long ones split their
// keys), in slots out of order, with an empty sequence among them; every type and kernel.
const std::vector<Seq> kDecode = {{1, 0, 2}, {1, 1300, 0}, {2, 700, 3}, {0, 5, 1}, {16, 1100, 1}, {1, 260, 4}};

TEST_F(CacheAttentionTest, DecodeAndVerifyRowsEveryTypeAndKernel) {
  for (Dt type : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (bool tc : {false, true}) {
      if (tc && type == Dt::kF32) continue;
      Shape s;
      s.type = type;
      s.tc = tc;
      s.slots = 5;
      check_case(s, kDecode, rng_, "decode");
    }
  }
}

TEST_F(CacheAttentionTest, HeadDimsAndGqaGroups) {
  for (uint32_t head_dim : {32u, 64u, 128u}) {
    for (uint32_t group : {1u, 4u, 8u}) {
      for (bool tc : {false, true}) {
        Shape s;
        s.type = tc ? Dt::kF16 : Dt::kF32;
        s.tc = tc;
        s.head_dim = head_dim;
        s.group = group;
        s.kv_heads = group == 8 ? 1 : 2;
        s.capacity = 700;
        check_case(s, {{1, 600, 1}, {16, 300, 0}, {2, 20, 2}}, rng_, "head_dim and group");
      }
    }
  }
}

TEST_F(CacheAttentionTest, BlockRowsAndWindows) {
  for (bool causal : {true, false}) {
    for (std::optional<uint32_t> window : {std::optional<uint32_t>{}, std::optional<uint32_t>{100},
                                           std::optional<uint32_t>{1}, std::optional<uint32_t>{700}}) {
      for (bool tc : {false, true}) {
        Shape s;
        s.type = tc ? Dt::kBF16 : Dt::kF32;
        s.tc = tc;
        s.causal = causal;
        s.window = window;
        s.capacity = 1200;
        check_case(s, {{16, 1000, 3}, {1, 5, 0}, {2, 640, 1}, {16, 0, 2}}, rng_, "block and window");
      }
    }
  }
}

// A prefill chunk (multi-tile, never split) and mid-sized sequences whose tiles split a little, causal
// over a cache that holds the earlier chunks.
TEST_F(CacheAttentionTest, PrefillChunks) {
  for (Dt type : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
    for (bool tc : {false, true}) {
      if (tc && type == Dt::kF32) continue;
      Shape s;
      s.type = type;
      s.tc = tc;
      s.kv_heads = 1;
      s.bucket = ir::Bucket{256, 4, 256};
      s.capacity = 900;
      check_case(s, {{150, 400, 1}, {20, 700, 0}, {40, 33, 2}}, rng_, "prefill");
    }
  }
}

// Every row's bits are the same alone (small bucket) and inside a larger batch in a larger bucket.
TEST_F(CacheAttentionTest, RowsAreBitIdenticalAloneAndBatched) {
  for (Dt type : {Dt::kF32, Dt::kBF16}) {
    for (bool tc : {false, true}) {
      if (tc && type == Dt::kF32) continue;
      const std::vector<Seq> mine = {{1, 1300, 2}, {16, 900, 1}, {70, 200, 3}};
      for (const Seq& one : mine) {
        Shape alone;
        alone.type = type;
        alone.tc = tc;
        alone.bucket = ir::Bucket{96, 1, 96};
        alone.slots = 6;
        Shape batched = alone;
        batched.bucket = ir::Bucket{256, 8, 256};
        const std::vector<Seq> batch = {{3, 40, 0}, one, {16, 500, 4}, {1, 1400, 5}};
        const ir::Batch b = make_decoder_batch(batch);
        const Inputs in = random_inputs(batched, b.tokens(), rng_);
        Inputs in_alone = in;
        const size_t at = size_t{b.cu[1]} * alone.width();
        in_alone.q.assign(in.q.begin() + at, in.q.begin() + at + size_t{one.rows} * alone.width());
        const std::vector<float> got_batched = run_attention(batched, b, in);
        const std::vector<float> got_alone = run_attention(alone, make_decoder_batch({one}), in_alone);
        ASSERT_GE(got_alone.size(), in_alone.q.size());
        ASSERT_GE(got_batched.size(), at + in_alone.q.size());
        EXPECT_EQ(std::memcmp(got_alone.data(), got_batched.data() + at, in_alone.q.size() * sizeof(float)), 0)
            << describe(alone, "alone vs batched") << ", " << one.rows << " rows at " << one.start;
      }
    }
  }
}

TEST_F(CacheAttentionTest, LoweringRefusesShapesItCannotRun) {
  const auto message = [](const ir::CacheAttention& op) {
    const Status st = cache_attention_supported(op);
    return st.ok() ? std::string("ok") : st.error().message();
  };
  Shape s;
  ir::CacheAttention op = s.op();
  EXPECT_EQ(message(op), "ok");
  op.head_dim = 48;
  EXPECT_EQ(message(op), "cache_attention (8 query heads over 2 key heads of 48, cache 0): head_dim 48 (the CUDA "
                         "kernels take multiples of 32 up to 256)");
  op.head_dim = 288;
  EXPECT_EQ(message(op), "cache_attention (8 query heads over 2 key heads of 288, cache 0): head_dim 288 (the CUDA "
                         "kernels take multiples of 32 up to 256)");
  op = s.op();
  op.window = 0;
  EXPECT_EQ(message(op), "cache_attention (8 query heads over 2 key heads of 64, cache 0): a window of 0 leaves no "
                         "key visible");

  // Types and widths, at the launcher.
  DeviceBuffer b = to_device(std::vector<float>(size_t{64} * s.width(), 0.0f));
  StepContext c;
  c.bucket = s.bucket;
  auto steps = cache_attention_steps(c, make_loc(b, ir::Rows::kTokens, s.width(), Dt::kF16, "l.q"),
                                     make_loc(b, ir::Rows::kTokens, s.width(), Dt::kF16, "l.attn"), s.op(),
                                     Dt::kBF16, b.data(), b.bytes(), true);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.error().message(),
            "cache_attention (8 query heads over 2 key heads of 64, cache 0): queries 'l.q' (tokens × 512 f16) and "
            "output 'l.attn' (tokens × 512 f16) must have the bf16 cache's type");
  steps = cache_attention_steps(c, make_loc(b, ir::Rows::kTokens, s.width(), Dt::kF32, "l.q"),
                                make_loc(b, ir::Rows::kTokens, s.width(), Dt::kF32, "l.attn"), s.op(), Dt::kF32,
                                b.data(), 1024, false);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.error().message(),
            fmt::format("cache_attention (8 query heads over 2 key heads of 64, cache 0): the split partials need {} "
                        "bytes of scratch, the plan has 1024",
                        cache_attention_scratch_bytes(s.bucket, s.op())));
}

}  // namespace
}  // namespace tandem::cuda::test
