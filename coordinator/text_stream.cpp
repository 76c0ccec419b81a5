// TextStream (text_stream.h).
#include "coordinator/text_stream.h"

#include <algorithm>

namespace tandem::coordinator {
namespace {

// Where an unfinished UTF-8 sequence begins at the end of `b` (b.size() when none): a lead byte followed
// by fewer continuation bytes than it announces. Bytes before it never belong to a sequence past it.
size_t incomplete_tail(const std::string& b) {
  const size_t n = b.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(b[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t want = c >= 0xF0 && c <= 0xF4 ? 4 : (c >= 0xE0 && c < 0xF0 ? 3 : (c >= 0xC2 && c < 0xE0 ? 2 : 1));
    return want > back ? n - back : n;
  }
  return n;
}

// U+FFFD for each byte run that is not UTF-8, as the tokenizer's decode() repairs it (the same rule:
// a maximal valid prefix of a sequence is one replacement).
std::string lossy(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t want = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) want = 1;
    else if (c >= 0xC2 && c <= 0xDF) want = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      want = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      want = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (want == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    size_t got = 1;
    while (got < want && i + got < bytes.size()) {
      const auto k = static_cast<unsigned char>(bytes[i + got]);
      const unsigned char l = got == 1 ? lo : 0x80, h = got == 1 ? hi : 0xBF;
      if (k < l || k > h) break;
      ++got;
    }
    if (got == want) {
      out.append(bytes, i, want);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += got;
  }
  return out;
}

}  // namespace

TextStream::TextStream(const io::Tokenizer& tokenizer, std::vector<std::string> stop, std::vector<uint32_t> stop_ids)
    : tokenizer_(tokenizer), stop_(std::move(stop)), stop_ids_(std::move(stop_ids)) {}

std::string TextStream::push(const std::vector<uint32_t>& tokens) {
  std::string out;
  for (const uint32_t id : tokens) {
    if (stopped_) break;
    tokens_.push_back(id);
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
      stopped_ = true;
      break;
    }
    if (!tokenizer_.is_special(id)) {
      auto bytes = tokenizer_.decode_bytes({id});
      if (bytes.ok()) bytes_ += bytes.value();  // ids are checked below the vocabulary by the service's caller
    }
    out += release(false);
  }
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  return release(true);
}

std::string TextStream::release(bool final) {
  const size_t cut = final ? bytes_.size() : incomplete_tail(bytes_);
  held_ += lossy(bytes_.substr(0, cut));
  bytes_.erase(0, cut);
  // The first stop string in the held text ends the stream; the text before it is released.
  size_t first = std::string::npos;
  for (const std::string& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    bytes_.clear();
    return out;
  }
  // Hold back the longest end of the text that begins some stop string.
  size_t keep = 0;
  if (!final) {
    for (const std::string& s : stop_) {
      for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
        if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace tandem::coordinator
