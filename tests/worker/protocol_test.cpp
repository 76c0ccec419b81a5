// The control-plane wire format (worker/protocol.h): exact round trips of every message, and malformed
// frames (short, wrong magic or version, lying lengths, wrong tag, bad batch structure, random
// mutations) rejected with a message that says what is wrong, never read out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "worker/protocol.h"

namespace tandem::worker {
namespace {

ir::Batch sample_batch() {
  ir::Batch b;
  b.add_sequence({1, 7, 4, 9, 2}, {2}, 0);
  b.add_sequence({1, 4, 4, 2}, {1, 2}, 2);
  b.add_sequence({}, {}, 1);
  return b;
}

template <typename T>
T round_trip(const Message& m, Tag tag) {
  auto bytes = encode(m);
  auto back = decode(bytes, tag);
  EXPECT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(std::holds_alternative<T>(*back));
  return std::get<T>(*back);
}

uint32_t bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Protocol, RunBatchRoundTrips) {
  RunBatch m{0x0123456789abcdefULL, sample_batch()};
  auto back = round_trip<RunBatch>(m, Tag::kCommand);
  EXPECT_EQ(back.batch_id, m.batch_id);
  EXPECT_EQ(back.batch.ids, m.batch.ids);
  EXPECT_EQ(back.batch.cu, m.batch.cu);
  EXPECT_EQ(back.batch.picks, m.batch.picks);
  EXPECT_EQ(back.batch.pcu, m.batch.pcu);
  EXPECT_EQ(back.batch.qtype, m.batch.qtype);
}

TEST(Protocol, BatchDoneKeepsEveryFloatBit) {
  BatchDone m;
  m.batch_id = 42;
  m.run_us = 1234567;
  m.bucket = {64, 16, 64};
  m.logits = {0.1f, -0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
              std::numeric_limits<float>::quiet_NaN(), 3.4e38f};
  m.act = {{1.5f, -2.25f}, {std::nextafter(1.0f, 2.0f), 0.0f}};
  auto back = round_trip<BatchDone>(m, Tag::kResult);
  EXPECT_EQ(back.batch_id, 42u);
  EXPECT_EQ(back.run_us, 1234567u);
  EXPECT_EQ(back.bucket, (ir::Bucket{64, 16, 64}));
  ASSERT_EQ(back.logits.size(), m.logits.size());
  for (size_t i = 0; i < m.logits.size(); ++i) EXPECT_EQ(bits(back.logits[i]), bits(m.logits[i])) << i;
  ASSERT_EQ(back.act.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(bits(back.act[i][0]), bits(m.act[i][0]));
    EXPECT_EQ(bits(back.act[i][1]), bits(m.act[i][1]));
  }
}

TEST(Protocol, StatusMessagesRoundTrip) {
  Ready r{"scorer", "decision-tiny", "cpu", "1 thread", 4556608, 99, 1024};
  auto back = round_trip<Ready>(r, Tag::kStatus);
  EXPECT_EQ(back.role, "scorer");
  EXPECT_EQ(back.model, "decision-tiny");
  EXPECT_EQ(back.backend, "cpu");
  EXPECT_EQ(back.device, "1 thread");
  EXPECT_EQ(back.weight_bytes, 4556608u);
  EXPECT_EQ(back.plan_bytes, 99u);
  EXPECT_EQ(back.vocab, 1024u);
  Ready g{"target", "pylm", "cpu", "1 thread", 7, 0, 6144, 4, 512, 8, 503, 25165824};
  auto gback = round_trip<Ready>(g, Tag::kStatus);
  EXPECT_EQ(gback.max_context, 503u);
  EXPECT_EQ(gback.state_bytes, 25165824u);
  EXPECT_EQ(round_trip<LoadFailed>(LoadFailed{"tensor x: shape [3] expected [4]"}, Tag::kStatus).message,
            "tensor x: shape [3] expected [4]");
  auto f = round_trip<BatchFailed>(BatchFailed{7, "boom"}, Tag::kResult);
  EXPECT_EQ(f.batch_id, 7u);
  EXPECT_EQ(f.message, "boom");
  EXPECT_EQ(round_trip<Heartbeat>(Heartbeat{99}, Tag::kWorkerBeat).seq, 99u);
  EXPECT_EQ(round_trip<Heartbeat>(Heartbeat{3}, Tag::kCoordinatorBeat).seq, 3u);
  round_trip<Shutdown>(Shutdown{}, Tag::kCommand);
  EXPECT_EQ(round_trip<Abort>(Abort{"rank 2 (scorer, cpu) is dead"}, Tag::kCommand).reason,
            "rank 2 (scorer, cpu) is dead");
  round_trip<Bye>(Bye{}, Tag::kStatus);
}

Round sample_round() {
  Round r;
  r.round = 77;
  r.block = 8;
  r.releases = {3, 0};
  r.moves = {{2, 5, 6}, {4, -1, 6}};
  GenAdmit a;
  a.request = 0xfeedfacecafebeefULL;
  a.slot = 1;
  a.drafter = 2;
  a.max_tokens = 300;
  a.temperature = 0.7f;
  a.top_p = std::nextafter(1.0f, 0.0f);
  a.seed = 123456789012345ULL;
  a.prompt = {10, 20, 30};
  a.stop_ids = {2};
  r.admits = {a, GenAdmit{}};
  r.drains = {5, 2};
  return r;
}

RoundDone sample_round_done() {
  RoundDone d;
  d.round = 77;
  d.results = {{5, 1, {9, 8, 7}, GenFinish::kStop, 7, 2}, {6, 3, {}, GenFinish::kNone, 0, 0}};
  d.slots_used = 3;
  d.prefill_us = 10;
  d.wait_us = 20;
  d.verify_us = 30;
  d.send_us = 40;
  d.bytes_sent = 1u << 20;
  d.bytes_received = 99;
  d.guesses = 12;
  d.guesses_used = 5;
  d.drafters = {{2, 3, 50, 60, (uint64_t{1} << 33) + 9}};
  d.handoffs = 4;
  d.device_to_host_bytes = (uint64_t{1} << 40) + 3;
  return d;
}

TEST(Protocol, GenerationMessagesRoundTrip) {
  const Round r = sample_round();
  auto back = round_trip<Round>(r, Tag::kCommand);
  EXPECT_EQ(back.round, 77u);
  EXPECT_EQ(back.block, 8u);
  EXPECT_EQ(back.releases, r.releases);
  ASSERT_EQ(back.moves.size(), 2u);
  EXPECT_EQ(back.moves[0].drafter, 5);
  EXPECT_EQ(back.moves[1].drafter, -1);
  EXPECT_EQ(back.moves[1].scratch, 6u);
  EXPECT_EQ(back.drains, (std::vector<int32_t>{5, 2}));
  ASSERT_EQ(back.admits.size(), 2u);
  const GenAdmit& a = back.admits[0];
  EXPECT_EQ(a.request, 0xfeedfacecafebeefULL);
  EXPECT_EQ(a.slot, 1u);
  EXPECT_EQ(a.drafter, 2);
  EXPECT_EQ(a.max_tokens, 300u);
  EXPECT_EQ(bits(a.temperature), bits(0.7f));
  EXPECT_EQ(bits(a.top_p), bits(std::nextafter(1.0f, 0.0f)));
  EXPECT_EQ(a.seed, 123456789012345ULL);
  EXPECT_EQ(a.prompt, (std::vector<uint32_t>{10, 20, 30}));
  EXPECT_EQ(a.stop_ids, (std::vector<uint32_t>{2}));
  EXPECT_EQ(back.admits[1].drafter, -1);

  auto done = round_trip<RoundDone>(sample_round_done(), Tag::kResult);
  ASSERT_EQ(done.results.size(), 2u);
  EXPECT_EQ(done.results[0].tokens, (std::vector<uint32_t>{9, 8, 7}));
  EXPECT_EQ(done.results[0].finish, GenFinish::kStop);
  EXPECT_EQ(done.results[0].drafted, 7u);
  EXPECT_EQ(done.results[0].accepted, 2u);
  EXPECT_EQ(done.slots_used, 3u);
  EXPECT_EQ(done.send_us, 40u);
  EXPECT_EQ(done.bytes_sent, 1u << 20);
  EXPECT_EQ(done.guesses, 12u);
  EXPECT_EQ(done.guesses_used, 5u);
  ASSERT_EQ(done.drafters.size(), 1u);
  EXPECT_EQ(done.drafters[0].rank, 2);
  EXPECT_EQ(done.drafters[0].draft_us, 60u);
  EXPECT_EQ(done.drafters[0].device_to_host_bytes, (uint64_t{1} << 33) + 9);
  EXPECT_EQ(done.handoffs, 4u);
  EXPECT_EQ(done.device_to_host_bytes, (uint64_t{1} << 40) + 3);
  auto lost = round_trip<PeerLost>(PeerLost{3, "no heartbeat for 1600 ms"}, Tag::kCommand);
  EXPECT_EQ(lost.rank, 3);
  EXPECT_EQ(lost.why, "no heartbeat for 1600 ms");
  auto failed = round_trip<RoundFailed>(RoundFailed{8, "slot 3 is taken"}, Tag::kResult);
  EXPECT_EQ(failed.round, 8u);
  EXPECT_EQ(failed.message, "slot 3 is taken");
  Ready ready{"target", "pylm", "cpu", "2 threads", 1, 2, 6144, 8, 1041, 16, 1024};
  auto rb = round_trip<Ready>(ready, Tag::kStatus);
  EXPECT_EQ(rb.slots, 8u);
  EXPECT_EQ(rb.capacity, 1041u);
  EXPECT_EQ(rb.block, 16u);
  EXPECT_EQ(rb.max_context, 1024u);
}

TEST(Protocol, TagsFollowTheSender) {
  EXPECT_EQ(tag_for(Round{}, true), Tag::kCommand);
  EXPECT_EQ(tag_for(PeerLost{}, true), Tag::kCommand);
  EXPECT_EQ(tag_for(RoundDone{}, false), Tag::kResult);
  EXPECT_EQ(tag_for(RoundFailed{}, false), Tag::kResult);
  EXPECT_EQ(tag_for(Heartbeat{}, true), Tag::kCoordinatorBeat);
  EXPECT_EQ(tag_for(Heartbeat{}, false), Tag::kWorkerBeat);
  EXPECT_EQ(tag_for(RunBatch{}, true), Tag::kCommand);
  EXPECT_EQ(tag_for(Abort{}, true), Tag::kCommand);
  EXPECT_EQ(tag_for(BatchDone{}, false), Tag::kResult);
  EXPECT_EQ(tag_for(Ready{}, false), Tag::kStatus);
}

void expect_rejected(const std::vector<uint8_t>& frame, Tag tag, const std::string& part) {
  auto r = decode(frame, tag);
  ASSERT_FALSE(r.ok()) << "accepted a frame that should fail with: " << part;
  EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("malformed control message"), std::string::npos);
}

