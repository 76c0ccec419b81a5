// The generation data plane's messages: DraftAsk and DraftReply (worker/gen_messages.h) round-trip,
// (with the overlap's flags, verified drafts and guess replies) and proposals q bit for bit, and every
// malformed header is refused naming the sender, the field and the numbers (a proposal count or a
// probability count that does not match); each q takes its smallest exact form (its list, a dense range,
// or a range's pairs where q is not +0.0) and comes back the same bits, or is one of the link's rows (a
// form byte, counted against the rows carried); the link frame
// and the host link (engine/comm) carry headers and rows intact between two in-process pipe ends and
// report a closed end as a lost peer.
#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "engine/comm/comm.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

constexpr uint32_t kVocab = 151936;  // Qwen3's: proposals over ids 0..n-1 must fit it

DraftEntry entry(uint32_t slot, uint32_t settled, uint32_t rows, uint32_t start, uint32_t bonus, float temperature,
                 uint64_t seed) {
  DraftEntry e;
  e.slot = slot;
  e.settled = settled;
  e.rows = rows;
  e.start = start;
  e.bonus = bonus;
  e.temperature = temperature;
  e.seed = seed;
  return e;
}

// The second entry verifies a guess (drafts 5, 6) and asks for the next guesses.
DraftAsk sample_ask() {
  DraftAsk a;
  a.round = 41;
  a.block = 8;
  a.entries = {entry(2, 0, 5, 5, 77, 0.0f, 0), entry(0, 9, 1, 10, 3, 0.8f, 1234567890123ULL)};
  a.entries[1].wants_draft = false;
  a.entries[1].guess = true;
  a.entries[1].verified = {5, 6};
  return a;
}

DraftReply sample_guesses() {
  DraftReply r;
  r.round = 41;
  r.guess = true;
  r.guesses = {{{6, {9, 8, 7}}, {13, {4}}}, {}};
  r.slots_used = 2;
  return r;
}

DraftAsk sample_release() {
  DraftAsk a;
  a.releases = {4, 1};
  return a;
}

template <typename T>
void expect_error(const Result<T>& s, const std::string& want) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), want);
}

TEST(GenMessages, AskAndReplyRoundTrip) {
  const DraftAsk a = sample_ask();
  auto back = decode_ask(encode_ask(a), 6, 3);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->round, 41u);
  EXPECT_EQ(back->block, 8u);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[1].slot, 0u);
  EXPECT_EQ(back->entries[1].settled, 9u);
  EXPECT_EQ(back->entries[1].rows, 1u);
  EXPECT_EQ(back->entries[1].start, 10u);
  EXPECT_EQ(back->entries[1].bonus, 3u);
  EXPECT_EQ(back->entries[1].temperature, 0.8f);
  EXPECT_EQ(back->entries[1].seed, 1234567890123ULL);
  EXPECT_TRUE(back->entries[0].wants_draft);
  EXPECT_FALSE(back->entries[0].guess);
  EXPECT_TRUE(back->entries[0].verified.empty());
  EXPECT_FALSE(back->entries[1].wants_draft);
  EXPECT_TRUE(back->entries[1].guess);
  EXPECT_EQ(back->entries[1].verified, (std::vector<uint32_t>{5, 6}));
  auto rel = decode_ask(encode_ask(sample_release()), 0, 3);
  ASSERT_TRUE(rel.ok()) << rel.error().message();
  EXPECT_EQ(rel->round, 0u);
  EXPECT_EQ(rel->releases, (std::vector<uint32_t>{4, 1}));
  EXPECT_TRUE(rel->entries.empty());
  DraftReply r{41, {{1, 2, 3, 4, 5, 6, 7}, {}}, 3, 10, 20, false, {}, {}, (uint64_t{1} << 40) + 5};
  auto rb = decode_reply(encode_reply(r), 2, kVocab);
  ASSERT_TRUE(rb.ok()) << rb.error().message();
  EXPECT_EQ(rb->round, 41u);
  EXPECT_EQ(rb->drafts, r.drafts);
  EXPECT_EQ(rb->slots_used, 3u);
  EXPECT_EQ(rb->settle_us, 10u);
  EXPECT_EQ(rb->draft_us, 20u);
  EXPECT_EQ(rb->device_to_host_total, (uint64_t{1} << 40) + 5);
  EXPECT_FALSE(rb->guess);
  auto gb = decode_reply(encode_reply(sample_guesses()), 2, kVocab);
  ASSERT_TRUE(gb.ok()) << gb.error().message();
  EXPECT_TRUE(gb->guess);
  EXPECT_TRUE(gb->drafts.empty());
  ASSERT_EQ(gb->guesses.size(), 2u);
  ASSERT_EQ(gb->guesses[0].size(), 2u);
  EXPECT_EQ(gb->guesses[0][0].at, 6u);
  EXPECT_EQ(gb->guesses[0][0].tokens, (std::vector<uint32_t>{9, 8, 7}));
  EXPECT_EQ(gb->guesses[0][1].at, 13u);
  EXPECT_EQ(gb->guesses[0][1].tokens, (std::vector<uint32_t>{4}));
  EXPECT_TRUE(gb->guesses[1].empty());
  EXPECT_EQ(gb->slots_used, 2u);
}

