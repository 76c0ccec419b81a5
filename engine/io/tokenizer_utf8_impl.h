// UTF-8 for the tokenizer: strict validation (Rust `str` rules: no overlongs, surrogates or code points
// past U+10FFFF), code point reads on validated text, and Rust's `String::from_utf8_lossy`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tandem::io::tok {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Byte offset of the first ill-formed sequence in `text`, or kUtf8Valid.
size_t utf8_first_invalid(std::string_view text);

// Bytes in the character whose lead byte is `lead`, for text already validated.
inline size_t utf8_char_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The code point at `pos` / ending at `end` of validated text.
char32_t utf8_decode_at(std::string_view text, size_t pos);
char32_t utf8_decode_before(std::string_view text, size_t end);

void utf8_append(std::string& out, char32_t code_point);

// `bytes` as text, each maximal ill-formed subpart replaced by U+FFFD, exactly as Rust's
// String::from_utf8_lossy does it (which is what HF's ByteLevel decoder returns).
std::string utf8_lossy(std::string_view bytes);

}  // namespace tandem::io::tok
