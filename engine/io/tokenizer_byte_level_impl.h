// GPT-2's byte-level alphabet: every byte stands for one printable character (space is "Ġ", newline
// "Ċ"), so BPE runs on text that has no raw whitespace or control bytes. The ByteLevel decoder maps back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::io::tok {

// The UTF-8 text of the character that stands for `byte`.
std::string_view byte_level_char(uint8_t byte);

// `text` with every byte replaced by its character (the ByteLevel pre-tokenizer's transform).
std::string byte_level_map(std::string_view text);

// The byte a character stands for, if it is one of the 256.
std::optional<uint8_t> byte_level_byte(char32_t c);

// HF's ByteLevel decoder: each token whose characters are all in the alphabet becomes its bytes, any
// other token stays as it is (added tokens such as "  "), and the joined bytes are read as lossy UTF-8.
std::string byte_level_decode(const std::vector<std::string_view>& tokens);
// The same bytes before the UTF-8 repair (a character may span tokens; see Tokenizer::decode_bytes).
std::string byte_level_bytes(const std::vector<std::string_view>& tokens);

}  // namespace tandem::io::tok