TEST(GenMessages, MalformedAsksAreRefused) {
  const auto bytes = encode_ask(sample_ask());
  expect_error(decode_ask(bytes, 7, 3),
               "malformed draft ask from rank 3 (109 bytes): entries.rows: they add up to 6 rows, the message carries 7");
  auto truncated = bytes;
  truncated.pop_back();
  expect_error(decode_ask(truncated, 6, 3),
               "malformed draft ask from rank 3 (108 bytes): entries.verified: length 2 exceeds the 7 bytes left");
  DraftAsk gap = sample_ask();
  gap.entries[1].start = 11;
  expect_error(decode_ask(encode_ask(gap), 6, 3),
               "malformed draft ask from rank 3 (109 bytes): entries.rows: slot 0: context 9 + 1 rows does not reach "
               "the block at 11");
  auto more = bytes;
  more[17] = 3;  // the entries count
  expect_error(decode_ask(more, 6, 3),
               "malformed draft ask from rank 3 (109 bytes): entries: 3 entries need at least 120 bytes, 88 are left");
  auto flags = bytes;
  flags[53] = 5;  // the first entry's flags: wants a draft, and bit 2
  expect_error(decode_ask(flags, 6, 3),
               "malformed draft ask from rank 3 (109 bytes): entries.flags: slot 2: unknown flags 0x5");
  auto guesses = encode_reply(sample_guesses());
  guesses[13] = 0xff;  // the first entry's guess count
  expect_error(decode_reply(guesses, 4, kVocab),
               "malformed draft reply from rank 4 (81 bytes): guesses: 255 guesses exceed the 64 bytes left");
  expect_error(decode_ask(encode_reply(DraftReply{}), 0, 3),
               "malformed draft ask from rank 3 (41 bytes): kind 2 is not an ask");
  auto reply = encode_reply(DraftReply{5, {{1, 2}}, 0, 0, 0, false, {}, {}});
  reply[9] = 0xff;  // the drafts count
  expect_error(decode_reply(reply, 4, kVocab),
               "malformed draft reply from rank 4 (57 bytes): drafts: 255 entries exceed the 44 bytes left");
  auto longer = encode_reply(DraftReply{5, {{1, 2}}, 0, 0, 0, false, {}, {}});
  longer.push_back(0);
  expect_error(decode_reply(longer, 4, kVocab), "malformed draft reply from rank 4 (58 bytes): 1 bytes past the end");
}

// Rejection sampling: each draft token's proposal q travels with it, its f64 probabilities exactly.
DraftReply reply_with_proposals() {
  DraftReply r{9, {{5, 6}, {}}, 1, 0, 0, false, {}, {}};
  r.proposals = {{{{5, 1, 6}, {0.5, 0.25, 0.1 + 0.2}}, {{6}, {1.0}}}, {}};
  return r;
}

