// Remote drafting under rejection sampling (worker/drafting_impl.h): a drafter rank's proposals q reach
// the target's drafts intact and are placed on the target's backend (listed ones as candidates and f32 q,
// row proposals as the rows that came), and a reply whose q is missing, short, not f32, or names an id
// past the vocabulary is refused naming the rank, the slot and the field; under sample-and-match no q is
// expected. A target run's tap rows go to the drafter as the run ends.
#include <gtest/gtest.h>

#include "engine/comm/comm.h"
#include "engine/cpu/cpu_backend.h"
#include "worker/drafting_impl.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

constexpr uint32_t kWidth = 2;
constexpr uint32_t kVocab = 10;
constexpr uint32_t kBlock = 3;

// A request ready for a round at position 4, its context on the drafter up to there.
spec::Request sampled_request(uint32_t slot, float temperature) {
  spec::Request r;
  r.slot = slot;
  r.params.sampling = {temperature, 1.0f, 99};
  r.tokens = {1, 2, 3, 4, 5};
  r.prompt_len = 3;
  r.start = 4;
  r.settled = 4;
  return r;
}

struct Pair {
  std::unique_ptr<ir::Backend> target;  // the target rank's backend, where the proposals are placed
  std::unique_ptr<Drafting> drafting;
  std::unique_ptr<comm::Link> drafter;  // the test plays the drafter rank (rank 2)
};

Pair make_pair_for(spec::VerifyMode mode) {
  auto [a, b] = comm::make_local_pipes(1, 2);
  std::map<int, std::unique_ptr<comm::Link>> links;
  links.emplace(2, comm::make_host_link(std::move(a)));
  Pair p;
  p.target = cpu::make_cpu_backend(1);
  p.drafting = make_remote_drafting(std::move(links), kWidth, std::chrono::milliseconds(2000), mode, kVocab,
                                    /*overlap=*/false, *p.target);
  p.drafter = comm::make_host_link(std::move(b));
  return p;
}

// Rows [0, rows) × width of device rows on the CPU backend (host memory), as floats or ids.
std::vector<float> values_of(const ir::DeviceRows& d) {
  std::vector<float> out;
  for (uint32_t r = 0; r < d.rows; ++r) {
    const auto* row = static_cast<const float*>(d.data) + size_t{r} * d.stride;
    out.insert(out.end(), row, row + d.width);
  }
  return out;
}
std::vector<uint32_t> ids_of(const ir::DeviceRows& d) {
  std::vector<uint32_t> out;
  for (uint32_t r = 0; r < d.rows; ++r) {
    const auto* row = static_cast<const uint32_t*>(d.data) + size_t{r} * d.stride;
    out.insert(out.end(), row, row + d.width);
  }
  return out;
}

// Sends `reply` for round 7 ahead (the link keeps it in order) and runs the target's side of round 7;
// `done` gets the round's figures (the data plane's bytes).
Status draft_with(Pair& p, spec::Request& r, const DraftReply& reply, std::vector<spec::Draft>& out,
                  RoundDone* done = nullptr, const comm::RowsOut& rows = comm::RowsOut::none()) {
  EXPECT_TRUE(p.drafter->send(encode_reply(reply), rows).ok());
  std::vector<spec::Request*> requests = {&r};
  const std::vector<int> drafters = {2};
  RoundDone own;
  return p.drafting->draft(requests, drafters, kBlock, 7, out, done ? *done : own);
}

DraftReply reply_with(std::vector<ir::Distribution> q) {
  DraftReply reply{7, {{3, 8}}, 1, 0, 0, false, {}, {}};
  reply.proposals = {std::move(q)};
  return reply;
}

