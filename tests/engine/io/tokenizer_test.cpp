// Tokenizer tests through the public API: small tokenizer.json files built here and checked by hand
// (merge order, byte-level merges, added tokens, NFC, errors, long inputs, threads), and the HF
// `tokenizers` goldens from tools/make_tokenizer_fixture.py, which must match id for id.
#include "engine/io/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/engine/io/tokenizer_test_util.h"

namespace tandem::io::tokenizer_test {
namespace {

// --- model: merges -------------------------------------------------------------------------------

TEST(TokenizerBpe, MergeOrderDecidesTheSplit) {
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  // "b c" ranks first: a + bc, and nothing merges a with bc.
  ASSIGN_OK(auto bc_first, parse(tokenizer_json(vocab, {"b c", "a b"}, nullptr)));
  ASSIGN_OK(Ids ids, bc_first->encode("abc"));
  EXPECT_EQ(ids, (Ids{0, 4}));
  // "a b" ranks first: ab + c.
  ASSIGN_OK(auto ab_first, parse(tokenizer_json(vocab, {"a b", "b c"}, nullptr)));
  ASSIGN_OK(ids, ab_first->encode("abc"));
  EXPECT_EQ(ids, (Ids{3, 2}));
  // A chain of merges, given as [left, right] pairs.
  const json pairs = json::array({json::array({"a", "b"}), json::array({"ab", "c"})});
  ASSIGN_OK(auto chain, parse(tokenizer_json(vocab, pairs, nullptr)));
  ASSIGN_OK(ids, chain->encode("abc"));
  EXPECT_EQ(ids, (Ids{5}));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  const json vocab = {{"a", 0}, {"aa", 1}, {"aaaa", 2}};
  ASSIGN_OK(auto t, parse(tokenizer_json(vocab, {"a a"}, nullptr)));
  ASSIGN_OK(Ids ids, t->encode("aaa"));
  EXPECT_EQ(ids, (Ids{1, 0}));
  ASSIGN_OK(ids, t->encode("aaaaa"));
  EXPECT_EQ(ids, (Ids{1, 1, 0}));
  // "aaaaa": a a|a a|a, then the two "aa" join: aaaa + a.
  ASSIGN_OK(auto t2, parse(tokenizer_json(vocab, {"a a", "aa aa"}, nullptr)));
  ASSIGN_OK(ids, t2->encode("aaaaa"));
  EXPECT_EQ(ids, (Ids{2, 0}));
}

TEST(TokenizerBpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json j = tokenizer_json({{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}}, {"a b"}, nullptr);
  ASSIGN_OK(auto merging, parse(j));
  ASSIGN_OK(Ids ids, merging->encode("abc"));
  EXPECT_EQ(ids, (Ids{3, 2}));  // no merge reaches "abc"
  j["model"]["ignore_merges"] = true;
  ASSIGN_OK(auto ignoring, parse(j));
  ASSIGN_OK(ids, ignoring->encode("abc"));
  EXPECT_EQ(ids, (Ids{4}));
}

TEST(TokenizerBpe, UnknownCharactersUseUnkToken) {
  json j = tokenizer_json({{"<unk>", 0}, {"a", 1}}, json::array(), nullptr);
  ASSIGN_OK(auto dropping, parse(j));  // no unk_token: HF drops what it cannot spell
  ASSIGN_OK(Ids ids, dropping->encode("axya"));
  EXPECT_EQ(ids, (Ids{1, 1}));
  j["model"]["unk_token"] = "<unk>";
  ASSIGN_OK(auto unk, parse(j));
  ASSIGN_OK(ids, unk->encode("axya"));
  EXPECT_EQ(ids, (Ids{1, 0, 0, 1}));
  j["model"]["fuse_unk"] = true;
  ASSIGN_OK(auto fused, parse(j));
  ASSIGN_OK(ids, fused->encode("axya"));
  EXPECT_EQ(ids, (Ids{1, 0, 1}));
  j["model"]["unk_token"] = "<missing>";
  ASSIGN_OK(auto missing, parse(j));
  const auto r = missing->encode("ax");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("unk_token \"<missing>\" is not in the vocabulary"), std::string::npos);
}

// --- byte-level alphabet ------------------------------------------------------------------------

// --- byte-level encoding ------------------------------------------------------------------------

TEST(TokenizerByteLevel, MergesRunOnMappedCharacters) {
  json vocab = byte_vocab();
  vocab["\u00c3\u00a9"] = 256;  // "é" is bytes C3 A9, characters Ã ©
  vocab["\u0120w"] = 257;
  vocab["\u0120wo"] = 258;
  ASSIGN_OK(auto t, parse(tokenizer_json(vocab, {"\u00c3 \u00a9", "\u0120 w", "\u0120w o"}, byte_level())));
  ASSIGN_OK(Ids ids, t->encode("\u00e9 wo"));
  EXPECT_EQ(ids, (Ids{256, 258}));
  // 日 is E6 97 A5: æ, Ĺ (0x97 is not printable) and ¥.
  ASSIGN_OK(ids, t->encode("\u65e5"));
  EXPECT_EQ(ids, (Ids{*t->token_id("\u00e6"), *t->token_id("\u0139"), *t->token_id("\u00a5")}));
  ASSIGN_OK(std::string text, t->decode({256, 258}));
  EXPECT_EQ(text, "\u00e9 wo");
}

TEST(TokenizerByteLevel, PrefixSpaceIsAddedToEachPiece) {
  json added = json::array({added_token("<s>", true, false)});
  ASSIGN_OK(auto t, parse(tokenizer_json(byte_vocab(), json::array(), byte_level(true), nullptr, added)));
  ASSIGN_OK(Ids ids, t->encode("hi"));
  EXPECT_EQ(ids, bytes_of(" hi"));
  ASSIGN_OK(ids, t->encode(" hi"));
  EXPECT_EQ(ids, bytes_of(" hi"));
  ASSIGN_OK(ids, t->encode("<s>hi"));
  EXPECT_EQ(ids, (Ids{256, 0x20, 'h', 'i'}));
}

// --- added tokens ---------------------------------------------------------------------------------

json added_vocab_tokenizer() {
  const json added = json::array({
      added_token("<|x|>", true, false),                      // 256
      added_token("[MASK]", true, false, /*lstrip=*/true),    // 257
      added_token("[R]", true, false, false, /*rstrip=*/true),  // 258
      added_token("<m>", false, false, false, false, /*single_word=*/true),  // 259
      added_token("ab", false, false),                        // 260
      added_token("abc", false, false),                       // 261
      added_token("caf\u00e9", false, true),                  // 262, matched after NFC
      added_token("ni\u00f1o", false, false),                 // 263, matched before NFC
      added_token("  ", false, true),                         // 264, GPT-NeoX style space run
  });
  return tokenizer_json(byte_vocab(), json::array(), byte_level(), {{"type", "NFC"}}, added);
}

TEST(TokenizerAdded, TokensSplitTheTextLongestFirst) {
  json j = added_vocab_tokenizer();
  j["normalizer"] = nullptr;
  ASSIGN_OK(auto t, parse(j));
  EXPECT_EQ(t->vocab_size(), 265u);
  EXPECT_EQ(t->token_id("<|x|>"), 256u);
  EXPECT_EQ(t->token_id("a"), uint32_t{'a'});
  EXPECT_EQ(t->token_id("nope"), std::nullopt);
  ASSIGN_OK(Ids ids, t->encode("a<|x|>b"));
  EXPECT_EQ(ids, (Ids{'a', 256, 'b'}));
  ASSIGN_OK(ids, t->encode("<|x|><|x|>"));
  EXPECT_EQ(ids, (Ids{256, 256}));
  ASSIGN_OK(ids, t->encode("abcd abd"));
  EXPECT_EQ(ids, (Ids{261, 'd', ' ', 260, 'd'}));
}

TEST(TokenizerAdded, StripAndSingleWordFlags) {
  json j = added_vocab_tokenizer();
  j["normalizer"] = nullptr;
  ASSIGN_OK(auto t, parse(j));
  ASSIGN_OK(Ids ids, t->encode("q \t[MASK]"));  // lstrip takes the whitespace before
  EXPECT_EQ(ids, (Ids{'q', 257}));
  ASSIGN_OK(ids, t->encode("[R] \nq"));  // rstrip takes the whitespace after
  EXPECT_EQ(ids, (Ids{258, 'q'}));
  ASSIGN_OK(ids, t->encode("z <m> z"));
  EXPECT_EQ(ids, (Ids{'z', ' ', 259, ' ', 'z'}));
  ASSIGN_OK(ids, t->encode("<m>"));
  EXPECT_EQ(ids, (Ids{259}));
  ASSIGN_OK(ids, t->encode("z<m> z"));  // not a single word: spelled out
  EXPECT_EQ(ids, bytes_of("z<m> z"));
  ASSIGN_OK(ids, t->encode("\u00e9<m>"));  // é is a word character too
  EXPECT_EQ(ids, bytes_of("\u00e9<m>"));
}

// HF's split_special_tokens=True (Rust encode_special_tokens): a special token's literal is plain text,
// its flags (lstrip) do nothing, non-special added tokens still match, and the skipped match is not
// searched again for a shorter token inside it (aho-corasick's non-overlapping matches go on after it).
TEST(TokenizerAdded, SplitSpecialTokensLeavesSpecialLiteralsAsText) {
  json j = added_vocab_tokenizer();
  j["normalizer"] = nullptr;
  ASSIGN_OK(auto t, parse(j));
  ASSIGN_OK(Ids ids, t->encode("a<|x|>b", SpecialTokens::kSplit));
  EXPECT_EQ(ids, bytes_of("a<|x|>b"));
  ASSIGN_OK(ids, t->encode("q \t[MASK]", SpecialTokens::kSplit));
  EXPECT_EQ(ids, bytes_of("q \t[MASK]"));
  ASSIGN_OK(ids, t->encode("[R] \nq", SpecialTokens::kSplit));
  EXPECT_EQ(ids, bytes_of("[R] \nq"));
  ASSIGN_OK(ids, t->encode("abcd <m>", SpecialTokens::kSplit));  // non-special: still tokens
  EXPECT_EQ(ids, (Ids{261, 'd', ' ', 259}));
  ASSIGN_OK(ids, t->encode("a<|x|>b"));  // the default is unchanged
  EXPECT_EQ(ids, (Ids{'a', 256, 'b'}));
  EXPECT_TRUE(t->is_special(256));
  EXPECT_TRUE(t->is_special(258));
  EXPECT_FALSE(t->is_special(259));
  EXPECT_FALSE(t->is_special('a'));

  json inner = tokenizer_json(byte_vocab(), json::array(), byte_level(), nullptr,
                              json::array({added_token("[ab]", true, false), added_token("ab", false, false)}));
  ASSIGN_OK(auto nested, parse(inner));
  const uint32_t ab = *nested->token_id("ab");
  ASSIGN_OK(ids, nested->encode("[ab] ab", SpecialTokens::kSplit));
  Ids want = bytes_of("[ab] ");
  want.push_back(ab);
  EXPECT_EQ(ids, want);
  ASSIGN_OK(ids, nested->encode("[ab] ab"));
  EXPECT_EQ(ids, (Ids{*nested->token_id("[ab]"), ' ', ab}));
}

TEST(TokenizerAdded, NormalizedTokensMatchAfterNormalization) {
#if TANDEM_HAVE_ICU
  ASSIGN_OK(auto t, parse(added_vocab_tokenizer()));
  // café with a combining accent matches the normalized=true token once NFC composes it.
  ASSIGN_OK(Ids ids, t->encode("x cafe\u0301 y"));
  EXPECT_EQ(ids, (Ids{'x', ' ', 262, ' ', 'y'}));
  // niño is normalized=false: only the composed spelling in the raw text matches it.
  ASSIGN_OK(ids, t->encode("ni\u00f1o"));
  EXPECT_EQ(ids, (Ids{263}));
  ASSIGN_OK(ids, t->encode("nin\u0303o"));
  EXPECT_EQ(ids, bytes_of("ni\u00f1o"));
  // A normalized space-run token is matched before the pre-tokenizer sees the spaces.
  ASSIGN_OK(ids, t->encode("a   b"));
  EXPECT_EQ(ids, (Ids{'a', 264, ' ', 'b'}));
#else
  GTEST_SKIP() << "this build has no ICU, so no NFC";
#endif
}

// --- normalizer -----------------------------------------------------------------------------------

TEST(TokenizerNormalizer, NfcComposesBeforeBpe) {
  json j = tokenizer_json(byte_vocab(), json::array(), byte_level(), {{"type", "NFC"}});
#if TANDEM_HAVE_ICU
  ASSIGN_OK(auto t, parse(j));
  ASSIGN_OK(Ids composed, t->encode("\u00c5ngstr\u00f6m"));
  EXPECT_EQ(composed, bytes_of("\u00c5ngstr\u00f6m"));
  ASSIGN_OK(Ids decomposed, t->encode("A\u030angstro\u0308m"));
  EXPECT_EQ(decomposed, composed);
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  ASSIGN_OK(auto seq, parse(j));
  ASSIGN_OK(decomposed, seq->encode("A\u030angstro\u0308m"));
  EXPECT_EQ(decomposed, composed);
  j["normalizer"] = nullptr;
  ASSIGN_OK(auto none, parse(j));
  ASSIGN_OK(decomposed, none->encode("A\u030angstro\u0308m"));
  EXPECT_EQ(decomposed, bytes_of("A\u030angstro\u0308m"));
#else
  const auto r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(r.error().message().find("key \"normalizer\""), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("no Unicode normalization"), std::string::npos) << r.error().message();
#endif
}

// --- input and output errors ------------------------------------------------------------------------

TEST(TokenizerErrors, InvalidUtf8NamesTheByteOffset) {
  ASSIGN_OK(auto t, parse(tokenizer_json(byte_vocab(), json::array(), byte_level())));
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"ab\xff", 2},           // never valid
      {"\xc0\xaf", 0},         // overlong
      {"x\xed\xa0\x80", 1},    // surrogate
      {"\xe6\x97", 0},         // truncated at the end
      {"ok\xf4\x90\x80\x80", 2},  // past U+10FFFF
      {"a\x80", 1},            // lone continuation byte
  };
  for (const auto& [text, offset] : cases) {
    const auto r = t->encode(text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(r.error().message().find(fmt::format("byte offset {}", offset)), std::string::npos)
        << r.error().message();
  }
  ASSIGN_OK(Ids ids, t->encode("\xf0\x9f\x98\x80"));
  EXPECT_EQ(ids.size(), 4u);
  ASSIGN_OK(ids, t->encode(""));
  EXPECT_TRUE(ids.empty());
}