TEST(GenMessages, ProposalsRoundTripExactly) {
  const DraftReply r = reply_with_proposals();
  auto back = decode_reply(encode_reply(r), 2, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->drafts, r.drafts);
  ASSERT_EQ(back->proposals.size(), 2u);
  ASSERT_EQ(back->proposals[0].size(), 2u);
  EXPECT_EQ(back->proposals[0][0].ids, (std::vector<uint32_t>{5, 1, 6}));
  EXPECT_EQ(back->proposals[0][0].probs, (std::vector<double>{0.5, 0.25, 0.1 + 0.2}));  // bit for bit
  EXPECT_EQ(back->proposals[0][1].ids, (std::vector<uint32_t>{6}));
  EXPECT_TRUE(back->proposals[1].empty());
}

// One draft token whose q is `q`, the rest of the reply empty.
DraftReply reply_with_q(ir::Distribution q) {
  DraftReply r{3, {{7}}, 1, 0, 0, false, {}, {}};
  r.proposals = {{std::move(q)}};
  return r;
}

// A q over ids 0..n-1 (v1 at top_p 1).
ir::Distribution over_vocab(uint32_t n) {
  ir::Distribution q;
  q.ids.resize(n);
  q.probs.assign(n, 0.0);
  for (uint32_t i = 0; i < n; ++i) q.ids[i] = i;
  return q;
}

uint64_t bits_of(double v) { return std::bit_cast<uint64_t>(v); }

void expect_same_q(const ir::Distribution& got, const ir::Distribution& want) {
  ASSERT_EQ(got.ids, want.ids);
  ASSERT_EQ(got.probs.size(), want.probs.size());
  for (size_t i = 0; i < want.probs.size(); ++i) {
    ASSERT_EQ(bits_of(got.probs[i]), bits_of(want.probs[i])) << "id " << got.ids[i];
  }
}

// The reply's bytes beside its one proposal: kind, round, entry count, the draft, the proposal count,
// slots_used, settle_us, draft_us, device_to_host_total.
constexpr size_t kAround = 1 + 8 + 4 + (4 + 4) + 4 + 4 + 8 + 8 + 8;

