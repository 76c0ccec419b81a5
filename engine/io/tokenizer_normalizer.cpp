// NFC through ICU's Normalizer2, when the build has ICU (tokenizer_normalizer_impl.h).
#include "engine/io/tokenizer_normalizer_impl.h"

#include <cstdint>
#include <limits>

#if TANDEM_HAVE_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utypes.h>
#endif

namespace tandem::io::tok {

#if TANDEM_HAVE_ICU

Result<Normalizer> Normalizer::nfc() {
  UErrorCode status = U_ZERO_ERROR;
  (void)icu::Normalizer2::getNFCInstance(status);  // loads ICU's data once, here rather than mid-encode
  if (U_FAILURE(status)) {
    return Error::make(ErrorKind::kUnsupported, "ICU cannot provide NFC normalization: {}", u_errorName(status));
  }
  return Normalizer(true);
}

Result<std::string> Normalizer::normalize(std::string_view text) const {
  if (!nfc_) return std::string(text);
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Error::make(ErrorKind::kInvalidArgument, "text of {} bytes is too long to normalize", text.size());
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || nfc == nullptr) {
    return Error::make(ErrorKind::kInternal, "ICU cannot provide NFC normalization: {}", u_errorName(status));
  }
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  // Most text is already NFC: checking is cheaper than rewriting.
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    return Error::make(ErrorKind::kInternal, "NFC normalization failed: {}", u_errorName(status));
  }
  return out;
}

#else

Result<Normalizer> Normalizer::nfc() {
  return Error(ErrorKind::kUnsupported,
               "NFC normalization is not available: this build has no Unicode normalization (built without "
               "ICU; install libicu-dev and reconfigure)");
}

Result<std::string> Normalizer::normalize(std::string_view text) const { return std::string(text); }

#endif

}  // namespace tandem::io::tok
