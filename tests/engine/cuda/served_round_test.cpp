// The served round on a CUDA generator rank (issues 10 and 11): a coordinator and one generator rank
// (models/pylm with models/pylm-dflash, FP32) on threads over the in-process world, requests through the
// RoundScheduler as /v1/completions sends them. The rank keeps the target's tap rows on the GPU and settles
// them into the drafter right after each target run (spec::TapRoute::kDevice), and rejection sampling reads
// the target's logits and the drafts' proposals there: a round copies token ids to the host and nothing
// else, which the rank reports (tandem_gen_device_to_host_bytes_total) and this test bounds by one tap row
// a round (through the host, every verify copies at least one kept tap row per request, and rejection
// sampling a logits row per draft). Greedy and sample-and-match output equals plain decoding on the same
// backend token for token. Split target and drafter ranks on two CUDA devices (NCCL between them) copy ids
// only on both ranks too, rejection sampling included (the drafts' q rows cross device to device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "coordinator/scheduler_metrics.h"
#include "engine/backends/backend_factory.h"
#include "tests/coordinator/round_job.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

using coordinator::GenerationRequest;
using coordinator::test::GenJob;

constexpr uint32_t kBlock = 4;
// models/pylm: 3 tap layers of 384 floats.
constexpr uint64_t kTapRowBytes = 3 * 384 * sizeof(float);

config::Deployment cuda_deployment(uint32_t slots, config::Verify verify) {
  config::Deployment d = coordinator::test::deployment(1, slots);
  d.ranks[1].backend.name = "cuda";
  d.ranks[1].backend.precision = ir::Precision::kF32;
  d.ranks[1].backend.device = 0;
  d.generation.block_size = kBlock;
  d.generation.kv_capacity = 128;
  d.generation.verify = verify;
  return d;
}

// `split` (architecture.md "A speculative round, drafter on another GPU"): rank 1 the target, rank 2 its
// drafter, both CUDA, so an NCCL link joins them (the emulator's one device; devices 0 and 1 on GPUs).
config::Deployment cuda_split_deployment(uint32_t slots, bool overlap, ir::Precision precision = ir::Precision::kF32,
                                         config::Verify verify = config::Verify::kMatch) {
  config::Deployment d = coordinator::test::deployment(0, slots, 1);
  for (size_t r = 1; r < d.ranks.size(); ++r) {
    d.ranks[r].backend.name = "cuda";
    d.ranks[r].backend.precision = precision;
    d.ranks[r].backend.device = emulated() ? 0 : static_cast<int>(r) - 1;
  }
  d.generation.block_size = kBlock;
  d.generation.kv_capacity = 128;
  d.generation.overlap = overlap;
  d.generation.verify = verify;
  return d;
}

// Held-out prompts, cut short on the emulator (its attention is O(tokens²) on the SIMT scheduler).
std::vector<GenerationRequest> requests(size_t n, uint32_t max_tokens) {
  const auto prompts = coordinator::test::eval_prompts();
  std::vector<GenerationRequest> out;
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest g;
    g.prompt = prompts.at(i % prompts.size());
    g.prompt.resize(std::min<size_t>(g.prompt.size(), emulated() ? 24 : 64));  // + max_tokens fits 128
    g.max_tokens = max_tokens;
    out.push_back(std::move(g));
  }
  return out;
}

// Each request alone through plain decoding (no drafter) on a CUDA backend like the rank's.
std::vector<std::vector<uint32_t>> plain_on_cuda(const std::vector<GenerationRequest>& reqs,
                                                 ir::Precision precision = ir::Precision::kF32) {
  backends::BackendOptions bo;
  bo.name = "cuda";
  bo.precision = precision;
  auto backend = backends::make_backend(bo);
  EXPECT_TRUE(backend.ok()) << backend.error().message();
  if (!backend.ok()) return {};
  std::vector<std::vector<uint32_t>> out;
  for (auto& p : coordinator::test::plain_decoding(reqs, **backend)) out.push_back(std::move(p.tokens));
  return out;
}

struct Served {
  std::vector<std::vector<uint32_t>> tokens;
  uint32_t accepted = 0;
  uint64_t rounds = 0;
  uint64_t d2h_bytes = 0;
  uint64_t drafter_d2h_bytes = 0;  // split: the drafter rank's
  std::string metrics;
};

