// The speculative round on one CUDA backend (issue 10): with the drafter on the target's backend the
// accepted rows' taps go from the verify run's device output straight into the settle, so a greedy v1
// round at batch 1 and 4 copies to the host exactly the token ids of its verify and block runs (4 bytes a
// bucket pick row), counted by the backend's device-to-host counter; the same round through the host
// (TapRoute::kHost) copies at least the kept tap rows, and both draft the same tokens (the drafts depend on
// the settled context). Prompts longer than a bucket settle their early chunks from the host and the last
// one from the device, again drafting what the host path drafts. DFlash 2's selector walk runs on the
// device too: its greedy round copies ids only, a rejection-sampling round with host proposals adds the
// candidates and q. Rejection sampling on the device (RejectSample) copies ids only, v1 and v2. A plan
// lowered inside a round (GEMM probes, the warm-up run) is counted apart from the round's data.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/backends/backend_factory.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/spec/spec.h"
#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::cuda::test {
namespace {

using spec::TapRoute;

constexpr uint32_t kBlock = 4, kCapacity = 64, kRounds = 3;

struct Models {
  tandem::testing::TinyTarget target;
  tandem::testing::TinyDrafter drafter;
};

// Large enough rows that one tap row (2 × 256 floats, 2 KiB) or one logits row (4,096 floats, 16 KiB)
// outweighs every id a round copies. Version 2 adds the selector (rank 64, top-16: a selector row is
// 256 bytes, the candidates and q of a draft row 128).
Models make_models(uint32_t version = 1) {
  tandem::testing::TargetShape ts;
  ts.vocab = 4096;
  ts.hidden = 256;
  ts.layers = 3;
  ts.heads = 4;
  ts.kv_heads = 2;
  ts.head_dim = 64;
  ts.ffn = 256;
  Models m{tandem::testing::random_target(ts, 71), {}};
  tandem::testing::DrafterShape ds;
  ds.heads = 4;
  ds.kv_heads = 2;
  ds.head_dim = 64;
  ds.ffn = 256;
  ds.taps = {0, 2};
  ds.mask = 1;
  ds.version = version;
  ds.group = 16;
  ds.rank = 64;
  ds.top_k = 16;
  m.drafter = tandem::testing::random_drafter(m.target.cfg, ds, 72);
  return m;
}

struct RoundRun {
  uint64_t last_round_d2h = 0;               // bytes the last round copied to the host
  uint64_t last_draft_d2h = 0;               // ... of which its draft step copied
  uint64_t prefill_d2h = 0;                  // bytes the prefill copied to the host
  std::vector<std::vector<uint32_t>> tokens;  // every request's tokens after the rounds
  std::vector<std::vector<uint32_t>> drafts;  // every round's drafts, request by request
  std::vector<std::vector<spec::Proposal>> proposals;  // and their proposals (under kReject at T > 0)
};

uint64_t d2h_bytes(const ir::Backend& b) {
  auto t = cuda_transfers(b);
  EXPECT_TRUE(t.ok()) << t.error().message();
  return t.ok() ? t->d2h_bytes : 0;
}

// Prefill, then kRounds greedy rounds of settle, draft and verify; the last round's copies are measured
// (the earlier ones lower every plan the round uses).
RoundRun run_rounds(const Models& m, uint32_t batch, TapRoute route, uint32_t prompt_len = 5,
                    const ir::BucketTable* buckets = nullptr, spec::VerifyMode mode = spec::VerifyMode::kMatch,
                    spec::SamplingParams sampling = {}, TapRoute proposals = TapRoute::kHost,
                    bool prefill_into_drafter = false) {
  RoundRun run;
  CudaOptions o;
  o.precision = ir::Precision::kF32;
  o.gemm_probe = false;  // no probe copies when a plan is lowered
  auto backend = make_cuda_backend(o);
  EXPECT_TRUE(backend.ok()) << backend.error().message();
  if (!backend.ok()) return run;
  ir::Backend& cuda = **backend;
  // Rejection sampling of host proposals reads the target's p on the host (its logits rows are fetched);
  // of device ones, on the device.
  models::qwen3::TargetOptions to{m.drafter.cfg.target_layer_ids, batch, kCapacity, buckets,
                                  mode == spec::VerifyMode::kReject && proposals == TapRoute::kHost};
  auto target = models::qwen3::Target::create(cuda, *m.target.weights, m.target.cfg, to, "tiny target");
  EXPECT_TRUE(target.ok()) << target.error().message();
  models::dflash::DrafterOptions dopt{batch, kCapacity, kBlock, std::nullopt, buckets};
  auto drafter = models::dflash::Drafter::create(cuda, m.drafter.weights, m.drafter.cfg, *m.target.weights,
                                                 m.target.cfg, dopt, "tiny drafter");
  EXPECT_TRUE(drafter.ok()) << drafter.error().message();
  if (!target.ok() || !drafter.ok()) return run;
  EXPECT_EQ(spec::tap_route(**target, drafter->get()), TapRoute::kDevice);
  std::vector<spec::Request> requests;
  for (uint32_t i = 0; i < batch; ++i) {
    std::vector<uint32_t> prompt(prompt_len + 3 * i);
    for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = static_cast<uint32_t>((37 * j + 11 * i + 5) % 4096);
    spec::SamplingParams si = sampling;
    si.seed += i;
    auto r = spec::make_request({prompt, 24, {}, si}, i, m.target.cfg.vocab_size);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return run;
    requests.push_back(std::move(r).value());
  }
  std::vector<spec::Request*> ptrs;
  for (spec::Request& r : requests) ptrs.push_back(&r);
  const uint64_t before_prefill = d2h_bytes(cuda);
  Status st = spec::prefill(**target, ptrs, route, prefill_into_drafter ? drafter->get() : nullptr);
  run.prefill_d2h = d2h_bytes(cuda) - before_prefill;
  EXPECT_TRUE(st.ok()) << st.error().message();
  std::vector<spec::Draft> drafts;
  for (uint32_t round = 0; round < kRounds && st.ok(); ++round) {
    const uint64_t before = d2h_bytes(cuda);
    st = spec::settle(**drafter, ptrs);
    const uint64_t before_draft = d2h_bytes(cuda);
    if (st.ok()) st = spec::draft(**drafter, ptrs, kBlock, mode, drafts, proposals);
    run.last_draft_d2h = d2h_bytes(cuda) - before_draft;
    if (st.ok()) st = spec::verify(**target, ptrs, drafts, mode, false, route);
    EXPECT_TRUE(st.ok()) << "round " << round << ": " << st.error().message();
    run.last_round_d2h = d2h_bytes(cuda) - before;
    for (const spec::Draft& d : drafts) {
      run.drafts.push_back(d.tokens);
      run.proposals.push_back(d.proposals);
    }
  }
  for (const spec::Request& r : requests) {
    EXPECT_TRUE(r.active()) << "a request finished early: the measured round would be a smaller one";
    run.tokens.push_back(r.tokens);
  }
  return run;
}

TEST(CudaSpecRound, CopiesOnlyTokenIdsToTheHost) {
  TANDEM_REQUIRE_GPU();
  const Models m = make_models();
  const ir::BucketTable& table = ir::BucketTable::defaults();
  const uint64_t tap_row = uint64_t{m.drafter.cfg.target_layer_ids.size()} * m.target.cfg.hidden_size * 4;
  for (uint32_t batch : {1u, 4u}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    // The verify run's ids (one per block row) and the block run's draft ids (B − 1 per request): 4 bytes
    // per pick row of the bucket each runs in. Nothing else: no logits, no tap rows, no selector rows.
    auto verify = table.smallest(models::qwen3::kTargetStage, batch * kBlock, batch, batch * kBlock);
    auto block = table.smallest(models::dflash::kDrafterStage, batch * kBlock, batch, batch * (kBlock - 1));
    ASSERT_TRUE(verify.ok() && block.ok());
    const uint64_t ids_only = 4 * (uint64_t{verify->picks} + block->picks);
    const RoundRun device = run_rounds(m, batch, TapRoute::kDevice);
    EXPECT_EQ(device.last_round_d2h, ids_only);
    // One kept tap row per request, or one draft row's logits, is already more than the whole round.
    EXPECT_LT(ids_only, tap_row * batch);
    EXPECT_LT(ids_only, uint64_t{m.target.cfg.vocab_size} * 4);
    // Through the host the round copies at least the verify rows' taps (every row of the block).
    const RoundRun host = run_rounds(m, batch, TapRoute::kHost);
    EXPECT_GE(host.last_round_d2h, ids_only + tap_row * batch * kBlock);
    EXPECT_EQ(device.tokens, host.tokens);
    EXPECT_EQ(device.drafts, host.drafts);
    EXPECT_EQ(device.drafts.size(), size_t{batch} * kRounds);
  }
}

// DFlash 2: the selector walk runs in the block plan. A greedy round copies the verify and block ids
// only (no logits row, no selector row); a round of rejection sampling at T > 0 copies from its draft step
// the block ids plus each draft row's top-k candidates and q (8 bytes a candidate), and those proposals
// are over the drafted token (q > 0 for it, summing to 1). Greedy at batch 1 and 4, sampled at batch 4.
TEST(CudaSpecRound, SelectorWalkCopiesIdsAndProposalsOnly) {
  TANDEM_REQUIRE_GPU();
  const Models m = make_models(2);
  const ir::BucketTable& table = ir::BucketTable::defaults();
  const uint64_t top_k = m.drafter.cfg.selector_top_k;
  const uint64_t selector_row = uint64_t{m.drafter.cfg.selector_rank} * 4;
  for (uint32_t batch : {1u, 4u}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    auto verify = table.smallest(models::qwen3::kTargetStage, batch * kBlock, batch, batch * kBlock);
    auto block = table.smallest(models::dflash::kDrafterStage, batch * kBlock, batch, batch * (kBlock - 1));
    ASSERT_TRUE(verify.ok() && block.ok());
    const uint64_t block_ids = 4 * uint64_t{block->picks};
    const RoundRun greedy = run_rounds(m, batch, TapRoute::kDevice);
    EXPECT_EQ(greedy.last_round_d2h, 4 * uint64_t{verify->picks} + block_ids);
    EXPECT_EQ(greedy.last_draft_d2h, block_ids);
    EXPECT_LT(block_ids, selector_row * batch * (kBlock - 1));
    if (batch == 1) continue;  // the emulator's time: the sampled round at batch 4 only
    const RoundRun sampled = run_rounds(m, batch, TapRoute::kDevice, 5, nullptr, spec::VerifyMode::kReject,
                                        {0.9f, 1.0f, 5});
    const uint64_t proposals = uint64_t{batch} * (kBlock - 1) * top_k * 8;
    EXPECT_EQ(sampled.last_draft_d2h, block_ids + proposals);
    ASSERT_EQ(sampled.proposals.size(), sampled.drafts.size());
    for (size_t d = 0; d < sampled.drafts.size(); ++d) {
      ASSERT_EQ(sampled.proposals[d].size(), sampled.drafts[d].size());
      for (size_t r = 0; r < sampled.drafts[d].size(); ++r) {
        const spec::Proposal& q = sampled.proposals[d][r];
        EXPECT_EQ(q.ids.size(), top_k);
        EXPECT_GT(q.prob(sampled.drafts[d][r]), 0.0) << "draft " << d << " row " << r;
        double sum = 0.0;
        for (double p : q.probs) sum += p;
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

// Rejection sampling on the device (RejectSample in the verify plan over the block plan's proposals): a
// round at T > 0 copies exactly what a greedy round copies, the verify run's ids (now the committed tokens
// and ir::kNoToken after them) and the block run's draft ids, 4 bytes a bucket pick row, for v1 (whose
// drafts are sampled in the block plan) and v2. No logits row, proposal or candidate crosses. The host
// rule (proposals and logits fetched) commits the same tokens from the same drafts: both compute the same
// f64 quantities, summed in other orders, so only a draw within about 1e-15 of a threshold could split
// them, which these few rounds do not meet (spec_rejection_test.cpp says more).
TEST(CudaSpecRound, RejectionSamplingOnTheDeviceCopiesIdsOnly) {
  TANDEM_REQUIRE_GPU();
  const ir::BucketTable& table = ir::BucketTable::defaults();
  const uint32_t batch = 4;
  auto verify = table.smallest(models::qwen3::kTargetStage, batch * kBlock, batch, batch * kBlock);
  auto block = table.smallest(models::dflash::kDrafterStage, batch * kBlock, batch, batch * (kBlock - 1));
  ASSERT_TRUE(verify.ok() && block.ok());
  const uint64_t ids_only = 4 * (uint64_t{verify->picks} + block->picks);
  for (uint32_t version : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << "v" << version);
    const Models m = make_models(version);
    const spec::SamplingParams sampling{0.9f, 0.95f, 5};
    const RoundRun device = run_rounds(m, batch, TapRoute::kDevice, 5, nullptr, spec::VerifyMode::kReject, sampling,
                                       TapRoute::kDevice);
    EXPECT_EQ(device.last_round_d2h, ids_only);
    EXPECT_EQ(device.last_draft_d2h, 4 * uint64_t{block->picks});
    EXPECT_LT(ids_only, uint64_t{m.target.cfg.vocab_size} * 4);  // less than one logits row
    for (const auto& p : device.proposals) EXPECT_TRUE(p.empty()) << "host proposals on the device route";
    const RoundRun host = run_rounds(m, batch, TapRoute::kDevice, 5, nullptr, spec::VerifyMode::kReject, sampling,
                                     TapRoute::kHost);
    EXPECT_GT(host.last_round_d2h, ids_only + uint64_t{m.target.cfg.vocab_size} * 4 * batch);
    EXPECT_EQ(device.drafts, host.drafts);
    EXPECT_EQ(device.tokens, host.tokens);
  }
}

TEST(CudaSpecRound, ChunkedPromptsSettleAsThroughTheHost) {
  TANDEM_REQUIRE_GPU();
  const Models m = make_models();
  // Buckets of 16 tokens: prompts of 21 and 24 tokens run in chunks over several target runs.
  auto table = ir::BucketTable::parse("target 16 4 16\ndrafter 16 4 16\n", "test buckets");
  ASSERT_TRUE(table.ok()) << table.error().message();
  const RoundRun device = run_rounds(m, 2, TapRoute::kDevice, 21, &*table);
  const RoundRun host = run_rounds(m, 2, TapRoute::kHost, 21, &*table);
  ASSERT_EQ(device.drafts.size(), 2 * kRounds);
  EXPECT_EQ(device.drafts, host.drafts);
  EXPECT_EQ(device.tokens, host.tokens);
  // With the drafter at hand (a generator's), the early chunks settle into it from the device as each run
  // ends: the prefill copies only its first tokens' ids (a 16-row bucket's picks, 4 bytes each, a run; the two
  // prompts take 5 runs, each cut where it would be alone), not the 16 tap rows of 2 KiB it fetched above, and
  // the drafts are the same.
  const RoundRun direct = run_rounds(m, 2, TapRoute::kDevice, 21, &*table, spec::VerifyMode::kMatch, {},
                                     TapRoute::kHost, true);
  EXPECT_GE(device.prefill_d2h, 16u * 2 * 256 * sizeof(float));
  EXPECT_LE(direct.prefill_d2h, 5u * 16 * sizeof(uint32_t)) << "tap rows crossed to the host";
  EXPECT_EQ(direct.drafts, host.drafts);
  EXPECT_EQ(direct.tokens, host.tokens);
}

// A server lowers a target plan the first time a round needs it: the GEMM probes copy their outputs to the
// host to compare bits, and the warm-up run brings its host outputs back. That one-off belongs to the
// lowering, not to the round's data (tandem_gen_device_to_host_bytes_total): a first prefill, which lowers
// its plan, copies by backends::device_to_host_bytes exactly what the same prefill copies once the plan
// exists (its first tokens' ids), and the lowering's copies are counted apart.
TEST(CudaSpecRound, PlansLoweredInsideARoundAreNotCountedAsItsData) {
  TANDEM_REQUIRE_GPU();
  const Models m = make_models();
  CudaOptions o;
  o.precision = ir::Precision::kF32;
  o.gemm_probe = true;  // as a server runs
  auto backend = make_cuda_backend(o);
  ASSERT_TRUE(backend.ok()) << backend.error().message();
  ir::Backend& cuda = **backend;
  const models::qwen3::TargetOptions to{m.drafter.cfg.target_layer_ids, 1, kCapacity};
  auto target = models::qwen3::Target::create(cuda, *m.target.weights, m.target.cfg, to, "tiny target");
  ASSERT_TRUE(target.ok()) << target.error().message();
  struct Copied {
    uint64_t data = 0, lowering = 0;
  };
  auto prefill = [&]() -> Copied {
    std::vector<uint32_t> prompt(9);
    for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = static_cast<uint32_t>((37 * j + 5) % 4096);
    auto r = spec::make_request({prompt, 8, {}, {}}, 0, m.target.cfg.vocab_size);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return {};
    const auto data = backends::device_to_host_bytes(cuda);
    const auto all = cuda_transfers(cuda);
    EXPECT_TRUE(data && all.ok());
    spec::Request* p = &r.value();
    const Status st = spec::prefill(**target, std::span<spec::Request* const>(&p, 1), TapRoute::kDevice, nullptr);
    EXPECT_TRUE(st.ok()) << st.error().message();
    if (!data || !all.ok()) return {};
    return {*backends::device_to_host_bytes(cuda) - *data, cuda_transfers(cuda)->lowering_d2h_bytes -
                                                               all->lowering_d2h_bytes};
  };
  const Copied first = prefill(), again = prefill();
  EXPECT_GT(first.lowering, 0u) << "the first prefill lowered no plan: this test measures nothing";
  EXPECT_EQ(again.lowering, 0u);
  EXPECT_GT(again.data, 0u) << "the first token's id comes to the host";
  EXPECT_EQ(first.data, again.data) << "the lowering's copies were counted as the prefill's data";
}

}  // namespace
}  // namespace tandem::cuda::test