TEST(TokenizerErrors, DecodeIsLossyButRejectsUnknownIds) {
  json j = added_vocab_tokenizer();
  j["normalizer"] = nullptr;
  ASSIGN_OK(auto t, parse(j));
  ASSIGN_OK(std::string text, t->decode({'a', 257, 'b', 264, 256}));
  EXPECT_EQ(text, "a[MASK]b  <|x|>");  // "  " has characters outside the alphabet: kept as is
  ASSIGN_OK(text, t->decode({0xE6, 0x97}));  // half of 日
  EXPECT_EQ(text, "\uFFFD");
  ASSIGN_OK(text, t->decode({'a', 0x80, 'b', 0xFF}));
  EXPECT_EQ(text, "a\uFFFDb\uFFFD");
  ASSIGN_OK(text, t->decode({}));
  EXPECT_EQ(text, "");
  const auto r = t->decode({'a', 265});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("ids[1] = 265 is outside the vocabulary"), std::string::npos)
      << r.error().message();

  ASSIGN_OK(auto plain, parse(tokenizer_json({{"a", 0}, {"b", 1}}, json::array(), nullptr, nullptr,
                                             json::array(), nullptr)));
  ASSIGN_OK(text, plain->decode({0, 1, 0}));
  EXPECT_EQ(text, "a b a");  // no decoder: HF joins with spaces
}