TEST(GenMessages, ProposalsTakeTheirSmallestExactForm) {
  // A q over the whole vocabulary, every id with mass: the probabilities alone (8 bytes an id, not 12).
  ir::Distribution dense = over_vocab(kVocab);
  for (uint32_t i = 0; i < kVocab; ++i) dense.probs[i] = 1.0 / (3.0 + i);
  dense.probs[5] = 0.1 + 0.2;
  const auto dense_bytes = encode_reply(reply_with_q(dense));
  EXPECT_EQ(dense_bytes.size(), kAround + 1 + 4 + 8 * size_t{kVocab});
  auto back = decode_reply(dense_bytes, 2, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  expect_same_q(back->proposals[0][0], dense);

  // Mass on a few ids (underflowed tails, a low temperature): only the pairs where q is not +0.0; a -0.0
  // and the smallest subnormal are pairs too, so the rebuilt vector is the same bits.
  ir::Distribution few = over_vocab(kVocab);
  few.probs[0] = 0.5;
  few.probs[17] = 0.1 + 0.2;
  few.probs[151935] = 0.2 - 4.9e-324;
  few.probs[4000] = 4.9e-324;
  few.probs[9] = -0.0;
  const auto few_bytes = encode_reply(reply_with_q(few));
  EXPECT_EQ(few_bytes.size(), kAround + 1 + 4 + (4 + 5 * 4) + (4 + 5 * 8));
  back = decode_reply(few_bytes, 2, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  expect_same_q(back->proposals[0][0], few);
  EXPECT_EQ(bits_of(back->proposals[0][0].probs[9]), bits_of(-0.0));

  // A selector's candidates or a nucleus: its (id, q) list as it is, in its order.
  const ir::Distribution list{{90, 3, 151000}, {0.25, 0.5, 0.1 + 0.15}};
  const auto list_bytes = encode_reply(reply_with_q(list));
  EXPECT_EQ(list_bytes.size(), kAround + 1 + (4 + 3 * 4) + (4 + 3 * 8));
  back = decode_reply(list_bytes, 2, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  expect_same_q(back->proposals[0][0], list);
}

TEST(GenMessages, ProposalFormsPastTheVocabularyAreRefused) {
  ir::Distribution few = over_vocab(12);
  few.probs[3] = 1.0;
  expect_error(decode_reply(encode_reply(reply_with_q(few)), 4, 11),
               "malformed draft reply from rank 4 (78 bytes): drafts[0].proposals[0].range: 12 ids (the vocabulary "
               "has 11)");
  ir::Distribution dense = over_vocab(12);
  dense.probs.assign(12, 1.0 / 12);
  expect_error(decode_reply(encode_reply(reply_with_q(dense)), 4, 11),
               "malformed draft reply from rank 4 (154 bytes): drafts[0].proposals[0].probs: a dense proposal over 12 "
               "ids (the vocabulary has 11)");
  auto bad_form = encode_reply(reply_with_q(few));
  bad_form[1 + 8 + 4 + 8 + 4] = 7;
  expect_error(decode_reply(bad_form, 4, 12),
               "malformed draft reply from rank 4 (78 bytes): drafts[0].proposals[0].form: 7 is not a proposal form");
}

TEST(GenMessages, MalformedProposalsAreRefusedNamingTheField) {
  DraftReply short_q = reply_with_proposals();
  short_q.proposals[0].pop_back();
  expect_error(decode_reply(encode_reply(short_q), 4, kVocab),
               "malformed draft reply from rank 4 (110 bytes): drafts[0].proposals: 1 proposals for 2 draft tokens");
  DraftReply uneven = reply_with_proposals();
  uneven.proposals[0][1].probs = {0.5, 0.5};
  expect_error(decode_reply(encode_reply(uneven), 4, kVocab),
               "malformed draft reply from rank 4 (139 bytes): drafts[0].proposals[1].probs: 2 probabilities for 1 "
               "ids");
  DraftReply empty = reply_with_proposals();
  empty.proposals[0][1] = {};
  expect_error(decode_reply(encode_reply(empty), 4, kVocab),
               "malformed draft reply from rank 4 (119 bytes): drafts[0].proposals[1].probs: 0 probabilities for 0 "
               "ids");
  auto cut = encode_reply(reply_with_proposals());
  cut.resize(cut.size() - 48);  // past the reply's fixed tail (slots_used .. device_to_host_total)
  expect_error(decode_reply(cut, 4, kVocab),
               "malformed draft reply from rank 4 (83 bytes): truncated at drafts.proposals.probs");
}

// A v1 drafter's q rows cross as the reply's link rows: one form byte a proposal in the header, the
// entry's count of them back, in entry order; the rows must add up to what the link carried and fit the
// vocabulary, and an entry's proposals are all rows or all lists.
DraftReply reply_with_rows() {
  DraftReply r{9, {{5, 6}, {}, {7, 8}}, 1, 0, 0, false, {}, {}};
  r.proposals.resize(3);
  r.row_proposals = {2, 0, 2};
  return r;
}

TEST(GenMessages, RowProposalsRoundTripAsAFormByteEach) {
  const DraftReply r = reply_with_rows();
  const auto bytes = encode_reply(r);
  // Beside the drafts (kind, round, count, three drafts with their q counts, the trailer): a byte a q.
  EXPECT_EQ(bytes.size(), 1 + 8 + 4 + 3 * 4 + (2 + 0 + 2) * 4 + 3 * 4 + 4 + 8 + 8 + 8 + 4 * 1);
  auto back = decode_reply(bytes, 2, kVocab, 4, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->drafts, r.drafts);
  EXPECT_EQ(back->row_proposals, (std::vector<uint32_t>{2, 0, 2}));
  for (const auto& q : back->proposals) EXPECT_TRUE(q.empty());
  // Without row proposals every count is 0.
  back = decode_reply(encode_reply(reply_with_proposals()), 2, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->row_proposals, (std::vector<uint32_t>{0, 0}));
}

TEST(GenMessages, RowProposalsMustMatchTheLinksRows) {
  const auto bytes = encode_reply(reply_with_rows());
  const std::string at = "malformed draft reply from rank 4 (" + std::to_string(bytes.size()) + " bytes): ";
  expect_error(decode_reply(bytes, 4, kVocab, 3, kVocab),
               at + "drafts.proposals: 4 row proposals, the message carries 3 rows");
  expect_error(decode_reply(bytes, 4, kVocab, 0, 0),
               at + "drafts.proposals: 4 row proposals, the message carries 0 rows");
  expect_error(decode_reply(bytes, 4, 11, 4, 12), at + "drafts.proposals: rows of 12 ids (the vocabulary has 11)");
  expect_error(decode_reply(encode_reply(reply_with_proposals()), 4, kVocab, 2, kVocab),
               "malformed draft reply from rank 4 (131 bytes): drafts.proposals: 0 row proposals, the message "
               "carries 2 rows");
  // A list among row proposals, and a row among listed ones.
  DraftReply mixed = reply_with_rows();
  mixed.row_proposals[0] = 0;
  mixed.proposals[0] = {{{5}, {1.0}}, {{6}, {1.0}}};
  auto mixed_bytes = encode_reply(mixed);
  const size_t second_q = 1 + 8 + 4 + (4 + 2 * 4) + 4 + (1 + (4 + 4) + (4 + 8));  // entry 0's second q form
  mixed_bytes[second_q] = 3;
  expect_error(decode_reply(mixed_bytes, 4, kVocab, 3, kVocab),
               "malformed draft reply from rank 4 (" + std::to_string(mixed_bytes.size()) +
                   " bytes): drafts[0].proposals[1].form: 3 among listed ones");
  auto rows_bytes = encode_reply(reply_with_rows());
  rows_bytes[1 + 8 + 4 + (4 + 2 * 4) + 4 + 1] = 0;  // entry 0's second q: a list form
  expect_error(decode_reply(rows_bytes, 4, kVocab, 4, kVocab),
               at + "drafts[0].proposals[1].form: 0 among row proposals");
  // Guesses carry no rows.
  expect_error(decode_reply(encode_reply(sample_guesses()), 4, kVocab, 1, kVocab),
               "malformed draft reply from rank 4 (" + std::to_string(encode_reply(sample_guesses()).size()) +
                   " bytes): guesses carry no rows, the message has 1");
}

TEST(GenMessages, RandomMutationsNeverCrash) {
  std::mt19937 rng(11);
  const auto ask = encode_ask(sample_ask());
  const auto plain = encode_reply(DraftReply{41, {{1, 2, 3}, {4}}, 3, 10, 20, false, {}, {}});
  const auto with_q = encode_reply(reply_with_proposals());
  const auto guesses = encode_reply(sample_guesses());
  const auto rows = encode_reply(reply_with_rows());
  for (int i = 0; i < 8000; ++i) {
    auto bytes = (i % 2) ? ask : (i % 8 == 0 ? plain : i % 8 == 2 ? with_q : i % 8 == 4 ? rows : guesses);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0: bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng()); break;
        case 1: if (bytes.size() > 1) bytes.resize(rng() % bytes.size()); break;
        default: bytes.push_back(static_cast<uint8_t>(rng())); break;
      }
      if (bytes.empty()) bytes.push_back(0);
    }
    (void)decode_ask(bytes, static_cast<uint32_t>(rng() % 8), 1);
    (void)decode_reply(bytes, 1, kVocab);
    (void)decode_reply(bytes, 1, kVocab, static_cast<uint32_t>(rng() % 6), kVocab);
  }
}

