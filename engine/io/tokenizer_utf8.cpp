// UTF-8 validation, decoding and lossy conversion for the tokenizer (tokenizer_utf8_impl.h).
#include "engine/io/tokenizer_utf8_impl.h"

#include <cstdint>

namespace tandem::io::tok {
namespace {

// Length of the sequence at `pos` when it is well formed (ok = true); otherwise the length of its
// maximal ill-formed subpart, at least 1 (ok = false). The ranges are Unicode's table 3-7.
size_t sequence_at(std::string_view s, size_t pos, bool& ok) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  ok = true;
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    ok = false;
    return 1;
  }
  for (size_t k = 1; k <= need; ++k) {
    const size_t i = pos + k;
    const unsigned char first_lo = k == 1 ? lo : 0x80;
    const unsigned char first_hi = k == 1 ? hi : 0xBF;
    if (i >= s.size() || byte(i) < first_lo || byte(i) > first_hi) {
      ok = false;
      return k;
    }
  }
  return need + 1;
}

}  // namespace

size_t utf8_first_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII runs are the common case.
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool ok = false;
    const size_t n = sequence_at(text, pos, ok);
    if (!ok) return pos;
    pos += n;
  }
  return kUtf8Valid;
}

char32_t utf8_decode_at(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[i])); };
  const char32_t b0 = byte(pos);
  switch (utf8_char_len(static_cast<unsigned char>(b0))) {
    case 1:
      return b0;
    case 2:
      return ((b0 & 0x1F) << 6) | (byte(pos + 1) & 0x3F);
    case 3:
      return ((b0 & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F);
    default:
      return ((b0 & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) | ((byte(pos + 2) & 0x3F) << 6) |
             (byte(pos + 3) & 0x3F);
  }
}

char32_t utf8_decode_before(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return utf8_decode_at(text, pos);
}

void utf8_append(std::string& out, char32_t c) {
  const auto put = [&](char32_t v) { out.push_back(static_cast<char>(static_cast<unsigned char>(v))); };
  if (c < 0x80) {
    put(c);
  } else if (c < 0x800) {
    put(0xC0 | (c >> 6));
    put(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    put(0xE0 | (c >> 12));
    put(0x80 | ((c >> 6) & 0x3F));
    put(0x80 | (c & 0x3F));
  } else {
    put(0xF0 | (c >> 18));
    put(0x80 | ((c >> 12) & 0x3F));
    put(0x80 | ((c >> 6) & 0x3F));
    put(0x80 | (c & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool ok = false;
    const size_t n = sequence_at(bytes, pos, ok);
    if (ok) {
      out.append(bytes.substr(pos, n));
    } else {
      utf8_append(out, U'\uFFFD');
    }
    pos += n;
  }
  return out;
}

}  // namespace tandem::io::tok