TEST(Protocol, ShortAndEmptyFrames) {
  expect_rejected({}, Tag::kCommand, "shorter than the 12-byte header");
  expect_rejected({0x54, 0x44, 0x4d}, Tag::kCommand, "shorter than the 12-byte header");
}

TEST(Protocol, WrongMagicAndVersion) {
  auto bytes = encode(Shutdown{});
  auto bad_magic = bytes;
  bad_magic[0] ^= 0xff;
  expect_rejected(bad_magic, Tag::kCommand, "magic");
  auto bad_version = bytes;
  bad_version[4] = 9;
  expect_rejected(bad_version, Tag::kCommand, "protocol version 9 is not this build's 4");
}

TEST(Protocol, BodySizeMustMatch) {
  auto bytes = encode(Heartbeat{5});
  bytes.push_back(0);
  expect_rejected(bytes, Tag::kWorkerBeat, "header says 8 body bytes, the frame has 9");
}

TEST(Protocol, UnknownKindAndWrongTag) {
  auto bytes = encode(Shutdown{});
  bytes[6] = 0x77;
  expect_rejected(bytes, Tag::kCommand, "message kind 119 is unknown");
  expect_rejected(encode(RunBatch{1, sample_batch()}), Tag::kResult, "a RunBatch message may not travel on this tag");
  expect_rejected(encode(Heartbeat{1}), Tag::kCommand, "a Heartbeat message may not travel on this tag");
}

