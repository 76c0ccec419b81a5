// GPT-2 byte-level alphabet and the ByteLevel decoder (tokenizer_byte_level_impl.h).
#include "engine/io/tokenizer_byte_level_impl.h"

#include <array>

#include "engine/io/tokenizer_utf8_impl.h"

namespace tandem::io::tok {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes take U+0100.. in byte order
// (GPT-2's bytes_to_unicode, as HF builds it in pre_tokenizers/byte_level.rs).
struct Tables {
  std::array<std::string, 256> char_of_byte;
  std::array<int16_t, 0x144> byte_of_char;  // every character of the alphabet is below U+0144

  Tables() {
    byte_of_char.fill(-1);
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      utf8_append(char_of_byte[b], c);
      byte_of_char[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view byte_level_char(uint8_t byte) { return tables().char_of_byte[byte]; }

std::string byte_level_map(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (const char ch : text) out += t.char_of_byte[static_cast<unsigned char>(ch)];
  return out;
}

std::optional<uint8_t> byte_level_byte(char32_t c) {
  const Tables& t = tables();
  if (c >= t.byte_of_char.size() || t.byte_of_char[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.byte_of_char[c]);
}

std::string byte_level_bytes(const std::vector<std::string_view>& tokens) {
  std::string bytes;
  std::string mapped;
  for (const std::string_view token : tokens) {
    // Token text comes from the vocabulary, which is valid UTF-8 (JSON strings are).
    mapped.clear();
    bool all_mapped = true;
    for (size_t pos = 0; pos < token.size();) {
      const auto b = byte_level_byte(utf8_decode_at(token, pos));
      if (!b) {
        all_mapped = false;
        break;
      }
      mapped.push_back(static_cast<char>(*b));
      pos += utf8_char_len(static_cast<unsigned char>(token[pos]));
    }
    if (all_mapped) {
      bytes += mapped;
    } else {
      bytes.append(token);
    }
  }
  return bytes;
}

std::string byte_level_decode(const std::vector<std::string_view>& tokens) {
  return utf8_lossy(byte_level_bytes(tokens));
}

}  // namespace tandem::io::tok