TEST(RemoteDrafting, ProposalsReachTheDraftsIntact) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(1, 0.8f);
  std::vector<spec::Draft> out;
  const std::vector<ir::Distribution> q = {{{3, 4}, {0.75, 0.25}}, {{8}, {1.0}}};
  Status s = draft_with(p, r, reply_with(q), out);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tokens, (std::vector<uint32_t>{3, 8}));
  ASSERT_EQ(out[0].proposals.size(), 2u);
  EXPECT_EQ(out[0].proposals[0].ids, q[0].ids);
  EXPECT_EQ(out[0].proposals[0].probs, q[0].probs);
  EXPECT_EQ(out[0].proposals[1].ids, q[1].ids);
  // ... and on the target's backend, where its verify rejects: candidates and f32 q, a row a draft token,
  // the shorter list padded with an id it lacks at q 0.
  const ir::ProposalRows& placed = out[0].device;
  ASSERT_FALSE(placed.empty());
  ASSERT_FALSE(placed.dense());
  EXPECT_EQ(placed.values.owner, p.target.get());
  EXPECT_EQ(placed.ids.owner, p.target.get());
  EXPECT_EQ(placed.values.rows, 2u);
  EXPECT_EQ(ids_of(placed.ids), (std::vector<uint32_t>{3, 4, 8, 0}));
  EXPECT_EQ(values_of(placed.values), (std::vector<float>{0.75f, 0.25f, 1.0f, 0.0f}));
  // The ask the drafter rank got: the request's block, at its position, with its sampling keys.
  auto ask = p.drafter->recv(comm::Clock::now() + std::chrono::seconds(2));
  ASSERT_TRUE(ask.ok() && ask->has_value());
  auto decoded = decode_ask((*ask)->header, (*ask)->rows, 1);
  ASSERT_TRUE(decoded.ok()) << decoded.error().message();
  ASSERT_EQ(decoded->entries.size(), 1u);
  EXPECT_EQ(decoded->entries[0].temperature, 0.8f);
  EXPECT_EQ(decoded->entries[0].seed, 99u);
}

// A q over the whole vocabulary with mass on two ids crosses as those two pairs (12 bytes each, not 12
// bytes an id of the vocabulary), the round's bytes_received counts what crossed, and the drafts get the
// same vector back, zeros included.
TEST(RemoteDrafting, ASparseProposalCrossesAsItsPairs) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(1, 0.8f);
  ir::Distribution wide;
  for (uint32_t i = 0; i < kVocab; ++i) wide.ids.push_back(i);
  wide.probs.assign(kVocab, 0.0);
  wide.probs[3] = 0.75;
  wide.probs[8] = 0.25;
  const DraftReply reply = reply_with({wide, wide});
  std::vector<spec::Draft> out;
  RoundDone done;
  Status s = draft_with(p, r, reply, out, &done);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(out[0].proposals.size(), 2u);
  EXPECT_EQ(out[0].proposals[1].ids, wide.ids);
  EXPECT_EQ(out[0].proposals[1].probs, wide.probs);
  // The reply without its q (kind, round, entries, the drafts, the q count, the trailer), then per q
  // its form, range, two ids and two probabilities.
  const size_t frame = encode_reply(reply).size();
  EXPECT_EQ(frame, (1 + 8 + 4 + (4 + 8) + 4 + 4 + 8 + 8 + 8) + 2 * (1 + 4 + (4 + 8) + (4 + 16)));
  EXPECT_GE(done.bytes_received, frame);
  EXPECT_LT(done.bytes_received, frame + 64);  // the link's framing only
}

