// Sampling pieces of the loop (dflash.md §1.8, §3.3): the counter-based draws, greedy ties, tempered top-p
// distributions, inverse-CDF sampling, both accept rules, and the selector's top-k and walk against a
// brute-force computation of its energies.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/spec/accept_impl.h"
#include "engine/ir/sampling.h"
#include "engine/spec/sampling_impl.h"
#include "engine/spec/selector_impl.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::spec {
namespace {

TEST(Draws, AreAPureFunctionOfTheirKeyAndUniform) {
  EXPECT_EQ(uniform(7, 100, Stream::kTarget), uniform(7, 100, Stream::kTarget));
  EXPECT_NE(uniform(7, 100, Stream::kTarget), uniform(7, 101, Stream::kTarget));
  EXPECT_NE(uniform(7, 100, Stream::kTarget), uniform(8, 100, Stream::kTarget));
  EXPECT_NE(uniform(7, 100, Stream::kTarget), uniform(7, 100, Stream::kAccept));
  EXPECT_NE(uniform(7, 100, Stream::kGumbel, 0), uniform(7, 100, Stream::kGumbel, 1));
  // 10 bins over 100000 positions: chi-square with 9 degrees of freedom below its 0.001 quantile.
  std::vector<double> bins(10, 0.0);
  for (uint32_t p = 0; p < 100000; ++p) {
    const double u = uniform(42, p, Stream::kTarget);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    bins[static_cast<size_t>(u * 10)] += 1;
  }
  double chi = 0;
  for (double b : bins) chi += (b - 10000) * (b - 10000) / 10000;
  EXPECT_LT(chi, 27.88);
  EXPECT_GT(uniform_open(0, 0, Stream::kGumbel), 0.0);
}

TEST(Greedy, ArgmaxTiesGoToTheLowerId) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(argmax(row), 1u);
  SamplingParams greedy;
  EXPECT_EQ(target_token(row, greedy, 17), 1u);
}

TEST(Tempered, IsTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> row = {1.0f, 3.0f, 0.0f, 2.0f};
  const Proposal p = tempered(row, 0.5f, 1.0f);
  ASSERT_EQ(p.ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  double z = 0;
  for (float x : row) z += std::exp(x / 0.5);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_NEAR(p.probs[i], std::exp(row[i] / 0.5) / z, 1e-12);
}

TEST(Tempered, TopPKeepsTheSmallestNucleusReachingP) {
  // Probabilities at T = 1: proportional to e^x; sorted 1 (0.64), 3 (0.24), 0 (0.09), 2 (0.03).
  const std::vector<float> row = {1.0f, 3.0f, 0.0f, 2.0f};
  EXPECT_EQ(tempered(row, 1.0f, 0.5f).ids, (std::vector<uint32_t>{1}));
  EXPECT_EQ(tempered(row, 1.0f, 0.7f).ids, (std::vector<uint32_t>{1, 3}));
  const Proposal p = tempered(row, 1.0f, 0.9f);
  ASSERT_EQ(p.ids, (std::vector<uint32_t>{0, 1, 3}));
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(p.probs[0], std::exp(1.0) / z, 1e-12);
  // Equal probabilities: the lower id joins the nucleus first.
  EXPECT_EQ(tempered(std::vector<float>{0.0f, 5.0f, 5.0f, 0.0f}, 1.0f, 0.4f).ids, (std::vector<uint32_t>{1}));
}

TEST(Sample, WalksTheCdfInIdOrder) {
  const Proposal p{{2, 5, 9}, {0.25, 0.5, 0.25}};
  EXPECT_EQ(sample(p, 0.0), 2u);
  EXPECT_EQ(sample(p, 0.2499), 2u);
  EXPECT_EQ(sample(p, 0.25), 5u);
  EXPECT_EQ(sample(p, 0.7499), 5u);
  EXPECT_EQ(sample(p, 0.75), 9u);
  EXPECT_EQ(sample(p, 0.999999), 9u);
}

ir::Tensor2 rows_of(const std::vector<std::vector<float>>& rows) {
  ir::Tensor2 t;
  t.rows = static_cast<uint32_t>(rows.size());
  t.width = static_cast<uint32_t>(rows[0].size());
  for (const auto& r : rows) t.data.insert(t.data.end(), r.begin(), r.end());
  return t;
}

// The target's token of each verify row at `start` (what the backend's Sample op gives).
std::vector<uint32_t> tokens_of(const ir::Tensor2& logits, const SamplingParams& s, uint32_t start) {
  std::vector<uint32_t> out;
  for (uint32_t r = 0; r < logits.rows; ++r) {
    out.push_back(target_token({logits.data.data() + size_t{r} * logits.width, logits.width}, s, start + r + 1));
  }
  return out;
}

TEST(AcceptMatch, GreedyKeepsTheLongestMatchingPrefixPlusABonus) {
  // Row i's argmax: 2, 0, 3, 1.
  const ir::Tensor2 logits = rows_of({{0, 1, 5, 0}, {4, 1, 0, 0}, {0, 0, 1, 2}, {0, 3, 0, 0}});
  const std::vector<uint32_t> tokens = tokens_of(logits, SamplingParams{}, 10);
  ASSERT_EQ(tokens, (std::vector<uint32_t>{2, 0, 3, 1}));
  Verdict v = accept_match(tokens, std::vector<uint32_t>{2, 0, 3});
  EXPECT_EQ(v.accepted, 3u);
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{2, 0, 3, 1}));
  v = accept_match(tokens, std::vector<uint32_t>{2, 1, 3});
  EXPECT_EQ(v.accepted, 1u);
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{2, 0}));
  v = accept_match(std::span<const uint32_t>(tokens).first(1), std::vector<uint32_t>{});
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{2}));
}