TEST(HostLink, HeadersAndRowsArriveInOrderAndALostPeerIsReported) {
  auto [a, b] = comm::make_local_pipes(1, 2);
  auto to_b = comm::make_host_link(std::move(a));
  auto to_a = comm::make_host_link(std::move(b));
  EXPECT_STREQ(to_b->kind(), "mpi");
  EXPECT_EQ(to_b->peer(), 2);
  EXPECT_EQ(to_a->peer(), 1);
  const std::vector<float> rows = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  ASSERT_TRUE(to_b->send(std::vector<uint8_t>{9, 8, 7}, comm::RowsOut::of_host(rows, 3)).ok());
  ASSERT_TRUE(to_b->send(std::vector<uint8_t>{1}, comm::RowsOut::none()).ok());
  const auto soon = comm::Clock::now() + std::chrono::seconds(5);
  auto p = to_a->recv(soon);
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->header, (std::vector<uint8_t>{9, 8, 7}));
  EXPECT_EQ((*p)->rows, 2u);
  EXPECT_EQ((*p)->width, 3u);
  EXPECT_EQ((*p)->data, rows);
  p = to_a->recv(soon);
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->rows, 0u);
  EXPECT_EQ(to_b->stats().messages_sent, 2u);
  EXPECT_EQ(to_a->stats().bytes_received, to_b->stats().bytes_sent);
  // Nothing more: the deadline passes.
  p = to_a->recv(comm::Clock::now() + std::chrono::milliseconds(10));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_value());
  to_b.reset();
  p = to_a->recv(soon);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(p.error().message(), "rank 1 is gone (its pipe end was closed)");
}

