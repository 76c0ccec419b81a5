// Streaming detokenization (coordinator/text_stream.h) with the shipped pylm tokenizer: text comes out in
// whole UTF-8 characters however the tokens are chunked, and joined it equals the tokenizer's decode();
// stop strings are found across token and chunk boundaries and cut; stop ids end the stream without
// text; special tokens add none.
#include <gtest/gtest.h>

#include "coordinator/text_stream.h"

namespace tandem::coordinator {
namespace {

const io::Tokenizer& pylm() {
  static const std::unique_ptr<io::Tokenizer> t = [] {
    auto r = io::Tokenizer::load(std::string(TANDEM_SOURCE_DIR) + "/models/pylm/tokenizer.json");
    EXPECT_TRUE(r.ok()) << r.error().message();
    return std::move(r).value();
  }();
  return *t;
}

std::vector<uint32_t> encode(const std::string& text) {
  auto r = pylm().encode(text);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.value();
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Pushes `ids` in chunks of `chunk`, checking each piece is whole characters; returns the joined text.
std::string stream(TextStream& s, const std::vector<uint32_t>& ids, size_t chunk) {
  std::string out;
  for (size_t i = 0; i < ids.size(); i += chunk) {
    const std::vector<uint32_t> part(ids.begin() + static_cast<std::ptrdiff_t>(i),
                                     ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + chunk)));
    const std::string piece = s.push(part);
    EXPECT_TRUE(valid_utf8(piece)) << "chunk at " << i;
    out += piece;
  }
  return out + s.finish();
}

TEST(TextStream, MultiByteCharactersSplitAcrossTokensComeOutWhole) {
  const std::string text = "naïve café — 日本語 🙂 ok";
  const auto ids = encode(text);
  // The test means something only if some token holds part of a character.
  size_t partial = 0;
  for (uint32_t id : ids) partial += valid_utf8(pylm().decode_bytes({id}).value()) ? 0 : 1;
  ASSERT_GT(partial, 2u);
  for (size_t chunk : {1u, 2u, 3u, 7u, 100u}) {
    TextStream s(pylm(), {}, {});
    EXPECT_EQ(stream(s, ids, chunk), text) << "chunks of " << chunk;
    EXPECT_FALSE(s.stopped());
    EXPECT_EQ(s.tokens(), ids);
  }
}

TEST(TextStream, StopStringAcrossChunksIsCutAndStops) {
  const auto ids = encode("The quick brown fox jumps over the lazy dog");
  for (size_t chunk : {1u, 2u, 5u, 100u}) {
    TextStream s(pylm(), {"zzz", "n fox j"}, {});
    EXPECT_EQ(stream(s, ids, chunk), "The quick brow") << "chunks of " << chunk;
    EXPECT_TRUE(s.stopped());
    // The ids taken end with the one that completed the stop string.
    const std::string taken = pylm().decode(s.tokens()).value();
    EXPECT_NE(taken.find("n fox j"), std::string::npos) << taken;
    std::vector<uint32_t> fewer(s.tokens().begin(), s.tokens().end() - 1);
    EXPECT_EQ(pylm().decode(fewer).value().find("n fox j"), std::string::npos);
    EXPECT_LT(s.tokens().size(), ids.size());
  }
}

TEST(TextStream, FirstStopStringInTheTextWins) {
  TextStream s(pylm(), {"dog", "quick"}, {});
  EXPECT_EQ(stream(s, encode("The quick brown dog"), 1), "The ");
}

TEST(TextStream, HeldTextThatNeverBecomesAStopIsReleased) {
  TextStream s(pylm(), {"fox!"}, {});
  const auto ids = encode("a fox? no, a fox");
  std::string pushed;
  for (uint32_t id : ids) pushed += s.push({id});
  EXPECT_EQ(pushed, "a fox? no, a ");  // "fox" may still become "fox!"
  EXPECT_EQ(s.finish(), "fox");
  EXPECT_FALSE(s.stopped());
}

TEST(TextStream, StopStringInsideAMultiByteRun) {
  TextStream s(pylm(), {"語"}, {});
  EXPECT_EQ(stream(s, encode("日本語です"), 1), "日本");
  EXPECT_TRUE(s.stopped());
}

TEST(TextStream, StopIdEndsWithoutTextAndLaterTokensAreIgnored) {
  const auto ids = encode("hello world");
  std::vector<uint32_t> with_eos = ids;
  with_eos.push_back(0);  // <|endoftext|>
  for (uint32_t id : encode(" more")) with_eos.push_back(id);
  TextStream s(pylm(), {}, {0});
  EXPECT_EQ(s.push(with_eos), "hello world");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.tokens().size(), ids.size() + 1);
  EXPECT_EQ(s.tokens().back(), 0u);
  EXPECT_EQ(s.push(ids), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(TextStream, SpecialTokensAddNoText) {
  std::vector<uint32_t> ids = encode("a");
  ids.push_back(2);  // <|im_end|>, not a stop id here
  for (uint32_t id : encode("b")) ids.push_back(id);
  TextStream s(pylm(), {}, {});
  EXPECT_EQ(stream(s, ids, 1), "ab");
}

TEST(TextStream, AnIncompleteCharacterAtTheEndIsReplaced) {
  const auto ids = encode("日");
  ASSERT_GE(ids.size(), 2u);
  TextStream s(pylm(), {}, {});
  EXPECT_EQ(s.push({ids[0]}), "");
  EXPECT_EQ(s.finish(), pylm().decode({ids[0]}).value());
  EXPECT_EQ(s.finish(), "");
}

}  // namespace
}  // namespace tandem::coordinator
