// The drain's context messages (worker/context_messages.h) round-trip, are told apart from DraftAsk and
// DraftReply by their first byte, and every malformed header is refused naming the sender, the field and
// the numbers (an unknown kind, a slot named twice, rows that do not add up to the entries' lengths, a
// count past the bytes, bytes past the end); random mutations never crash the decoder.
#include <gtest/gtest.h>

#include <random>

#include "worker/context_messages.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

ContextMessage sample(ContextKind kind) {
  return ContextMessage{kind, 12, {{3, 40}, {0, 0}, {7, 2}}, 5};
}

uint32_t rows_of(const ContextMessage& m) {
  uint32_t n = 0;
  for (const ContextEntry& e : m.entries) n += e.length;
  return m.kind == ContextKind::kRows ? n : 0;
}

void expect_refused(const std::vector<uint8_t>& bytes, uint32_t rows, const std::string& why) {
  auto m = decode_context(bytes, rows, 2);
  ASSERT_FALSE(m.ok()) << why;
  EXPECT_EQ(m.error().kind(), ErrorKind::kFormat);
  EXPECT_NE(m.error().message().find("malformed context message from rank 2"), std::string::npos)
      << m.error().message();
  EXPECT_NE(m.error().message().find(why), std::string::npos) << m.error().message();
}

TEST(ContextMessages, EveryKindRoundTrips) {
  for (ContextKind kind : {ContextKind::kAsk, ContextKind::kRows, ContextKind::kTaken}) {
    const ContextMessage m = sample(kind);
    const auto bytes = encode_context(m);
    EXPECT_TRUE(is_context_message(bytes));
    auto back = decode_context(bytes, rows_of(m), 3);
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(back->kind, kind);
    EXPECT_EQ(back->round, 12u);
    ASSERT_EQ(back->entries.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(back->entries[i].slot, m.entries[i].slot);
      EXPECT_EQ(back->entries[i].length, m.entries[i].length);
    }
    EXPECT_EQ(back->slots_used, 5u);
  }
  auto empty = decode_context(encode_context(ContextMessage{ContextKind::kRows, 1, {}, 0}), 0, 3);
  ASSERT_TRUE(empty.ok()) << empty.error().message();
  EXPECT_TRUE(empty->entries.empty());
}

TEST(ContextMessages, DraftMessagesAreNotContextMessages) {
  DraftAsk ask;
  ask.round = 4;
  EXPECT_FALSE(is_context_message(encode_ask(ask)));
  DraftReply reply;
  EXPECT_FALSE(is_context_message(encode_reply(reply)));
  reply.guess = true;
  EXPECT_FALSE(is_context_message(encode_reply(reply)));
  EXPECT_FALSE(is_context_message({}));
  // And a context message is no draft ask.
  auto as_ask = decode_ask(encode_context(sample(ContextKind::kAsk)), 0, 1);
  EXPECT_FALSE(as_ask.ok());
}

TEST(ContextMessages, MalformedHeadersAreRefusedNamingTheField) {
  auto bytes = encode_context(sample(ContextKind::kRows));
  bytes[0] = 9;
  expect_refused(bytes, 42, "kind: 9 is not 4 (ask), 5 (rows) or 6 (taken)");
  expect_refused(encode_context(sample(ContextKind::kRows)), 41,
                 "entries.length: a context 'rows' message carries 41 rows, its entries say 42");
  expect_refused(encode_context(sample(ContextKind::kAsk)), 42,
                 "entries.length: a context 'ask' message carries 42 rows, its entries say 0");
  ContextMessage twice = sample(ContextKind::kTaken);
  twice.entries[2].slot = 3;
  expect_refused(encode_context(twice), 0, "entries[2].slot: slot 3 appears twice");
  bytes = encode_context(sample(ContextKind::kTaken));
  bytes[9 + 2] = 0x10;  // the entry count, after kind (1) and round (8)
  expect_refused(bytes, 0, "entries: 1048579 entries need 8388632 bytes");
  bytes = encode_context(sample(ContextKind::kTaken));
  bytes.push_back(0);
  expect_refused(bytes, 0, "1 bytes past the end");
  bytes.resize(bytes.size() - 3);
  expect_refused(bytes, 0, "slots_used");
  expect_refused({}, 0, "kind");
}

TEST(ContextMessages, RandomMutationsNeverCrash) {
  std::mt19937 rng(11);
  for (ContextKind kind : {ContextKind::kAsk, ContextKind::kRows, ContextKind::kTaken}) {
    const auto seed = encode_context(sample(kind));
    for (int i = 0; i < 2000; ++i) {
      auto bytes = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        switch (rng() % 3) {
          case 0: bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng()); break;
          case 1: bytes.resize(rng() % (bytes.size() + 1)); break;
          default: bytes.push_back(static_cast<uint8_t>(rng())); break;
        }
        if (bytes.empty()) bytes.push_back(5);
      }
      auto m = decode_context(bytes, static_cast<uint32_t>(rng() % 64), 1);
      if (m.ok()) {
        EXPECT_LE(m->entries.size(), bytes.size() / 8);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::worker