TEST(TokenizerErrors, UnsupportedOrMalformedPartsNameTheirJsonPath) {
  struct Case {
    std::string what;
    json patch;  // merged into a valid tokenizer.json
    std::string expected;
  };
  const json split_bad = {{"type", "Sequence"},
                          {"pretokenizers",
                           json::array({{{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Bogus"}}})}};
  const std::vector<Case> cases = {
      {"model type", {{"model", {{"type", "WordPiece"}}}}, R"(key "model.type": "WordPiece" is not supported)"},
      {"normalizer", {{"normalizer", {{"type", "NFKC"}}}}, R"(key "normalizer.type": "NFKC" is not supported)"},
      {"normalizer member",
       {{"normalizer",
         {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Lowercase"}}})}}}},
       R"(key "normalizer.normalizers[1].type": "Lowercase" is not supported)"},
      {"pre-tokenizer", {{"pre_tokenizer", {{"type", "Whitespace"}}}},
       R"(key "pre_tokenizer.type": "Whitespace" is not supported)"},
      {"behavior", {{"pre_tokenizer", split_bad}},
       R"(key "pre_tokenizer.pretokenizers[0].behavior": "Bogus" is not one of)"},
      {"regex",
       {{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}}}},
       R"(key "pre_tokenizer.pattern.Regex": cannot compile regex "(a")"},
      {"decoder", {{"decoder", {{"type", "WordPiece"}}}}, R"(key "decoder.type": "WordPiece" is not supported)"},
      {"byte fallback", {{"model", {{"byte_fallback", true}}}}, R"(key "model.byte_fallback")"},
      {"dropout", {{"model", {{"dropout", 0.1}}}}, R"(key "model.dropout": BPE dropout is not supported)"},
      {"prefix", {{"model", {{"continuing_subword_prefix", "##"}}}}, R"(key "model.continuing_subword_prefix")"},
      {"merge", {{"model", {{"merges", {"a zz"}}}}}, R"(merges[0]: "a" + "zz": "zz" is not in the vocabulary)"},
      {"merge form", {{"model", {{"merges", {"a b c"}}}}}, R"(key "model.merges[0]": expected "left right")"},
      {"vocab id", {{"model", {{"vocab", {{"a", -1}}}}}}, R"(key "model.vocab.a": expected an integer)"},
      {"added token", {{"added_tokens", json::array({{{"special", true}}})}},
       R"(key "added_tokens[0].content": missing)"},
  };
  const json base = tokenizer_json({{"a", 0}, {"b", 1}}, json::array(), nullptr, nullptr, json::array(), nullptr);
  for (const Case& c : cases) {
    json j = base;
    j.merge_patch(c.patch);
    const auto r = parse(j);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_NE(r.error().message().find(c.expected), std::string::npos) << c.what << ": " << r.error().message();
    EXPECT_EQ(r.error().message().rfind("test.json: ", 0), 0u) << c.what << ": " << r.error().message();
  }
  json no_model = base;
  no_model.erase("model");
  auto r = parse(no_model);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find(R"(key "model": missing)"), std::string::npos) << r.error().message();
  r = Tokenizer::parse("{\"model\": ", "broken.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("broken.json: invalid JSON"), std::string::npos) << r.error().message();
  r = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kNotFound);
}

// --- long inputs ----------------------------------------------------------------------------------

TEST(TokenizerLongInputs, LongRunsSplitAndMergeWithoutLimits) {
  // 200k spaces before a letter: `\s+(?!\S)` takes all but the last space, then " x".
  ASSIGN_OK(auto t, parse(tokenizer_json(byte_vocab(), json::array(), byte_level())));
  const std::string spaces = std::string(200000, ' ') + "x";
  ASSIGN_OK(Ids ids, t->encode(spaces));
  EXPECT_EQ(ids, bytes_of(spaces));
  // One word of 200001 letters through the merge loop: "a a" pairs it up from the left.
  json vocab = byte_vocab();
  vocab["aa"] = 256;
  ASSIGN_OK(auto merging, parse(tokenizer_json(vocab, {"a a"}, byte_level())));
  ASSIGN_OK(ids, merging->encode(std::string(200001, 'a')));
  Ids pairs(100000, 256);
  pairs.push_back('a');
  EXPECT_EQ(ids, pairs);
  // Qwen's `\s*[\r\n]+` backtracks across a long run of spaces to its line break.
  const json qwen = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", R"(\s*[\r\n]+|\s+(?!\S)|\s+|\S+)"}}},
                     {"behavior", "Isolated"}},
                    byte_level(false, false)})}};
  ASSIGN_OK(auto q, parse(tokenizer_json(byte_vocab(), json::array(), qwen)));
  const std::string lines = std::string(100000, ' ') + "\n" + std::string(100000, '\t') + "y";
  ASSIGN_OK(ids, q->encode(lines));
  EXPECT_EQ(ids, bytes_of(lines));
}

// --- concurrency ----------------------------------------------------------------------------------

TEST(TokenizerThreads, ConcurrentEncodesAgreeWithSequentialOnes) {
  json vocab = byte_vocab();
  vocab["\u0120t"] = 256;
  vocab["\u0120th"] = 257;
  vocab["\u0120the"] = 258;
  vocab["er"] = 259;
  ASSIGN_OK(auto t, parse(tokenizer_json(vocab, {"\u0120 t", "\u0120t h", "\u0120th e", "e r"}, byte_level())));
  std::vector<std::string> texts;
  const std::vector<std::string> words = {"the", "other", "there", "\u00e9t\u00e9", "\u65e5\u672c", "  ", "42"};
  for (size_t i = 0; i < 300; ++i) {
    std::string s;
    for (size_t k = 0; k < 1 + i % 9; ++k) s += " " + words[(i * 7 + k * 3) % words.size()];
    texts.push_back(s);
  }
  std::vector<Ids> expected;
  for (const auto& s : texts) {
    ASSIGN_OK(Ids ids, t->encode(s));
    expected.push_back(ids);
  }
  ASSIGN_OK(Ids the_other, t->encode(" the other"));
  EXPECT_EQ(the_other, (Ids{258, ' ', 'o', 't', 'h', 259}));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < mismatches.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const auto r = t->encode(texts[(i + w * 37) % texts.size()]);
          if (!r.ok() || r.value() != expected[(i + w * 37) % texts.size()]) ++mismatches[w];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>(4, 0)));
}

