// Lossless at temperature > 0 (dflash.md §1.8): over 12000 fixed seeds, tokens 2 and 3 of a generation
// (committed by verify rounds, not by prefill) follow the target's own tempered, top-p distribution, by a
// chi-square test against the exact marginals computed from the target's logits, for sample-and-match
// and rejection sampling with v1 and v2 drafters. Sample-and-match must also reproduce plain sampling
// token for token, and a deliberately lossy verifier must fail the same chi-square test.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/spec/sampling_impl.h"
#include "tests/engine/spec/harness.h"
#include "tests/engine/spec/chi_square.h"

namespace tandem::spec {
namespace {

constexpr uint32_t kVocab = 8, kSeeds = 12000, kGroup = 1000, kBlock = 4;
const std::vector<uint32_t> kPrompt = {3, 1, 4};

// With 26 tables tested, a correct sampler fails one by chance with probability about 0.003.
using tandem::testing::chi_critical;
using tandem::testing::chi_square;

class Sampled {
 public:
  Sampled(uint32_t version, SamplingParams sampling) : sampling_(sampling) {
    tandem::testing::TargetShape ts;
    ts.vocab = kVocab;
    target_ = tandem::testing::random_target(ts, 301);
    tandem::testing::DrafterShape ds;
    ds.version = version;
    ds.mask = kVocab - 1;
    ds.top_k = 3;
    drafter_ = tandem::testing::random_drafter(target_.cfg, ds, 302);
    h_ = testing::make_harness(target_, &drafter_, kGroup, 16, /*host_logits=*/true);
  }

  // Exact joint distribution of the first three generated tokens.
  std::map<std::vector<uint32_t>, double> exact() {
    std::map<std::vector<uint32_t>, double> joint;
    const Proposal p1 = dist({});
    for (size_t a = 0; a < p1.ids.size(); ++a) {
      const Proposal p2 = dist({p1.ids[a]});
      for (size_t b = 0; b < p2.ids.size(); ++b) {
        const Proposal p3 = dist({p1.ids[a], p2.ids[b]});
        for (size_t c = 0; c < p3.ids.size(); ++c) {
          joint[{p1.ids[a], p2.ids[b], p3.ids[c]}] = p1.probs[a] * p2.probs[b] * p3.probs[c];
        }
      }
    }
    return joint;
  }

  // Generations for seeds 0..kSeeds-1, in groups of kGroup requests per generate() call.
  std::vector<std::vector<uint32_t>> run(bool speculative, VerifyMode mode, bool lossy = false) {
    std::vector<std::vector<uint32_t>> out;
    for (uint32_t first = 0; first < kSeeds; first += kGroup) {
      std::vector<RequestParams> params;
      for (uint32_t s = first; s < first + kGroup; ++s) {
        SamplingParams sp = sampling_;
        sp.seed = s;
        params.push_back({kPrompt, 3, {}, sp});
      }
      GenerateOptions opt;
      opt.block = kBlock;
      opt.mode = mode;
      std::vector<Request> reqs = lossy ? run_lossy(params) : testing::run_batched(h_, params, speculative, opt);
      for (const Request& r : reqs) {
        out.push_back(testing::generated(r));
        drafted_ += r.drafted;
        accepted_ += r.accepted;
      }
    }
    return out;
  }

  uint32_t drafted_ = 0, accepted_ = 0;

 private:
  Proposal dist(const std::vector<uint32_t>& generated) {
    std::vector<uint32_t> ids = kPrompt;
    ids.insert(ids.end(), generated.begin(), generated.end());
    EXPECT_TRUE(h_.target->cache().crop(0, 0).ok());
    std::vector<models::qwen3::TargetOut> out;
    const models::qwen3::TargetRows rows{0, ids, models::qwen3::LogitRows::kLast, {}};
    EXPECT_TRUE(h_.target->forward({&rows, 1}, out).ok());
    return tempered(out[0].logits.data, sampling_.temperature, sampling_.top_p);
  }

  // The loop's steps with a broken verifier: every draft claims a vanishing proposal probability, so
  // rejection sampling accepts them all and the output follows the drafter.
  std::vector<Request> run_lossy(const std::vector<RequestParams>& params) {
    std::vector<Request> reqs;
    std::vector<Request*> ptrs;
    for (size_t i = 0; i < params.size(); ++i) {
      reqs.push_back(*make_request(params[i], static_cast<uint32_t>(i), kVocab));
    }
    for (Request& r : reqs) ptrs.push_back(&r);
    EXPECT_TRUE(prefill(*h_.target, ptrs).ok());
    EXPECT_TRUE(settle(*h_.drafter, ptrs).ok());
    std::vector<Draft> drafts;
    EXPECT_TRUE(draft(*h_.drafter, ptrs, kBlock, VerifyMode::kReject, drafts).ok());
    for (Draft& d : drafts) {
      for (size_t i = 0; i < d.tokens.size(); ++i) d.proposals[i] = Proposal{{d.tokens[i]}, {1e-12}};
    }
    EXPECT_TRUE(verify(*h_.target, ptrs, drafts, VerifyMode::kReject, false).ok());
    return reqs;
  }

