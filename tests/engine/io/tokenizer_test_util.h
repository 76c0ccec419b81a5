// Shared helpers of the tokenizer tests: tokenizer.json built in code, GPT-2's byte alphabet written out
// independently of engine/io, and an assert-and-assign macro for Result.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io/tokenizer.h"

namespace tandem::io::tokenizer_test {

using nlohmann::json;
using Ids = std::vector<uint32_t>;

#define ASSIGN_OK(decl, expr) ASSIGN_OK_IMPL(TANDEM_CONCAT(assign_ok_, __LINE__), decl, expr)
#define ASSIGN_OK_IMPL(tmp, decl, expr)                              \
  auto tmp = (expr);                                                 \
  ASSERT_TRUE(tmp.ok()) << tmp.error().message();                    \
  decl = std::move(tmp).value()

inline std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py), written out independently of engine/io.
inline const std::array<std::string, 256>& gpt2_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool kept = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(b)] = utf8(static_cast<char32_t>(kept ? b : 256 + n++));
    }
    return t;
  }();
  return table;
}

// A vocabulary of the 256 byte characters where each token's id is its byte: a byte-level tokenizer
// without merges then encodes any text to its own bytes.
inline json byte_vocab() {
  json v = json::object();
  for (int b = 0; b < 256; ++b) v[gpt2_chars()[static_cast<size_t>(b)]] = b;
  return v;
}

inline json byte_level(bool add_prefix_space = false, bool use_regex = true) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true},
          {"use_regex", use_regex}};
}

inline json tokenizer_json(json vocab, json merges, json pre_tokenizer, json normalizer = nullptr,
                    json added = json::array(), json decoder = {{"type", "ByteLevel"}}) {
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", std::move(added)},
          {"normalizer", std::move(normalizer)},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"post_processor", nullptr},
          {"decoder", std::move(decoder)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", std::move(vocab)},
            {"merges", std::move(merges)}}}};
}

inline Result<std::unique_ptr<Tokenizer>> parse(const json& j) { return Tokenizer::parse(j.dump(), "test.json"); }

inline Ids bytes_of(std::string_view s) {
  Ids ids;
  for (const char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

inline json added_token(std::string content, bool special, bool normalized, bool lstrip = false,
                        bool rstrip = false, bool single_word = false) {
  return {{"content", std::move(content)}, {"special", special}, {"normalized", normalized},
          {"lstrip", lstrip}, {"rstrip", rstrip}, {"single_word", single_word}};
}

}  // namespace tandem::io::tokenizer_test
