// Lossless with long accepted runs and KV crops (dflash.md §1.6-1.7). A constructed target whose greedy
// next token is π(last token) for a permutation π (identity on most tokens, plus a few cycles), and v1
// and v2 drafters that draft π(anchor) on every row: anchors whose image is a fixed point accept whole
// blocks, anchors on a cycle accept one draft and crop the rest. The output must equal plain greedy
// decoding, and the acceptance histogram must show both kinds of round.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tests/engine/spec/harness.h"

namespace tandem::spec {
namespace {

using tandem::testing::Rand;

constexpr uint32_t kVocab = 32, kHidden = 32, kMask = 31;
// π: cycles (1 2 3) (4 5) (6 7 8 9 10); every other token is a fixed point.
uint32_t pi(uint32_t t) {
  if (t >= 1 && t <= 3) return t == 3 ? 1 : t + 1;
  if (t == 4 || t == 5) return t == 4 ? 5 : 4;
  if (t >= 6 && t <= 10) return t == 10 ? 6 : t + 1;
  return t;
}

void set(tandem::testing::TinyTarget& m, const std::string& name, std::vector<uint64_t> shape, std::vector<float> v) {
  tandem::testing::put(m.tensors, *m.weights, io::HostTensor::from_f32(name, std::move(shape), v));
}
void set(tandem::testing::TinyDrafter& m, const std::string& name, std::vector<uint64_t> shape, std::vector<float> v) {
  tandem::testing::put(m.tensors, *m.weights, io::HostTensor::from_f32(name, std::move(shape), v));
}

std::vector<float> identity(uint32_t n) {
  std::vector<float> v(size_t{n} * n, 0.0f);
  for (uint32_t i = 0; i < n; ++i) v[size_t{i} * n + i] = 1.0f;
  return v;
}

// Tied target: embedding rows random unit vectors (the mask's zero), o_proj and down_proj zero so the
// residual stream stays the token's embedding, unit norms, and an untied head whose row π(t) is E[t].
tandem::testing::TinyTarget make_target() {
  tandem::testing::TargetShape shape;
  shape.vocab = kVocab;
  shape.hidden = kHidden;
  tandem::testing::TinyTarget t = tandem::testing::random_target(shape, 7);
  Rand r(8);
  std::vector<float> e(size_t{kVocab} * kHidden, 0.0f), head(e.size(), 0.0f);
  for (uint32_t tok = 0; tok < kVocab; ++tok) {
    if (tok == kMask) continue;
    std::vector<float> row = r.fill(kHidden, 1.0f);
    float n = 0.0f;
    for (float x : row) n += x * x;
    for (uint32_t c = 0; c < kHidden; ++c) e[size_t{tok} * kHidden + c] = row[c] / std::sqrt(n);
  }
  for (uint32_t tok = 0; tok < kVocab; ++tok) {
    std::copy_n(e.begin() + ptrdiff_t{tok} * kHidden, kHidden, head.begin() + ptrdiff_t{pi(tok)} * kHidden);
  }
  set(t, "model.embed_tokens.weight", {kVocab, kHidden}, e);
  set(t, "lm_head.weight", {kVocab, kHidden}, head);
  set(t, "model.norm.weight", {kHidden}, std::vector<float>(kHidden, 1.0f));
  for (uint32_t l = 0; l < shape.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    set(t, p + "self_attn.o_proj.weight", {kHidden, uint64_t{shape.heads} * shape.head_dim},
        std::vector<float>(size_t{kHidden} * shape.heads * shape.head_dim, 0.0f));
    set(t, p + "mlp.down_proj.weight", {kHidden, shape.ffn}, std::vector<float>(size_t{kHidden} * shape.ffn, 0.0f));
  }
  return t;
}

// fc zero (no context signal), Wq zero (uniform attention), Wv = Wo = I, down_proj zero, unit norms: every
// block row ends up along the anchor's embedding and drafts π(anchor). v2: identity convolutions and a
// selector without bonus.
tandem::testing::TinyDrafter make_drafter(const io::Qwen3Config& target, uint32_t version) {
  tandem::testing::DrafterShape s;
  s.version = version;
  s.heads = s.kv_heads = 4;
  s.head_dim = 8;
  s.mask = kMask;
  s.block = 8;
  s.softcap = 0.0f;
  s.out_mult = 1.0f;
  tandem::testing::TinyDrafter d = tandem::testing::random_drafter(target, s, 9);
  const uint64_t h = kHidden, tw = s.taps.size() * h;
  set(d, "fc.weight", {h, tw}, std::vector<float>(h * tw, 0.0f));
  set(d, "norm.weight", {h}, std::vector<float>(h, 1.0f));
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    set(d, p + "input_layernorm.weight", {h}, std::vector<float>(h, 1.0f));
    set(d, p + "post_attention_layernorm.weight", {h}, std::vector<float>(h, 1.0f));
    set(d, p + "self_attn.q_proj.weight", {h, h}, std::vector<float>(h * h, 0.0f));
    set(d, p + "self_attn.v_proj.weight", {h, h}, identity(kHidden));
    set(d, p + "self_attn.o_proj.weight", {h, h}, identity(kHidden));
    set(d, p + "mlp.down_proj.weight", {h, s.ffn}, std::vector<float>(h * s.ffn, 0.0f));
    if (version != 2) continue;
    const uint64_t taps = s.conv_taps, groups = h / s.group;
    std::vector<float> base(2 * taps * h, 0.0f);
    for (uint64_t st = 0; st < 2; ++st) std::fill_n(base.begin() + static_cast<ptrdiff_t>(st * taps * h), h, 1.0f);
    for (const char* conv : {"attention_conv.", "mlp_conv."}) {
      set(d, p + conv + "base_kernel", {2, taps, h}, base);
      set(d, p + conv + "kernel_projection.weight", {2 * taps * groups, h},
          std::vector<float>(2 * taps * groups * h, 0.0f));
    }
  }
  if (version == 2) {
    set(d, "candidate_selector.hidden_projection.weight", {s.rank, h}, std::vector<float>(s.rank * h, 0.0f));
  }
  return d;
}

class HighAcceptanceTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(HighAcceptanceTest, LongRunsAndCropsBothLossless) {
  const uint32_t version = GetParam();
  const tandem::testing::TinyTarget target = make_target();
  const tandem::testing::TinyDrafter drafter = make_drafter(target.cfg, version);
  // Prompts ending on fixed points (whole blocks), on cycles (one draft, then a crop), and mixed.
  const std::vector<std::vector<uint32_t>> prompts = {{12, 13, 14}, {20}, {2}, {5, 9, 7}, {11, 4}, {1, 30, 6},
                                                      {29, 28}};
  std::vector<RequestParams> params;
  for (const auto& p : prompts) params.push_back({p, 40, {}, {}});
  testing::Harness h = testing::make_harness(target, &drafter, static_cast<uint32_t>(params.size()), 64);
  ASSERT_TRUE(h.drafter);
  const std::vector<Request> plain = testing::run_alone(h, params, false, {});
  for (size_t i = 0; i < prompts.size(); ++i) {
    // The construction works: greedy decoding follows π.
    uint32_t t = prompts[i].back();
    for (uint32_t g : testing::generated(plain[i])) ASSERT_EQ(g, t = pi(t)) << "prompt " << i;
  }
  for (uint32_t block : {4u, 8u, 16u}) {
    GenerateOptions opt;
    opt.block = block;
    opt.trace = true;
    const std::vector<Request> batched = testing::run_batched(h, params, true, opt);
    const std::vector<Request> alone = testing::run_alone(h, params, true, opt);
    std::vector<uint32_t> histogram(block + 1, 0);
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(testing::generated(batched[i]), testing::generated(plain[i])) << "block " << block << " prompt " << i;
      ASSERT_EQ(testing::generated(alone[i]), testing::generated(plain[i])) << "block " << block << " prompt " << i;
      for (uint32_t len : batched[i].accept_lengths) ++histogram[len];
      // Traces: every round drafts B − 1 tokens at the round's start, all π(anchor).
      for (const RoundTrace& rt : batched[i].trace) {
        ASSERT_EQ(rt.drafted.size(), block - 1);
        const uint32_t anchor = batched[i].tokens[rt.start];
        for (uint32_t d : rt.drafted) EXPECT_EQ(d, pi(anchor));
      }
    }
    // Whole blocks accepted (fixed points) and one-draft rounds that crop B − 2 rows (cycles).
    EXPECT_GT(histogram[block], 0u) << "block " << block;
    EXPECT_GT(histogram[2], 0u) << "block " << block;
    // A request on a fixed point commits a whole block per round: 40 tokens in ceil(39 / B) rounds + prefill.
    EXPECT_EQ(batched[1].rounds, (39 + block - 1) / block) << "block " << block;
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, HighAcceptanceTest, ::testing::Values(1u, 2u),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

}  // namespace
}  // namespace tandem::spec