Served serve(const config::Deployment& d, const std::vector<GenerationRequest>& reqs) {
  Served out;
  GenJob job(d);
  EXPECT_TRUE(job.ready().ok()) << job.ready().error().message();
  if (!job.ready().ok()) return out;
  std::vector<std::shared_ptr<coordinator::test::Outcome>> outs;
  for (const auto& g : reqs) outs.push_back(coordinator::test::submit(job.scheduler(), g));
  for (auto& o : outs) {
    coordinator::test::wait(*o);
    EXPECT_EQ(o->last.finish, coordinator::GenerationFinish::kLength) << (o->last.error ? o->last.error->message : "");
    out.tokens.push_back(o->tokens);
    out.accepted += o->last.stats.accepted;
  }
  const auto view = job.scheduler().targets().at(0);
  out.rounds = view.rounds;
  out.d2h_bytes = view.device_to_host_bytes;
  out.drafter_d2h_bytes = view.drafter_device_to_host_bytes;
  out.metrics = coordinator::render_scheduler_metrics(job.scheduler());
  return out;
}

// tap_row_bytes: one tap row as the target's plan stores it (a 16-bit plan's are half of kTapRowBytes).
void expect_ids_only(const Served& s, uint64_t tap_row_bytes = kTapRowBytes) {
  ASSERT_GT(s.rounds, 0u);
  EXPECT_GT(s.d2h_bytes, 0u) << "the ids come to the host, so the count cannot be 0 on a GPU";
  EXPECT_LT(s.d2h_bytes, s.rounds * tap_row_bytes)
      << s.rounds << " rounds copied " << s.d2h_bytes << " bytes: more than one tap row a round crossed";
  EXPECT_NE(s.metrics.find("tandem_gen_device_to_host_bytes_total{rank=\"1\"} " + std::to_string(s.d2h_bytes) + "\n"),
            std::string::npos)
      << s.metrics;
}

// A split target's drafter rank copies ids only too (its drafts, chosen on its device): no tap row (overlap's
// guesses fill with the slot's last one, kept on the device) and no logits row (rejection sampling's q
// rows cross device to device; guesses are the device's picks).
void expect_drafter_ids_only(const Served& s, uint64_t tap_row_bytes = kTapRowBytes) {
  ASSERT_GT(s.rounds, 0u);
  EXPECT_LT(s.drafter_d2h_bytes, s.rounds * tap_row_bytes)
      << s.rounds << " rounds copied " << s.drafter_d2h_bytes << " bytes on the drafter rank: more than one tap row a "
      << "round crossed";
  EXPECT_NE(s.metrics.find("tandem_gen_drafter_device_to_host_bytes_total{rank=\"1\"} " +
                           std::to_string(s.drafter_d2h_bytes) + "\n"),
            std::string::npos)
      << s.metrics;
}

// Greedy, seeded sample-and-match and a plain (speculative: false) request share the rounds.
TEST(ServedRoundOnCuda, OutputEqualsPlainDecodingAndOnlyIdsReachTheHost) {
  TANDEM_REQUIRE_GPU();
  auto reqs = requests(3, emulated() ? 10 : 32);
  reqs[1].sampling = {0.8f, 0.95f, 1234};
  reqs[2].speculative = false;
  const auto want = plain_on_cuda(reqs);
  ASSERT_EQ(want.size(), reqs.size());
  const Served got = serve(cuda_deployment(3, config::Verify::kMatch), reqs);
  ASSERT_EQ(got.tokens.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got.tokens[i], want[i]) << "request " << i;
  EXPECT_GT(got.accepted, 0u) << "no draft was accepted: speculation did not run";
  expect_ids_only(got);
}

// verify: reject at T > 0: the drafts are sampled on the drafter's device and accepted there against the
// target's logits; every request runs to max_tokens (no stop ids), copying ids only.
TEST(ServedRoundOnCuda, RejectionSamplingStaysOnTheGpu) {
  TANDEM_REQUIRE_GPU();
  auto reqs = requests(2, emulated() ? 10 : 32);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].sampling = {0.7f, 0.9f, 77 + i};
  const Served got = serve(cuda_deployment(2, config::Verify::kReject), reqs);
  ASSERT_EQ(got.tokens.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got.tokens[i].size(), reqs[i].max_tokens) << "request " << i;
  expect_ids_only(got);
}

}  // namespace
}  // namespace tandem::cuda::test