TEST(AcceptMatch, SampledTokensAreTheTargetsOwnSamplesForTheirPositions) {
  const ir::Tensor2 logits = rows_of({{0.3f, 0.1f, 0.9f}, {0.2f, 0.7f, 0.1f}, {1.0f, 0.0f, 0.5f}});
  const SamplingParams s{0.8f, 1.0f, 99};
  const uint32_t t0 = target_token({logits.data.data(), 3}, s, 21);
  const uint32_t t1 = target_token({logits.data.data() + 3, 3}, s, 22);
  const uint32_t t2 = target_token({logits.data.data() + 6, 3}, s, 23);
  const Verdict v = accept_match(tokens_of(logits, s, 20), std::vector<uint32_t>{t0, t1});
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{t0, t1, t2}));
}

// Rejection sampling on one row, drafts from q: the committed token follows p whatever q is.
TEST(AcceptReject, TheFirstTokenFollowsTheTargetForAnyProposal) {
  const std::vector<float> row = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f};
  const SamplingParams s{1.0f, 1.0f, 5};
  const Proposal p = tempered(row, 1.0f, 1.0f);
  const std::vector<Proposal> qs = {Proposal{{0, 1, 2, 3, 4}, {0.6, 0.1, 0.1, 0.1, 0.1}},
                                    Proposal{{4, 2}, {0.5, 0.5}}, Proposal{{3}, {1.0}}};
  const ir::Tensor2 logits = rows_of({row, row});
  for (const Proposal& q : qs) {
    std::vector<double> counts(5, 0.0);
    const uint32_t n = 40000;
    for (uint32_t seed = 0; seed < n; ++seed) {
      SamplingParams ss = s;
      ss.seed = seed;
      const uint32_t d = sample(q, uniform(seed, 1, Stream::kDraft));
      const Verdict v = accept_reject(logits, std::vector<uint32_t>{d}, std::vector<Proposal>{q}, ss, 0);
      counts[v.committed[0]] += 1;
    }
    double chi = 0;
    for (uint32_t i = 0; i < 5; ++i) chi += std::pow(counts[i] - n * p.probs[i], 2) / (n * p.probs[i]);
    EXPECT_LT(chi, 18.47) << "chi-square with 4 degrees of freedom, 0.001 quantile";
  }
}

TEST(AcceptReject, AcceptsDraftsTheTargetCertainlyWants) {
  // p is one-hot at 1 (huge gap) and q proposes 1: always accepted; a draft of 0 is always replaced by 1.
  const ir::Tensor2 logits = rows_of({{0, 100, 0}, {0, 0, 100}, {100, 0, 0}});
  const SamplingParams s{1.0f, 1.0f, 3};
  const std::vector<Proposal> q = {Proposal{{1}, {1.0}}, Proposal{{2}, {1.0}}};
  Verdict v = accept_reject(logits, std::vector<uint32_t>{1, 2}, q, s, 0);
  EXPECT_EQ(v.accepted, 2u);
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{1, 2, 0}));
  const std::vector<Proposal> q0 = {Proposal{{0}, {1.0}}, Proposal{{2}, {1.0}}};
  v = accept_reject(logits, std::vector<uint32_t>{0, 2}, q0, s, 0);
  EXPECT_EQ(v.accepted, 0u);
  EXPECT_EQ(v.committed, (std::vector<uint32_t>{1}));
}