// A v1 drafter's q rows (its logits rows over the draft vocabulary) come as the reply's link rows; the
// target places them on its backend as they came, one row a draft token, for its verify to reject there
// (q = softmax(row / T)). A host link brings them to the host, so they are written there; an NCCL link
// leaves them in its device buffer (cuda_served_round_test).
TEST(RemoteDrafting, RowProposalsArePlacedOnTheTargetsBackend) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(1, 0.8f);
  DraftReply reply = reply_with({});
  reply.row_proposals = {2};
  std::vector<float> rows(2 * kVocab);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.5f * static_cast<float>(i % 7) - 1.0f;
  std::vector<spec::Draft> out;
  RoundDone done;
  Status s = draft_with(p, r, reply, out, &done, comm::RowsOut::of_host(rows, kVocab));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(out[0].tokens, (std::vector<uint32_t>{3, 8}));
  EXPECT_TRUE(out[0].proposals.empty());
  const ir::ProposalRows& placed = out[0].device;
  ASSERT_FALSE(placed.empty());
  EXPECT_TRUE(placed.dense());
  EXPECT_EQ(placed.values.owner, p.target.get());
  EXPECT_EQ(placed.values.rows, 2u);
  EXPECT_EQ(placed.values.width, kVocab);
  EXPECT_EQ(values_of(placed.values), rows);
  EXPECT_GT(done.bytes_received, rows.size() * sizeof(float));
  // Rows for fewer draft tokens than drafted are refused by count.
  reply.row_proposals = {1};
  s = draft_with(p, r, reply, out, nullptr, comm::RowsOut::of_host(std::span<const float>(rows).first(kVocab), kVocab));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "malformed draft reply from rank 2 (" + std::to_string(encode_reply(reply).size()) +
                " bytes): drafts[0].proposals: 1 proposals for 2 draft tokens");
}

// Listed q go to the target's device as f32 (as a drafter's device leaves a v2 selector's q): a q that is
// not an f32 value would be rounded there, so it is refused naming the field.
TEST(RemoteDrafting, ListedProposalsMustBeF32Values) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(1, 0.8f);
  std::vector<spec::Draft> out;
  Status s = draft_with(p, r, reply_with({{{3, 4}, {0.75, 0.25}}, {{8, 2}, {0.1 + 0.2, 0.7}}}), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "drafter rank 2: slot 1: drafts[0].proposals[1].probs: q 0.30000000000000004 is not an f32 value (the "
            "target's rejection sampling reads f32 q, as a drafter's device leaves it)");
}

TEST(RemoteDrafting, MissingProposalsAreRefusedNamingTheField) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(1, 0.8f);
  std::vector<spec::Draft> out;
  Status s = draft_with(p, r, reply_with({}), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "drafter rank 2: slot 1: drafts[0].proposals: 0 proposals for 2 draft tokens (verify: reject, temperature "
            "0.8)");
}

TEST(RemoteDrafting, ProposalIdsPastTheVocabularyAreRefused) {
  Pair p = make_pair_for(spec::VerifyMode::kReject);
  spec::Request r = sampled_request(0, 0.5f);
  std::vector<spec::Draft> out;
  Status s = draft_with(p, r, reply_with({{{3}, {1.0}}, {{8, 10}, {0.5, 0.5}}}), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "drafter rank 2: slot 0: drafts[0].proposals[1].ids: id 10 is past the vocabulary of 10");
}

TEST(RemoteDrafting, GreedyAndMatchDraftsCarryNoProposals) {
  {
    Pair p = make_pair_for(spec::VerifyMode::kReject);
    spec::Request greedy = sampled_request(1, 0.0f);
    std::vector<spec::Draft> out;
    Status s = draft_with(p, greedy, reply_with({}), out);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_TRUE(out[0].proposals.empty());
  }
  Pair p = make_pair_for(spec::VerifyMode::kMatch);
  spec::Request r = sampled_request(1, 0.8f);
  std::vector<spec::Draft> out;
  Status s = draft_with(p, r, reply_with({{{3}, {1.0}}, {{8}, {1.0}}}), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "drafter rank 2: slot 1: drafts[0].proposals: 2 proposals for 2 draft tokens (verify: match, temperature "
            "0.8)");
}

