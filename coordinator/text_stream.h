// TextStream: a generation's committed token ids turned into text as they come, for streamed and plain
// answers alike (so both say the same). Byte-level BPE tokens may split a UTF-8 character: text is
// released only in whole characters. Stop strings are matched across token and round boundaries, and
// text that may be the start of one is held back; the text ends before the first stop string (OpenAI:
// stop sequences are not included). A stop token id ends it too and is not part of the text; special
// tokens (EOS, ChatML markers) add no text, as vLLM's skip_special_tokens=True.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/tokenizer.h"

namespace tandem::coordinator {

class TextStream {
 public:
  TextStream(const io::Tokenizer& tokenizer, std::vector<std::string> stop, std::vector<uint32_t> stop_ids);

  // Takes a round's tokens (all ids below the vocabulary) and returns the text they made final. After a
  // stop (stopped() turns true) later tokens are ignored.
  std::string push(const std::vector<uint32_t>& tokens);
  // The rest of the text once no token will come: held bytes (as U+FFFD when incomplete) and held text.
  std::string finish();

  bool stopped() const { return stopped_; }
  // The ids taken: all of them up to and including the one that stopped the stream.
  const std::vector<uint32_t>& tokens() const { return tokens_; }

 private:
  // Moves the complete characters of bytes_ to held_, then releases what cannot start a stop string.
  std::string release(bool final);

  const io::Tokenizer& tokenizer_;
  std::vector<std::string> stop_;
  std::vector<uint32_t> stop_ids_;
  std::vector<uint32_t> tokens_;
  std::string bytes_;  // decoded bytes that do not yet end a character
  std::string held_;   // text that may be the beginning of a stop string
  bool stopped_ = false;
};

}  // namespace tandem::coordinator