namespace tandem::cuda::test {
namespace {

// Split target and drafter ranks: the accepted rows' taps go from the target's device output over NCCL
// into the drafter's device (settled there from the link's buffer), so the target's rounds copy ids
// only, as the generator's do; with the taps through the host (the earlier code fetched every verify
// row's taps) each round copied several tap rows. The drafter rank copies ids only as well: with
// overlap it keeps each slot's last tap row for its guesses on its device (the earlier code fetched it,
// a tap row a request a round, and fetched its v1 guess blocks' logits rows). Greedy and
// sample-and-match output equals plain decoding token for token, with and without overlap's guesses.
TEST(ServedRoundOnCuda, SplitTargetAndDrafterKeepTheTapsOffTheHost) {
  TANDEM_REQUIRE_GPU();
  if (!emulated() && device_count() < 2) GTEST_SKIP() << "split ranks need 2 CUDA devices, this machine has " << device_count();
  auto reqs = requests(2, emulated() ? 10 : 32);
  reqs[1].sampling = {0.8f, 0.95f, 1234};
  const auto want = plain_on_cuda(reqs);
  ASSERT_EQ(want.size(), reqs.size());
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    const Served got = serve(cuda_split_deployment(2, overlap), reqs);
    ASSERT_EQ(got.tokens.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got.tokens[i], want[i]) << "request " << i;
    EXPECT_GT(got.accepted, 0u) << "no draft was accepted: speculation did not run";
    expect_ids_only(got);
    expect_drafter_ids_only(got);
  }
}

// verify: reject at T > 0 on split ranks: the drafter samples its v1 drafts on its device and their q rows
// (a logits row each) go device to device over NCCL into the target's device, which rejects there, as a
// generator rejects on its one device. Both ranks copy ids only (before, the drafter fetched every draft's
// logits row to sample on the host, and the target its verify rows' logits rows to reject there), and
// every token equals the generator's under verify: reject (the same kernels on the same rows); a greedy
// request with overlap's guesses shares the rounds.
TEST(ServedRoundOnCuda, SplitRejectionSamplingKeepsLogitsOffTheHost) {
  TANDEM_REQUIRE_GPU();
  if (!emulated() && device_count() < 2) GTEST_SKIP() << "split ranks need 2 CUDA devices, this machine has " << device_count();
  auto reqs = requests(3, emulated() ? 10 : 32);
  for (size_t i = 0; i < 2; ++i) reqs[i].sampling = {0.7f, 0.9f, 77 + i};
  const Served want = serve(cuda_deployment(3, config::Verify::kReject), reqs);
  ASSERT_EQ(want.tokens.size(), reqs.size());
  const Served got = serve(cuda_split_deployment(3, true, ir::Precision::kF32, config::Verify::kReject), reqs);
  ASSERT_EQ(got.tokens.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got.tokens[i].size(), reqs[i].max_tokens) << "request " << i;
    EXPECT_EQ(got.tokens[i], want.tokens[i]) << "request " << i;
  }
  EXPECT_GT(got.accepted, 0u) << "no draft was accepted: speculation did not run";
  expect_ids_only(got);
  expect_drafter_ids_only(got);
}

// As production runs it: BF16 target and drafter, whose tap rows stay bf16 on the target's device. The
// NCCL link sends them device to device as bf16 and the drafter reads them there; before, the link
// fetched the 16-bit rows to the target's host and sent f32, at least one tap row a round. Output equals
// plain BF16 decoding token for token.
TEST(ServedRoundOnCuda, SplitBf16TargetKeepsItsSixteenBitTapsOffTheHost) {
  TANDEM_REQUIRE_GPU();
  if (!emulated() && device_count() < 2) GTEST_SKIP() << "split ranks need 2 CUDA devices, this machine has " << device_count();
  auto reqs = requests(2, emulated() ? 10 : 32);
  const auto want = plain_on_cuda(reqs, ir::Precision::kBF16);
  ASSERT_EQ(want.size(), reqs.size());
  const Served got = serve(cuda_split_deployment(2, false, ir::Precision::kBF16), reqs);
  ASSERT_EQ(got.tokens.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got.tokens[i], want[i]) << "request " << i;
  EXPECT_GT(got.accepted, 0u) << "no draft was accepted: speculation did not run";
  expect_ids_only(got, kTapRowBytes / 2);
}

}  // namespace
}  // namespace tandem::cuda::test

