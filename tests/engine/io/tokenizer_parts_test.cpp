// Tokenizer internals checked in isolation: GPT-2's byte alphabet, the GPT-2 and Qwen pre-tokenizer
// regexes, HF's five split behaviors, and the regex layer's Oniguruma semantics (empty matches, \\s).
#include <gtest/gtest.h>

#include "engine/io/tokenizer_pretokenizer_impl.h"
#include "engine/io/tokenizer_regex_impl.h"
#include "tests/engine/io/tokenizer_test_util.h"

namespace tandem::io::tokenizer_test {
namespace {

// --- byte-level alphabet ------------------------------------------------------------------------

TEST(TokenizerByteLevel, AlphabetMatchesGpt2) {
  // Characters every GPT-2 vocabulary shows: space Ġ, tab ĉ, newline Ċ, CR č, soft hyphen Ń.
  const auto& chars = gpt2_chars();
  EXPECT_EQ(chars[0x00], "\u0100");
  EXPECT_EQ(chars[0x09], "\u0109");
  EXPECT_EQ(chars[0x0A], "\u010A");
  EXPECT_EQ(chars[0x0D], "\u010D");
  EXPECT_EQ(chars[0x20], "\u0120");
  EXPECT_EQ(chars[0x7F], "\u0121");
  EXPECT_EQ(chars[0xA0], "\u0142");
  EXPECT_EQ(chars[0xAD], "\u0143");
  EXPECT_EQ(chars['!'], "!");
  EXPECT_EQ(chars[0xE9], "\u00E9");

  ASSIGN_OK(auto t, parse(tokenizer_json(byte_vocab(), json::array(), byte_level())));
  const std::string text = "h\u00e9llo \u65e5\u672c\n\t\r\x7f\u00ad \xf0\x9f\x98\x80";
  ASSIGN_OK(Ids ids, t->encode(text));
  EXPECT_EQ(ids, bytes_of(text));
  EXPECT_EQ(t->token_id("\u0120"), 0x20u);
  ASSIGN_OK(std::string back, t->decode(ids));
  EXPECT_EQ(back, text);
}

// --- pre-tokenizer ------------------------------------------------------------------------------

std::vector<std::string> pre_tokenize(const tok::PreTokenizer& p, std::string text) {
  std::vector<std::string> pieces{std::move(text)};
  const Status s = p.run(pieces);
  EXPECT_TRUE(s.ok()) << s.error().message();
  return pieces;
}

TEST(TokenizerPreTokenizer, Gpt2RegexSplitsContractionsNumbersAndWhitespace) {
  tok::PreTokenizer p;
  ASSERT_TRUE(p.add_byte_level(false, true).ok());
  const std::string sp = "\u0120";
  const std::string nl = "\u010A";
  EXPECT_EQ(pre_tokenize(p, "don't stop 1234 a   b\n\n"),
            (std::vector<std::string>{"don", "'t", sp + "stop", sp + "1234", sp + "a", sp + sp, sp + "b", nl + nl}));
  // Only a space may lead a word, so a line break before a letter is a piece of its own.
  EXPECT_EQ(pre_tokenize(p, "x\n\ny"), (std::vector<std::string>{"x", nl, nl, "y"}));
}

TEST(TokenizerPreTokenizer, QwenRegexSplitsDigitsAndLineBreaks) {
  tok::PreTokenizer p;
  constexpr std::string_view kQwenPattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
      R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
  ASSIGN_OK(tok::Regex qwen, tok::Regex::compile(kQwenPattern));
  p.add_split(qwen, tok::SplitBehavior::kIsolated, false);
  EXPECT_EQ(pre_tokenize(p, "Hello123 world's\r\n\n  x IT'S"),
            (std::vector<std::string>{"Hello", "1", "2", "3", " world", "'s", "\r\n\n", " ", " x", " IT", "'S"}));
  ASSERT_TRUE(p.add_byte_level(false, false).ok());
  EXPECT_EQ(pre_tokenize(p, "a\r\n b"), (std::vector<std::string>{"a", "\u010D\u010A", "\u0120b"}));
}

std::vector<std::string> split(std::string_view text, tok::SplitBehavior behavior, bool invert) {
  const auto regex = tok::Regex::literal("-");
  EXPECT_TRUE(regex.ok()) << regex.error().message();
  const auto spans = tok::split_spans(regex.value(), text, behavior, invert);
  EXPECT_TRUE(spans.ok());
  std::vector<std::string> out;
  for (const tok::Span& s : spans.value()) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(TokenizerPreTokenizer, SplitBehaviors) {
  using V = std::vector<std::string>;
  using B = tok::SplitBehavior;
  EXPECT_EQ(split("a-b--c", B::kIsolated, false), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("a-b--c", B::kRemoved, false), (V{"a", "b", "c"}));
  EXPECT_EQ(split("a-b--c", B::kMergedWithPrevious, false), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("a-b--c", B::kMergedWithNext, false), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(split("a-b--c", B::kContiguous, false), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(split("a-b--c", B::kRemoved, true), (V{"-", "-", "-"}));
  EXPECT_EQ(split("-a", B::kMergedWithNext, false), (V{"-a"}));
  EXPECT_EQ(split("", B::kIsolated, false), (V{""}));

  // The same through tokenizer.json: "--" only stays one piece when Contiguous.
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"-", 3}, {"--", 4}};
  json pre = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Contiguous"}, {"invert", false}};
  ASSIGN_OK(auto contiguous, parse(tokenizer_json(vocab, {"- -"}, pre)));
  ASSIGN_OK(Ids ids, contiguous->encode("a-b--c"));
  EXPECT_EQ(ids, (Ids{0, 3, 1, 4, 2}));
  pre["behavior"] = "Isolated";
  ASSIGN_OK(auto isolated, parse(tokenizer_json(vocab, {"- -"}, pre)));
  ASSIGN_OK(ids, isolated->encode("a-b--c"));
  EXPECT_EQ(ids, (Ids{0, 3, 1, 3, 3, 2}));
}

// --- regex ----------------------------------------------------------------------------------------

std::vector<std::pair<size_t, size_t>> find_all(std::string_view pattern, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  const auto re = tok::Regex::compile(pattern);
  EXPECT_TRUE(re.ok()) << (re.ok() ? "" : re.error().message());
  if (!re.ok()) return out;
  std::vector<tok::Span> spans;
  EXPECT_TRUE(re.value().find_all(text, spans).ok());
  for (const auto& s : spans) out.emplace_back(s.begin, s.end);
  return out;
}

TEST(TokenizerRegex, EmptyMatchesStepLikeOniguruma) {
  using P = std::vector<std::pair<size_t, size_t>>;
  // The onig crate's own find_iter tests.
  EXPECT_EQ(find_all(R"(\d+)", "a12b2"), (P{{1, 3}, {4, 5}}));
  EXPECT_EQ(find_all(R"(\d*)", "a1b2"), (P{{0, 0}, {1, 2}, {3, 4}}));
  EXPECT_EQ(find_all(R"(\d*)", "a1bbb2"), (P{{0, 0}, {1, 2}, {3, 3}, {4, 4}, {5, 6}}));
}

TEST(TokenizerRegex, WhiteSpaceIsUnicodeWhiteSpace) {
  using P = std::vector<std::pair<size_t, size_t>>;
  // U+0085 and U+3000 are White_Space; U+180E is not (PCRE2's own \s would take it).
  const std::string text = "a\u180Eb\u0085c\u3000d";
  EXPECT_EQ(find_all(R"(\s+)", text), (P{{5, 7}, {8, 11}}));
  EXPECT_EQ(find_all(R"([^\s]+)", text), (P{{0, 5}, {7, 8}, {11, 12}}));
  EXPECT_EQ(find_all(R"(\S+)", text), (P{{0, 5}, {7, 8}, {11, 12}}));
  EXPECT_EQ(find_all(R"(\\s)", "a\\sb"), (P{{1, 3}}));  // an escaped backslash, then a literal s
  EXPECT_EQ(find_all(R"([\]\s]+)", "a] \u3000b"), (P{{1, 6}}));
  EXPECT_TRUE(tok::is_word_char(U'\u00e9'));
  EXPECT_TRUE(tok::is_word_char(U'_'));
  EXPECT_TRUE(tok::is_word_char(U'\u0663'));  // Arabic-Indic digit three (Nd)
  EXPECT_TRUE(tok::is_word_char(U'\u200D'));  // zero width joiner (Join_Control)
  EXPECT_FALSE(tok::is_word_char(U'\u2460'));  // circled digit one (No)
  EXPECT_FALSE(tok::is_word_char(U'-'));
  EXPECT_TRUE(tok::is_white_space(U'\u00a0'));
  EXPECT_FALSE(tok::is_white_space(U'\u200b'));
}

}  // namespace
}  // namespace tandem::io::tokenizer_test