  SamplingParams sampling_;
  tandem::testing::TinyTarget target_;
  tandem::testing::TinyDrafter drafter_;
  testing::Harness h_;
};

// Marginal of token `index` and the joint of tokens 0..1 from the exact joint and from the runs.
struct Tables {
  std::map<std::vector<uint32_t>, double> expected, observed;
};
Tables project(const std::map<std::vector<uint32_t>, double>& joint, const std::vector<std::vector<uint32_t>>& runs,
               std::vector<size_t> keep) {
  Tables t;
  auto key = [&](const std::vector<uint32_t>& seq) {
    std::vector<uint32_t> k;
    for (size_t i : keep) k.push_back(seq[i]);
    return k;
  };
  for (const auto& [seq, p] : joint) t.expected[key(seq)] += p;
  for (const auto& seq : runs) {
    if (seq.size() == 3) t.observed[key(seq)] += 1;
  }
  return t;
}

void expect_follows_target(const std::map<std::vector<uint32_t>, double>& joint,
                           const std::vector<std::vector<uint32_t>>& runs, const std::string& what) {
  for (const auto& keep : {std::vector<size_t>{1}, std::vector<size_t>{2}, std::vector<size_t>{0, 1},
                           std::vector<size_t>{1, 2}}) {
    const Tables t = project(joint, runs, keep);
    const auto [chi, df] = chi_square(t.expected, t.observed, static_cast<double>(runs.size()));
    ASSERT_GE(df, 2u) << what << ": the distribution is too peaked to test";
    EXPECT_LT(chi, chi_critical(df)) << what << ": tokens " << ::testing::PrintToString(keep) << ", " << df
                                     << " degrees of freedom";
  }
}

struct Case {
  uint32_t version;
  VerifyMode mode;
  float temperature;
  float top_p;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << "v" << c.version << (c.mode == VerifyMode::kMatch ? "_match" : "_reject") << "_t_" << c.temperature
      << "_top_p_" << c.top_p;
}

class LosslessSamplingTest : public ::testing::TestWithParam<Case> {};

TEST_P(LosslessSamplingTest, GeneratedTokensFollowTheTargetsDistribution) {
  const Case& c = GetParam();
  Sampled s(c.version, SamplingParams{c.temperature, c.top_p, 0});
  const auto joint = s.exact();
  const auto runs = s.run(true, c.mode);
  ASSERT_EQ(runs.size(), kSeeds);
  for (const auto& r : runs) ASSERT_EQ(r.size(), 3u);
  expect_follows_target(joint, runs, "speculative");
  // Both kinds of verify outcome happened.
  EXPECT_GT(s.accepted_, 0u);
  EXPECT_LT(s.accepted_, s.drafted_);
  if (c.mode == VerifyMode::kMatch) {
    // Sample-and-match commits the target's own samples: identical to plain sampling, seed by seed.
    EXPECT_EQ(runs, s.run(false, VerifyMode::kMatch));
  }
}

INSTANTIATE_TEST_SUITE_P(Verifiers, LosslessSamplingTest,
                         ::testing::Values(Case{1, VerifyMode::kMatch, 1.0f, 1.0f},
                                           Case{1, VerifyMode::kReject, 1.0f, 1.0f},
                                           Case{2, VerifyMode::kMatch, 1.0f, 1.0f},
                                           Case{2, VerifyMode::kReject, 1.0f, 1.0f},
                                           Case{1, VerifyMode::kReject, 1.5f, 0.9f},
                                           Case{2, VerifyMode::kReject, 1.5f, 0.9f}),
                         [](const auto& p) {
                           std::string name = ::testing::PrintToString(p.param);
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

TEST(LosslessSampling, TheTestRejectsALossyVerifier) {
  Sampled s(1, SamplingParams{1.0f, 1.0f, 0});
  const auto joint = s.exact();
  const auto runs = s.run(true, VerifyMode::kReject, /*lossy=*/true);
  const Tables t = project(joint, runs, {1});
  const auto [chi, df] = chi_square(t.expected, t.observed, static_cast<double>(runs.size()));
  EXPECT_GT(chi, chi_critical(df));
}

}  // namespace
}  // namespace tandem::spec