// --- HF goldens -----------------------------------------------------------------------------------

std::string fixture(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + rel;
}

TEST(TokenizerGoldens, MatchHuggingFaceTokenizers) {
  std::ifstream in(fixture("goldens.json"));
  ASSERT_TRUE(in.good()) << "missing " << fixture("goldens.json")
                         << ": run tools/make_tokenizer_fixture.py on the GPU machine (it needs HF tokenizers)";
  std::stringstream buffer;
  buffer << in.rdbuf();
  const json goldens = json::parse(buffer.str());
  for (const std::string name : {"modernbert", "qwen"}) {
    ASSERT_TRUE(goldens.contains(name)) << name;
#if !TANDEM_HAVE_ICU
    // Both fixture tokenizers ask for NFC, which this build refuses by design.
    const auto refused = Tokenizer::load(fixture(name + "/tokenizer.json"));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("no Unicode normalization"), std::string::npos);
    GTEST_SKIP() << "this build has no ICU, so it cannot load the NFC fixture tokenizers";
#endif
    ASSIGN_OK(auto t, Tokenizer::load(fixture(name + "/tokenizer.json")));
    size_t checked = 0;
    for (const json& g : goldens[name]) {
      const auto text = g["text"].get<std::string>();
      const auto ids = g["ids"].get<Ids>();
      ASSIGN_OK(Ids got, t->encode(text));
      EXPECT_EQ(got, ids) << name << ": " << json(text).dump();
      ASSIGN_OK(std::string decoded, t->decode(ids));
      EXPECT_EQ(decoded, g["decoded"].get<std::string>()) << name << ": " << json(text).dump();
      ++checked;
    }
    EXPECT_GT(checked, 100u) << name;
  }
}

