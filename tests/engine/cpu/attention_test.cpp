// Packed varlen attention on the CPU backend against a dense f64 version per sequence, over sequences
// of lengths 37, 0, 1, 150 and 5, with windows and without, alone and after RoPE.
#include <gtest/gtest.h>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

// The f64 reference of RoPE at positions start + i: the angle is the f32 product, like the backend's.
void naive_rope(std::vector<double>& x, size_t width, size_t col, size_t heads, size_t hd, float theta,
                const std::vector<uint32_t>& positions) {
  for (size_t r = 0; r < positions.size(); ++r) {
    for (size_t i = 0; i < hd / 2; ++i) {
      const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(hd));
      const double angle = static_cast<float>(positions[r]) * inv;
      for (size_t h = 0; h < heads; ++h) {
        double* xh = x.data() + r * width + col + h * hd;
        const double a = xh[i], b = xh[i + hd / 2];
        xh[i] = a * std::cos(angle) - b * std::sin(angle);
        xh[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

std::vector<double> naive_attention(const std::vector<double>& qkv, const std::vector<uint32_t>& cu, size_t heads,
                                    size_t hd, std::optional<uint32_t> window) {
  const size_t width = 3 * heads * hd;
  std::vector<double> out(qkv.size() / 3, 0.0);
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    for (size_t i = cu[s]; i < cu[s + 1]; ++i) {
      for (size_t h = 0; h < heads; ++h) {
        std::vector<double> p(cu[s + 1] - cu[s], 0.0);
        double top = -1e300, sum = 0;
        for (size_t j = cu[s]; j < cu[s + 1]; ++j) {
          const size_t dist = i > j ? i - j : j - i;
          if (window && dist > *window) continue;
          double dot = 0;
          for (size_t d = 0; d < hd; ++d) dot += qkv[i * width + h * hd + d] * qkv[j * width + (heads + h) * hd + d];
          p[j - cu[s]] = dot / std::sqrt(static_cast<double>(hd));
          top = std::max(top, p[j - cu[s]]);
        }
        for (size_t j = cu[s]; j < cu[s + 1]; ++j) {
          const size_t dist = i > j ? i - j : j - i;
          p[j - cu[s]] = window && dist > *window ? 0.0 : std::exp(p[j - cu[s]] - top);
          sum += p[j - cu[s]];
        }
        for (size_t j = cu[s]; j < cu[s + 1]; ++j) {
          for (size_t d = 0; d < hd; ++d) {
            out[i * heads * hd + h * hd + d] += p[j - cu[s]] / sum * qkv[j * width + (2 * heads + h) * hd + d];
          }
        }
      }
    }
  }
  return out;
}

struct AttentionCase {
  std::vector<uint32_t> lengths;
  uint32_t heads, head_dim;
  std::optional<uint32_t> window;
  bool rope;
};

void check_attention(const AttentionCase& c, size_t threads) {
  OpCase oc;
  for (uint32_t len : c.lengths) oc.add_sequence(len);
  const uint32_t width = 3 * c.heads * c.head_dim;
  const std::vector<float> x = random_values(size_t{oc.batch.tokens()} * width, 17, 1.5f);
  const ir::Val qkv = oc.input("qkv", width, x);
  if (c.rope) oc.graph.add_op(ir::Rope{qkv, 0, 2 * c.heads, c.head_dim, 10000.0f});
  const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, c.heads * c.head_dim, "out");
  oc.graph.add_op(ir::Attention{qkv, c.heads, c.head_dim, c.window, out});
  oc.graph.add_output("out", out);
  Runner runner(oc.graph, oc.weights, threads, best_isa());
  const ir::Outputs o = runner.run(oc.batch);

  std::vector<double> ref(x.begin(), x.end());
  if (c.rope) {
    std::vector<uint32_t> positions;
    for (uint32_t len : c.lengths) {
      for (uint32_t i = 0; i < len; ++i) positions.push_back(i);
    }
    naive_rope(ref, width, 0, 2 * c.heads, c.head_dim, 10000.0f, positions);
  }
  ASSERT_EQ(o.values.size(), 1u);
  expect_near(o.values[0].data, naive_attention(ref, oc.batch.cu, c.heads, c.head_dim, c.window), 2e-5,
              fmt::format("attention heads={} hd={} window={} rope={}", c.heads, c.head_dim,
                          c.window ? static_cast<int>(*c.window) : -1, c.rope));
}

TEST(CpuAttention, MatchesDenseMaskedAttention) {
  const std::vector<uint32_t> lengths = {37, 0, 1, 150, 5};
  for (bool rope : {false, true}) {
    for (std::optional<uint32_t> window : {std::optional<uint32_t>{}, std::optional<uint32_t>{16},
                                           std::optional<uint32_t>{0}}) {
      check_attention({lengths, 2, 64, window, rope}, 2);
    }
  }
  check_attention({{3, 70}, 3, 16, 4, true}, 3);
}

TEST(CpuAttention, EmptyAndSingleRowBatches) {
  check_attention({{}, 2, 64, std::nullopt, false}, 2);
  check_attention({{0}, 2, 64, 16, true}, 2);
  check_attention({{1}, 2, 64, 16, true}, 1);
}

TEST(CpuAttention, SequenceBitsDoNotDependOnNeighbours) {
  // The same 40-token sequence alone and between two others gives the same bits.
  const uint32_t heads = 2, hd = 64, width = 3 * heads * hd;
  const std::vector<float> seq = random_values(size_t{40} * width, 3);
  auto run = [&](uint32_t before, uint32_t after, size_t threads) {
    OpCase oc;
    oc.add_sequence(before);
    oc.add_sequence(40);
    oc.add_sequence(after);
    std::vector<float> x = random_values(size_t{oc.batch.tokens()} * width, 4 + before);
    std::copy(seq.begin(), seq.end(), x.begin() + size_t{before} * width);
    const ir::Val qkv = oc.input("qkv", width, x);
    oc.graph.add_op(ir::Rope{qkv, 0, 2 * heads, hd, 160000.0f});
    const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, heads * hd, "out");
    oc.graph.add_op(ir::Attention{qkv, heads, hd, 8, out});
    oc.graph.add_output("out", out);
    Runner runner(oc.graph, oc.weights, threads, best_isa());
    const std::vector<float> all = runner.run(oc.batch).values.at(0).data;
    return std::vector<float>(all.begin() + size_t{before} * heads * hd,
                              all.begin() + size_t{before + 40} * heads * hd);
  };
  const std::vector<float> alone = run(0, 0, 1);
  EXPECT_TRUE(same_bits(alone, run(13, 70, 2)));
  EXPECT_TRUE(same_bits(alone, run(100, 1, 3)));
}

}  // namespace
}  // namespace tandem::cpu::testing