TEST(HostLink, MalformedFramesAreRefused) {
  const std::vector<float> rows = {1, 2, 3, 4};
  auto frame = comm::encode_frame(std::vector<uint8_t>{5}, 2, 2, rows, 0);
  auto ok = comm::decode_frame(frame, 4);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->packet.data, rows);
  auto short_rows = frame;
  short_rows.pop_back();
  expect_error(comm::decode_frame(short_rows, 4),
               "malformed data-plane frame from rank 4 (36 bytes): 2 rows of width 2 need 16 bytes after the header, "
               "the frame has 15");
  auto bad_magic = frame;
  bad_magic[0] ^= 1;
  expect_error(comm::decode_frame(bad_magic, 4),
               "malformed data-plane frame from rank 4 (37 bytes): magic 0x314c4455 is not 0x314c4454");
  auto flags = frame;
  flags[6] = 6;
  expect_error(comm::decode_frame(flags, 4), "malformed data-plane frame from rank 4 (37 bytes): unknown flags 0x6");
}

// The frame carries its rows' storage (flags bits 8-9): inline 16-bit rows decode widened to f32, their
// length checked at 2 bytes an element; rows elsewhere keep the storage for the link to receive.
TEST(HostLink, FramesCarryTheRowsStorage) {
  const std::vector<uint16_t> bits = {0x3f80, 0xc000, 0x7fc1, 0x0001};  // bf16 1, -2, a NaN, a subnormal
  const auto raw = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bits.data()), bits.size() * 2);
  auto frame = comm::encode_frame(std::vector<uint8_t>{5}, 2, 2, raw, ir::Storage::kBF16, 0);
  EXPECT_EQ(frame[7], 2);  // flags, little-endian: bf16 (2) in bits 8-9
  auto got = comm::decode_frame(frame, 4);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->storage, ir::Storage::kBF16);
  EXPECT_EQ(got->flags, 0);
  ASSERT_EQ(got->packet.data.size(), bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got->packet.data[i]), uint32_t{bits[i]} << 16) << i;
  }
  auto short_rows = frame;
  short_rows.pop_back();
  expect_error(comm::decode_frame(short_rows, 4),
               "malformed data-plane frame from rank 4 (28 bytes): 2 bf16 rows of width 2 need 8 bytes after the "
               "header, the frame has 7");
  auto elsewhere = comm::decode_frame(comm::encode_frame(std::vector<uint8_t>{}, 3, 4, {}, ir::Storage::kF16,
                                                         comm::kRowsElsewhere), 4);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.error().message();
  EXPECT_EQ(elsewhere->flags, comm::kRowsElsewhere);
  EXPECT_EQ(elsewhere->storage, ir::Storage::kF16);
  EXPECT_TRUE(elsewhere->packet.data.empty());
  auto ids = frame;
  ids[7] = 3;  // u32
  expect_error(comm::decode_frame(ids, 4),
               "malformed data-plane frame from rank 4 (29 bytes): rows stored as u32 ids; a link carries f32, f16 "
               "or bf16 rows");
}

}  // namespace
}  // namespace tandem::worker