// A drafter rank's replies carry its running device-to-host total; the target reports the difference since
// its last report, also counting a reply it skips (a settling ask's, round 0) read on the way.
TEST(RemoteDrafting, DrafterReportsCarryTheDeviceToHostBytesSinceTheLastReport) {
  Pair p = make_pair_for(spec::VerifyMode::kMatch);
  spec::Request r = sampled_request(1, 0.0f);
  std::vector<spec::Draft> out;
  DraftReply first = reply_with({});
  first.device_to_host_total = 1000;
  RoundDone done;
  Status s = draft_with(p, r, first, out, &done);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(done.drafters.size(), 1u);
  EXPECT_EQ(done.drafters[0].device_to_host_bytes, 1000u);
  // A skipped settling reply (round 0) with a later total, then round 8's reply with the latest.
  DraftReply settled{0, {}, 1, 0, 0, false, {}, {}, 1300};
  ASSERT_TRUE(p.drafter->send(encode_reply(settled), comm::RowsOut::none()).ok());
  DraftReply second = reply_with({});
  second.round = 8;
  second.device_to_host_total = 1250;  // older than the skipped one's: totals only grow, the larger counts
  ASSERT_TRUE(p.drafter->send(encode_reply(second), comm::RowsOut::none()).ok());
  std::vector<spec::Request*> requests = {&r};
  const std::vector<int> drafters = {2};
  RoundDone next;
  s = p.drafting->draft(requests, drafters, kBlock, 8, out, next);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(next.drafters.size(), 1u);
  EXPECT_EQ(next.drafters[0].device_to_host_bytes, 300u);
}

// Right after a target run the pending tap rows go to the drafter at once (settle_now), as settling asks
// of round 0 that draft nothing: the host rows first (a long prompt's earlier chunks), then the rows the
// run left on its "device" (the CPU backend's are host memory: the host link fetches them), each entry
// continuing the context where the last one ended. The request then holds nothing pending.
TEST(RemoteDrafting, TapRowsGoToTheDrafterRightAfterTheRun) {
  Pair p = make_pair_for(spec::VerifyMode::kMatch);
  auto cpu = cpu::make_cpu_backend(1);
  spec::Request r = sampled_request(1, 0.0f);
  r.settled = 1;  // positions 1..3 pending: one host row, then two device rows of a run's output
  r.taps = {10, 11};
  const std::vector<float> output = {-1, -1, 20, 21, 22, 23, -1, -1};  // rows 1..2 of 4, stride 2
  r.device_taps = {output.data() + kWidth, 2, kWidth, kWidth, ir::Storage::kF32, cpu.get()};
  std::vector<spec::Request*> requests = {&r};
  const std::vector<int> drafters = {2};
  RoundDone done;
  Status s = p.drafting->settle_now(requests, drafters, done);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(p.drafting->route(), spec::TapRoute::kDevice);
  EXPECT_EQ(r.settled, r.start);
  EXPECT_TRUE(r.taps.empty());
  EXPECT_EQ(r.device_taps.rows, 0u);
  EXPECT_GT(done.bytes_sent, 0u);
  const std::vector<std::vector<float>> rows = {{10, 11}, {20, 21, 22, 23}};
  const uint32_t settled[] = {1, 2}, starts[] = {2, 4};
  for (size_t k = 0; k < 2; ++k) {
    auto got = p.drafter->recv(comm::Clock::now() + std::chrono::seconds(2));
    ASSERT_TRUE(got.ok() && got->has_value());
    auto ask = decode_ask((*got)->header, (*got)->rows, 1);
    ASSERT_TRUE(ask.ok()) << ask.error().message();
    EXPECT_EQ(ask->round, 0u);
    ASSERT_EQ(ask->entries.size(), 1u);
    const DraftEntry& e = ask->entries[0];
    EXPECT_EQ(e.slot, 1u);
    EXPECT_EQ(e.settled, settled[k]);
    EXPECT_EQ(e.start, starts[k]);
    EXPECT_EQ(e.bonus, r.tokens[starts[k]]);
    EXPECT_FALSE(e.wants_draft);
    EXPECT_FALSE(e.guess);
    EXPECT_EQ((*got)->data, rows[k]);
  }
  // Nothing else was sent: the next ask carries no rows for this request.
  auto more = p.drafter->recv(comm::Clock::now() + std::chrono::milliseconds(50));
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(more->has_value());
}

}  // namespace
}  // namespace tandem::worker
