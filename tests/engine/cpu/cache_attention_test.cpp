// CacheAppend + CacheAttention on the CPU backend against an f64 model of the caches: causal and block
// modes, windows, GQA, several sequences in scattered slots, empty and one-row sequences, and rounds
// that continue earlier ones; and the keys a DFlash block row sees after its context, spelled out.
#include <gtest/gtest.h>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

constexpr uint32_t kSlots = 4, kCapacity = 64;

struct Seq {
  uint32_t slot, start, len;
};

struct CacheCase {
  uint32_t q_heads, kv_heads, head_dim;
  bool causal;
  std::optional<uint32_t> window;
};

// The f64 model: what each slot holds at each position after the appends so far.
struct ModelCache {
  uint32_t width;
  std::vector<std::vector<double>> k, v;  // [slot][pos · width + c]
  explicit ModelCache(uint32_t w) : width(w), k(kSlots, std::vector<double>(kCapacity * w)), v(k) {}
};

class CacheHarness {
 public:
  CacheHarness(CacheCase c, size_t threads, Isa isa) : c_(c), backend_(make_cpu_backend(threads, isa)) {}

  // One batch: appends each sequence's rows, attends, and checks the result; returns the output rows.
  std::vector<float> round(const std::vector<Seq>& seqs, uint32_t seed, ModelCache& model) {
    OpCase oc;
    oc.graph.add_cache("layer0", c_.kv_heads * c_.head_dim);
    for (const Seq& s : seqs) {
      oc.add_sequence(s.len);
      oc.batch.start.push_back(s.start);
      oc.batch.slot.push_back(s.slot);
    }
    const uint32_t qw = c_.q_heads * c_.head_dim, kw = c_.kv_heads * c_.head_dim, t = oc.batch.tokens();
    const std::vector<float> q = random_values(size_t{t} * qw, seed, 1.5f);
    const std::vector<float> k = random_values(size_t{t} * kw, seed + 1, 1.5f);
    const std::vector<float> v = random_values(size_t{t} * kw, seed + 2);
    const ir::Val qv = oc.input("q", qw, q), kv = oc.input("k", kw, k), vv = oc.input("v", kw, v);
    oc.graph.add_op(ir::CacheAppend{kv, vv, 0, 0, 0});
    const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, qw, "out");
    oc.graph.add_op(ir::CacheAttention{qv, 0, c_.q_heads, c_.kv_heads, c_.head_dim, c_.causal, c_.window, out, 0});
    oc.graph.add_output("out", out);
    // Every round's graph has the same cache list, so the first round's state serves them all.
    if (!state_) state_ = std::move(backend_->create_state(oc.graph, kSlots, kCapacity)).value();
    auto w = backend_->upload(oc.weights, std::vector<const ir::Graph*>{&oc.graph});
    EXPECT_TRUE(w.ok());
    const ir::Bucket bucket{t + 1, static_cast<uint32_t>(seqs.size()) + 1, 1};
    auto plan = backend_->lower(**w, oc.graph, bucket);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message());
    ir::Outputs o;
    const Status st = backend_->run(**plan, oc.batch, state_.get(), o);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());

    // Model: append, then attend in f64.
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (uint32_t i = 0; i < seqs[s].len; ++i) {
        const size_t row = oc.batch.cu[s] + i;
        for (uint32_t c = 0; c < kw; ++c) {
          model.k[seqs[s].slot][(seqs[s].start + i) * size_t{kw} + c] = k[row * kw + c];
          model.v[seqs[s].slot][(seqs[s].start + i) * size_t{kw} + c] = v[row * kw + c];
        }
      }
    }
    std::vector<double> want(size_t{t} * qw, 0.0);
    const uint32_t hd = c_.head_dim, group = c_.q_heads / c_.kv_heads;
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (uint32_t i = 0; i < seqs[s].len; ++i) {
        const size_t row = oc.batch.cu[s] + i;
        const int64_t pos = seqs[s].start + i;
        for (uint32_t h = 0; h < c_.q_heads; ++h) {
          const uint32_t g = h / group;
          std::vector<std::pair<int64_t, double>> scores;
          const int64_t end = c_.causal ? pos + 1 : seqs[s].start + seqs[s].len;
          for (int64_t kp = 0; kp < end; ++kp) {
            if (c_.window && std::llabs(pos - kp) >= *c_.window) continue;
            double dot = 0;
            for (uint32_t d = 0; d < hd; ++d) {
              dot += double{q[row * qw + h * hd + d]} * model.k[seqs[s].slot][kp * kw + g * hd + d];
            }
            scores.push_back({kp, dot / std::sqrt(static_cast<double>(hd))});
          }
          double top = -1e300, sum = 0;
          for (auto& [kp, sc] : scores) top = std::max(top, sc);
          for (auto& [kp, sc] : scores) sum += std::exp(sc - top);
          for (auto& [kp, sc] : scores) {
            for (uint32_t d = 0; d < hd; ++d) {
              want[row * qw + h * hd + d] += std::exp(sc - top) / sum * model.v[seqs[s].slot][kp * kw + g * hd + d];
            }
          }
        }
      }
    }
    const std::vector<float> got = o.values.empty() ? std::vector<float>{} : o.values[0].data;
    expect_near(got, want, 2e-5,
                fmt::format("cache attention causal={} window={} q_heads={} kv_heads={}", c_.causal,
                            c_.window ? static_cast<int>(*c_.window) : -1, c_.q_heads, c_.kv_heads));
    return got;
  }

 private:
  CacheCase c_;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<ir::State> state_;
};