TEST(Selector, TopKSortsByValueWithTiesToTheLowerId) {
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, -2.0f, 5.0f, 3.0f};
  const Candidates c = top_k(row, 4);
  EXPECT_EQ(c.ids, (std::vector<uint32_t>{4, 1, 2, 5}));
  EXPECT_EQ(c.values, (std::vector<float>{5.0f, 3.0f, 3.0f, 3.0f}));
}

struct Books {
  io::HostTensors source;
  std::unique_ptr<models::dflash::Codebooks> books;
  std::vector<float> p, c;
};

std::unique_ptr<Books> books(uint32_t vocab, uint32_t rank, uint64_t seed) {
  auto b = std::make_unique<Books>();
  tandem::testing::Rand r(seed);
  b->p = r.fill(size_t{vocab} * rank, 1.0f);
  b->c = r.fill(size_t{vocab} * rank, 1.0f);
  b->source.add(io::HostTensor::from_f32("p", {vocab, rank}, b->p, DType::kBF16));
  b->source.add(io::HostTensor::from_f32("c", {vocab, rank}, b->c, DType::kBF16));
  b->books = std::make_unique<models::dflash::Codebooks>(*b->source.tensor("p"), *b->source.tensor("c"));
  // The bf16 values the selector reads.
  for (uint32_t t = 0; t < vocab; ++t) {
    b->books->predecessor(t, {b->p.data() + size_t{t} * rank, rank});
    b->books->successor(t, {b->c.data() + size_t{t} * rank, rank});
  }
  return b;
}

TEST(Selector, GreedyWalkFollowsTheBestEnergyFromEachPick) {
  const uint32_t vocab = 12, rank = 3, rows = 4;
  auto b = books(vocab, rank, 1);
  tandem::testing::Rand r(2);
  const ir::Tensor2 logits = ir::Tensor2::of(rows, vocab, r.fill(size_t{rows} * vocab, 3.0f));
  const ir::Tensor2 sel = ir::Tensor2::of(rows, rank, r.fill(size_t{rows} * rank, 2.0f));
  const SelectorParams params{4, 2.5f, 0.7f};
  const Walk w = select(logits, sel, 7, *b->books, params, 0.0f, 0, 0);
  ASSERT_EQ(w.path.size(), rows);
  uint32_t prev = 7;
  for (uint32_t l = 0; l < rows; ++l) {
    const Candidates c = top_k({logits.data.data() + size_t{l} * vocab, vocab}, 4);
    EXPECT_EQ(w.candidates[l].ids, c.ids);
    double best = -1e300;
    uint32_t pick = 0;
    for (uint32_t k = 0; k < 4; ++k) {
      double e = 2.5 * std::tanh(0.7 * c.values[k] / 2.5);
      for (uint32_t j = 0; j < rank; ++j) e += double{b->p[prev * rank + j]} * sel.at(l, j) * b->c[c.ids[k] * rank + j];
      if (e > best) best = e, pick = c.ids[k];
    }
    EXPECT_EQ(w.path[l], pick) << "row " << l;
    prev = w.path[l];
  }
}

TEST(Selector, GumbelWalkSamplesTheSoftmaxOfItsEnergies) {
  const uint32_t vocab = 10, rank = 2;
  auto b = books(vocab, rank, 3);
  tandem::testing::Rand r(4);
  const ir::Tensor2 logits = ir::Tensor2::of(1, vocab, r.fill(vocab, 2.0f));
  const ir::Tensor2 sel = ir::Tensor2::of(1, rank, r.fill(rank, 1.0f));
  const SelectorParams params{5, 0.0f, 1.0f};
  const Walk first = select(logits, sel, 3, *b->books, params, 0.7f, 0, 0);
  const Proposal& q = first.proposals[0];
  std::map<uint32_t, double> counts;
  const uint32_t n = 30000;
  for (uint32_t seed = 0; seed < n; ++seed) counts[select(logits, sel, 3, *b->books, params, 0.7f, seed, 0).path[0]]++;
  double chi = 0;
  for (size_t k = 0; k < q.ids.size(); ++k) chi += std::pow(counts[q.ids[k]] - n * q.probs[k], 2) / (n * q.probs[k]);
  EXPECT_LT(chi, 18.47) << "chi-square with 4 degrees of freedom, 0.001 quantile";
}

}  // namespace
}  // namespace tandem::spec