// Rewrites the body-size field after a test edits the body.
void fix_size(std::vector<uint8_t>& bytes) {
  const auto body = static_cast<uint32_t>(bytes.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) bytes[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(body >> (8 * i));
}

TEST(Protocol, EveryTruncationIsAnError) {
  auto full = encode(RunBatch{3, sample_batch()});
  for (size_t n = kFrameHeaderBytes; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    fix_size(cut);
    auto r = decode(cut, Tag::kCommand);
    EXPECT_FALSE(r.ok()) << "a RunBatch cut to " << n << " bytes decoded";
  }
}

TEST(Protocol, ListLengthBeyondTheFrame) {
  auto bytes = encode(RunBatch{3, sample_batch()});
  // The ids count follows the 8-byte batch id: claim a billion ids.
  const size_t at = kFrameHeaderBytes + 8;
  bytes[at] = 0x00;
  bytes[at + 1] = 0xca;
  bytes[at + 2] = 0x9a;
  bytes[at + 3] = 0x3b;
  expect_rejected(bytes, Tag::kCommand, "ids: length 1000000000 exceeds the");
}

TEST(Protocol, LeftoverBytesAreAnError) {
  auto bytes = encode(LoadFailed{"x"});
  bytes.push_back(1);
  bytes.push_back(2);
  fix_size(bytes);
  expect_rejected(bytes, Tag::kStatus, "2 bytes left over");
}

TEST(Protocol, BatchStructureIsChecked) {
  RunBatch m{1, sample_batch()};
  m.batch.cu[2] = 1;  // not monotone
  expect_rejected(encode(m), Tag::kCommand, "batch.cu[2] = 1 is less than cu[1] = 5");
  RunBatch n{1, sample_batch()};
  n.batch.picks[0] = 5;  // outside its 5-token sequence
  expect_rejected(encode(n), Tag::kCommand, "picks[0] = 5 is outside sequence 0");
  RunBatch q{1, sample_batch()};
  q.batch.qtype[1] = 3;
  expect_rejected(encode(q), Tag::kCommand, "qtype[1] = 3");
  RunBatch c{1, sample_batch()};
  c.batch.pcu.pop_back();
  expect_rejected(encode(c), Tag::kCommand, "pcu has 3 entries, expected 4");
}

TEST(Protocol, ActPairsBeyondTheFrame) {
  BatchDone d;
  d.act = {{1, 2}};
  auto bytes = encode(d);
  bytes[bytes.size() - 12] = 0xff;  // the act count sits before the 8 bytes of one pair
  expect_rejected(bytes, Tag::kResult, "act: length");
}

TEST(Protocol, RoundResultsAreChecked) {
  RoundDone d = sample_round_done();
  auto bytes = encode(d);
  // results[0].finish sits after the request (8), slot (4) and three tokens (4 + 12).
  const size_t finish_at = kFrameHeaderBytes + 8 + 4 + 8 + 4 + 16;
  ASSERT_EQ(bytes[finish_at], 2);
  bytes[finish_at] = 3;
  expect_rejected(bytes, Tag::kResult, "results.finish: 3 is not 0 (none), 1 (length) or 2 (stop)");
  d.results[0].accepted = 8;
  expect_rejected(encode(d), Tag::kResult, "results.accepted: 8 of 7 drafts");
  Round r = sample_round();
  auto rbytes = encode(r);
  // The admits count sits after the round (8), block (4), releases (4 + 8) and moves (4 + 24).
  const size_t admits_at = kFrameHeaderBytes + 8 + 4 + 12 + 28;
  rbytes[admits_at + 2] = 0x10;
  expect_rejected(rbytes, Tag::kCommand, "admits: 1048578 entries exceed the");
  expect_rejected(encode(sample_round()), Tag::kResult, "a Round message may not travel on this tag");
  expect_rejected(encode(Heartbeat{1}), Tag::kPeerData, "a Heartbeat message may not travel on this tag");
}

TEST(Protocol, RandomMutationsNeverCrash) {
  std::mt19937 rng(7);
  const std::vector<std::pair<Message, Tag>> seeds = {
      {RunBatch{9, sample_batch()}, Tag::kCommand},
      {BatchDone{9, 1, {32, 8, 32}, {1, 2, 3}, {{1, 2}, {3, 4}, {5, 6}}}, Tag::kResult},
      {Ready{"scorer", "m", "cpu", "d", 1, 2, 3}, Tag::kStatus},
      {sample_round(), Tag::kCommand},
      {sample_round_done(), Tag::kResult},
  };
  size_t accepted = 0;
  for (int round = 0; round < 5000; ++round) {
    const auto& [msg, tag] = seeds[static_cast<size_t>(round) % seeds.size()];
    auto bytes = encode(msg);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0: bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng()); break;
        case 1: bytes.resize(rng() % (bytes.size() + 1)); break;
        case 2: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(rng() % (bytes.size() + 1)),
                             static_cast<uint8_t>(rng())); break;
      }
      if (bytes.empty()) break;
    }
    if (rng() % 2 && bytes.size() >= kFrameHeaderBytes) fix_size(bytes);
    auto r = decode(bytes, tag);
    if (r.ok()) {
      ++accepted;
      // Whatever decodes must encode back to the same bytes: nothing was read past the frame.
      EXPECT_EQ(encode(*r), bytes);
    }
  }
  EXPECT_LT(accepted, 5000u);
}

}  // namespace
}  // namespace tandem::worker