// The same tokenizers with special-token matching off (HF's split_special_tokens=True), over the
// golden strings and texts full of special-token literals. The section comes from
// tools/make_tokenizer_fixture.py; a goldens.json without it is a failure, not a skip.
TEST(TokenizerGoldens, SplitSpecialTokensMatchHuggingFaceTokenizers) {
  std::ifstream in(fixture("goldens.json"));
  ASSERT_TRUE(in.good()) << "missing " << fixture("goldens.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const json goldens = json::parse(buffer.str());
  ASSERT_TRUE(goldens.contains("split_special"))
      << fixture("goldens.json") << " has no \"split_special\" section: regenerate it on the GPU machine with "
      << "`python3 tools/make_tokenizer_fixture.py --goldens-only` (it needs HF tokenizers)";
  for (const std::string name : {"modernbert", "qwen"}) {
    ASSERT_TRUE(goldens["split_special"].contains(name)) << name;
#if !TANDEM_HAVE_ICU
    GTEST_SKIP() << "this build has no ICU, so it cannot load the NFC fixture tokenizers";
#endif
    ASSIGN_OK(auto t, Tokenizer::load(fixture(name + "/tokenizer.json")));
    size_t checked = 0;
    size_t with_literals = 0;
    for (const json& g : goldens["split_special"][name]) {
      const auto text = g["text"].get<std::string>();
      ASSIGN_OK(Ids got, t->encode(text, SpecialTokens::kSplit));
      EXPECT_EQ(got, g["ids"].get<Ids>()) << name << ": " << json(text).dump();
      ASSIGN_OK(Ids matched, t->encode(text));
      if (matched != got) ++with_literals;
      ++checked;
    }
    EXPECT_GT(checked, 100u) << name;
    EXPECT_GT(with_literals, 5u) << name << ": the section should hold texts with special-token literals";
  }
}

}  // namespace
}  // namespace tandem::io::tokenizer_test