namespace tandem::cuda::test {
namespace {

// The one-rank generator as tools/gpu-gen-serve-bench.sh serves it on the H200 (BF16, greedy speculative,
// seeded sample-and-match and plain "speculative": false requests in the same rounds), with more prompts
// admitted together than one target run holds (the embedded buckets run at most 64 sequences; on the
// H200, 32 prompts of 64-512 tokens pass a run's 4,096 tokens), so a prefill spans several runs. The
// earlier runs' tap rows settle into the generator's drafter from the device (and a plain request keeps
// none); before, forward_keeping_taps fetched them to the host, for plain requests too: there, ~1 MB a
// round on average. The job copies less than one tap row per request (its prompt alone has 3), ids only;
// every request's tokens equal plain decoding's.
TEST(ServedRoundOnCuda, GeneratorPrefillOverSeveralRunsKeepsTheTapsOffTheHost) {
  TANDEM_REQUIRE_GPU();
  // 130 at once: whichever round admits the most (the first takes what has arrived) admits more than 64.
  constexpr size_t kRequests = 130;
  const auto prompts = coordinator::test::eval_prompts();
  ASSERT_FALSE(prompts.empty());
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < kRequests; ++i) {
    GenerationRequest g;
    const auto& p = prompts[i % prompts.size()];
    const size_t at = (i / prompts.size()) % (p.size() - 3);
    g.prompt.assign(p.begin() + static_cast<std::ptrdiff_t>(at), p.begin() + static_cast<std::ptrdiff_t>(at) + 3);
    g.max_tokens = 2;
    if (i % 3 == 1) g.sampling = {0.8f, 0.95f, 1000 + i};
    if (i % 3 == 2) g.speculative = false;
    reqs.push_back(std::move(g));
  }
  // Every 13th request (each kind) against plain decoding: the emulator decodes 130 alone in minutes.
  std::vector<GenerationRequest> checked;
  for (size_t i = 0; i < kRequests; i += 13) checked.push_back(reqs[i]);
  const auto want = plain_on_cuda(checked, ir::Precision::kBF16);
  ASSERT_EQ(want.size(), checked.size());
  config::Deployment d = cuda_deployment(kRequests, config::Verify::kMatch);
  d.ranks[1].backend.precision = ir::Precision::kBF16;
  d.generation.kv_capacity = 32;
  // A warm-up of 130 slots' buckets takes minutes on the emulator; the rounds lower the few they use, and
  // without GEMM probes that lowering copies nothing to the host.
  d.generation.warm_up = false;
  ::setenv("TANDEM_CUDA_GEMM_PROBE", "0", 1);
  const Served got = serve(d, reqs);
  ::unsetenv("TANDEM_CUDA_GEMM_PROBE");
  ASSERT_EQ(got.tokens.size(), reqs.size());
  for (size_t k = 0; k < checked.size(); ++k) EXPECT_EQ(got.tokens[13 * k], want[k]) << "request " << 13 * k;
  constexpr uint64_t kBf16TapRowBytes = kTapRowBytes / 2;
  ASSERT_GT(got.rounds, 0u);
  EXPECT_GT(got.d2h_bytes, 0u) << "the ids come to the host, so the count cannot be 0 on a GPU";
  EXPECT_LT(got.d2h_bytes, kRequests * kBf16TapRowBytes)
      << got.rounds << " rounds of " << kRequests << " requests copied " << got.d2h_bytes
      << " bytes: tap rows crossed to the host";
  EXPECT_NE(got.metrics.find("tandem_gen_device_to_host_bytes_total{rank=\"1\"} " + std::to_string(got.d2h_bytes) +
                             "\n"),
            std::string::npos)
      << got.metrics;
}

}  // namespace
}  // namespace tandem::cuda::test
