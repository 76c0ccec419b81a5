// Tokenizer robustness on random input: any valid UTF-8 text round-trips exactly through a lossless
// byte-level tokenizer (added tokens and merges included; special-token matching on or off), invalid UTF-8 is always a Result error, and
// randomly damaged tokenizer.json files load or fail cleanly, never crash (ASan/UBSan run this too).
#include <gtest/gtest.h>

#include <random>

#include "tests/engine/io/tokenizer_test_util.h"

namespace tandem::io::tokenizer_test {
namespace {

// Byte-level, no normalizer, added tokens without strip flags, a few merges: decode(encode(x)) == x.
json lossless_tokenizer() {
  json vocab = byte_vocab();
  vocab["\u0120t"] = 256;
  vocab["\u0120th"] = 257;
  vocab["\u00c3\u00a9"] = 258;
  vocab["\u010A\u010A"] = 259;
  const json added = json::array({added_token("<|x|>", true, false), added_token("  ", false, true),
                                  added_token("<m>", false, false, false, false, true)});
  return tokenizer_json(vocab, {"\u0120 t", "\u0120t h", "\u00c3 \u00a9", "\u010A \u010A"}, byte_level(), nullptr,
                        added);
}

// Random text from fragments that exercise every stage, plus arbitrary bytes now and then.
std::string random_text(std::mt19937& rng, bool allow_invalid) {
  static const std::vector<std::string> fragments = {
      "the", " the", "  ", "\t", "\n\n", "\r\n", " ", "\u00e9", "e\u0301", "\u65e5\u672c", "\U0001F600",
      "<|x|>", "<m>", "<|x", "'s", "'T", "123", "!!", "\u00a0", "\u0085", "\u180e", "\u200d", "a"};
  std::uniform_int_distribution<size_t> count(0, 12);
  std::uniform_int_distribution<size_t> pick(0, fragments.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> coin(0, 9);
  std::string s;
  for (size_t n = count(rng); n > 0; --n) {
    if (allow_invalid && coin(rng) == 0) {
      s += static_cast<char>(byte(rng));
    } else {
      s += fragments[pick(rng)];
    }
  }
  return s;
}

// Written independently of engine/io's validator, straight from Unicode's table 3-7.
bool valid_utf8(const std::string& s) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = at(i);
    size_t tail = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (b < 0x80) {
      tail = 0;
    } else if (b >= 0xC2 && b <= 0xDF) {
      tail = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      tail = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      tail = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    for (size_t k = 1; k <= tail; ++k) {
      if (i + k >= s.size()) return false;
      const unsigned char c = at(i + k);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += tail + 1;
  }
  return true;
}

std::string shown(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(TokenizerFuzz, RandomTextRoundTripsOrFailsCleanly) {
  ASSIGN_OK(auto t, parse(lossless_tokenizer()));
  std::mt19937 rng(20240611);
  size_t invalid = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string text = random_text(rng, /*allow_invalid=*/i % 2 == 1);
    const auto ids = t->encode(text);
    if (!valid_utf8(text)) {
      ++invalid;
      ASSERT_FALSE(ids.ok()) << shown(text);
      EXPECT_EQ(ids.error().kind(), ErrorKind::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(ids.ok()) << ids.error().message();
    ASSIGN_OK(std::string back, t->decode(ids.value()));
    ASSERT_EQ(back, text) << shown(text);
    // With special-token matching off the text round-trips too, and no special id comes out.
    ASSIGN_OK(auto split, t->encode(text, SpecialTokens::kSplit));
    for (uint32_t id : split) ASSERT_FALSE(t->is_special(id)) << shown(text);
    ASSIGN_OK(back, t->decode(split));
    ASSERT_EQ(back, text) << shown(text);
  }
  EXPECT_GT(invalid, 500u);  // both branches were exercised
}

TEST(TokenizerFuzz, DamagedJsonLoadsOrFailsCleanly) {
  const std::string good = lossless_tokenizer().dump();
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> where(0, good.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> op(0, 2);
  size_t loaded = 0;
  for (int i = 0; i < 600; ++i) {
    std::string bad = good;
    for (int k = 0; k < 1 + i % 4; ++k) {
      const size_t at = where(rng) % bad.size();
      switch (op(rng)) {
        case 0: bad[at] = static_cast<char>(byte(rng)); break;
        case 1: bad.erase(at, 1); break;
        default: bad.insert(at, 1, "{}[]\",:0-\\"[static_cast<size_t>(byte(rng)) % 11]); break;
      }
    }
    const auto r = Tokenizer::parse(bad, "damaged.json");
    if (!r.ok()) {
      EXPECT_EQ(r.error().message().rfind("damaged.json: ", 0), 0u) << r.error().message();
      continue;
    }
    ++loaded;
    for (const char* text : {"the <|x|> caf\u00e9  x", "", "\n\n"}) {
      const auto ids = r.value()->encode(text);
      if (ids.ok()) (void)r.value()->decode(ids.value());
    }
  }
  EXPECT_GT(loaded, 0u);
}

}  // namespace
}  // namespace tandem::io::tokenizer_test