const std::vector<std::vector<Seq>> kRounds = {
    {{2, 0, 7}, {0, 0, 12}},                 // prefill two slots
    {{0, 12, 5}, {2, 7, 1}, {1, 0, 0}},      // continue, one row, an empty sequence
    {},                                      // nothing at all
    {{1, 0, 1}, {3, 0, 20}, {2, 8, 16}},     // a new slot and a block that follows a round
};

TEST(CpuCacheAttention, MatchesModelAcrossRounds) {
  for (bool causal : {true, false}) {
    for (std::optional<uint32_t> window : {std::optional<uint32_t>{}, std::optional<uint32_t>{4}}) {
      for (CacheCase c : {CacheCase{4, 2, 16, causal, window}, CacheCase{3, 3, 32, causal, window},
                          CacheCase{8, 1, 8, causal, window}}) {
        CacheHarness harness(c, 2, best_isa());
        ModelCache model(c.kv_heads * c.head_dim);
        uint32_t seed = 100;
        for (const auto& r : kRounds) harness.round(r, seed += 10, model);
      }
    }
  }
}

TEST(CpuCacheAttention, BitsIndependentOfThreadsAndSimdLevel) {
  const CacheCase c{4, 2, 16, true, 6};
  std::vector<std::vector<float>> reference;
  {
    CacheHarness h(c, 1, Isa::kBase);
    ModelCache model(c.kv_heads * c.head_dim);
    uint32_t seed = 7;
    for (const auto& r : kRounds) reference.push_back(h.round(r, seed += 10, model));
  }
  for (Isa isa : supported_isas()) {
    for (size_t threads : {2, 3}) {
      CacheHarness h(c, threads, isa);
      ModelCache model(c.kv_heads * c.head_dim);
      uint32_t seed = 7;
      for (size_t i = 0; i < kRounds.size(); ++i) {
        EXPECT_TRUE(same_bits(h.round(kRounds[i], seed += 10, model), reference[i]))
            << "round " << i << ", threads " << threads << ", " << to_string(isa);
      }
    }
  }
}

// The key positions each row of a block of 4 rows at positions 6..9 attends to, after 6 context rows:
// values are one-hot in the key's position and q = 0 (every visible key scores the same), so output
// column p is 1/|visible| where position p is visible and 0 elsewhere.
std::vector<std::vector<uint32_t>> visible_keys(bool causal, std::optional<uint32_t> window) {
  constexpr uint32_t kContext = 6, kBlock = 4, kWidth = 16;
  auto backend = make_cpu_backend(1, best_isa());
  std::unique_ptr<ir::State> state;
  std::vector<float> block_out;
  for (const auto& [start, len] : {std::pair{0u, kContext}, std::pair{kContext, kBlock}}) {
    OpCase oc;
    oc.graph.add_cache("layer0", kWidth);
    oc.add_sequence(len);
    oc.batch.start.push_back(start);
    oc.batch.slot.push_back(0);
    std::vector<float> v(size_t{len} * kWidth, 0.0f);
    for (uint32_t i = 0; i < len; ++i) v[size_t{i} * kWidth + start + i] = 1.0f;
    const ir::Val qv = oc.input("q", kWidth, std::vector<float>(size_t{len} * kWidth, 0.0f));
    const ir::Val kv = oc.input("k", kWidth, random_values(size_t{len} * kWidth, start + 1));
    const ir::Val vv = oc.input("v", kWidth, v);
    oc.graph.add_op(ir::CacheAppend{kv, vv, 0, 0, 0});
    const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, kWidth, "out");
    oc.graph.add_op(ir::CacheAttention{qv, 0, 1, 1, kWidth, causal, window, out, 0});
    oc.graph.add_output("out", out);
    if (!state) state = std::move(backend->create_state(oc.graph, 1, kWidth)).value();
    auto w = backend->upload(oc.weights, std::vector<const ir::Graph*>{&oc.graph});
    EXPECT_TRUE(w.ok());
    auto plan = backend->lower(**w, oc.graph, ir::Bucket{len, 1, 1});
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message());
    ir::Outputs o;
    const Status st = backend->run(**plan, oc.batch, state.get(), o);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
    block_out = o.values.empty() ? std::vector<float>{} : o.values[0].data;
  }
  std::vector<std::vector<uint32_t>> seen(kBlock);
  if (block_out.size() != size_t{kBlock} * kWidth) return seen;
  for (uint32_t i = 0; i < kBlock; ++i) {
    for (uint32_t p = 0; p < kWidth; ++p) {
      if (block_out[size_t{i} * kWidth + p] > 0.0f) seen[i].push_back(p);
    }
    for (uint32_t p : seen[i]) {
      EXPECT_FLOAT_EQ(block_out[size_t{i} * kWidth + p], 1.0f / static_cast<float>(seen[i].size()));
    }
  }
  return seen;
}

// z-lab's mask (dflash/model.py _attention_mask): causal keeps keys at or before the row; a window keeps
// q − k < window, and for a non-causal row also k − q < window.
TEST(CpuCacheAttention, BlockRowsSeeTheKeysOfZLabsMask) {
  using Keys = std::vector<std::vector<uint32_t>>;
  EXPECT_EQ(visible_keys(true, 3), (Keys{{4, 5, 6}, {5, 6, 7}, {6, 7, 8}, {7, 8, 9}}));
  EXPECT_EQ(visible_keys(false, 3), (Keys{{4, 5, 6, 7, 8}, {5, 6, 7, 8, 9}, {6, 7, 8, 9}, {7, 8, 9}}));
  EXPECT_EQ(visible_keys(true, std::nullopt),
            (Keys{{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8},
                  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}));
  const std::vector<uint32_t> all{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(visible_keys(false, std::nullopt), (Keys{all, all, all, all}));
}

}  // namespace
}  // namespace tandem::cpu::testing
