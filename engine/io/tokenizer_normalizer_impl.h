// The tokenizer's normalizer: none, or Unicode NFC (what Qwen's and ModernBERT's tokenizer.json ask
// for). NFC needs ICU; a build without it (TANDEM_HAVE_ICU unset) refuses such a tokenizer at load.
#pragma once

#include <string>
#include <string_view>

#include "engine/core/result.h"

namespace tandem::io::tok {

class Normalizer {
 public:
  static Normalizer none() { return Normalizer(false); }
  // kUnsupported when this build has no Unicode normalization.
  static Result<Normalizer> nfc();

  bool active() const { return nfc_; }
  // `text` is valid UTF-8; so is the result.
  Result<std::string> normalize(std::string_view text) const;

 private:
  explicit Normalizer(bool nfc) : nfc_(nfc) {}
  bool nfc_;
};

}  // namespace tandem::io::tok
