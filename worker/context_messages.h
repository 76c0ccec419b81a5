// The data-plane messages that hand requests' drafter contexts from a drained drafter rank to another
// drafter of the same target (README "Draining a drafter rank"; protocol.h Round::drains). The target
// asks the drained drafter for them (kAsk), the drafter answers with their context K/V rows and frees
// the slots (kRows), the target passes those rows on as they are to the new drafter (kRows), which takes
// them in and says what it took (kTaken). The rows are the drafter's context cache rows
// (decode::CacheSlots::export_rows), `length` of them per entry, in entry order. The kinds follow
// gen_messages.h's (1..3) on the same links, so a reader tells the two apart by the first byte.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/result.h"

namespace tandem::worker {

enum class ContextKind : uint8_t { kAsk = 4, kRows = 5, kTaken = 6 };
const char* to_string(ContextKind kind);

// kAsk: the slot and the positions the target expects the drafter to hold ([0, length)). kRows: the
// positions whose rows follow (0: none, the context was not there whole). kTaken: the positions the
// new drafter now holds (0: it took none).
struct ContextEntry {
  uint32_t slot = 0;
  uint32_t length = 0;
};

struct ContextMessage {
  ContextKind kind = ContextKind::kAsk;
  uint64_t round = 0;  // the target's round (from 1); 0: the drafter could not read the message it answers
  std::vector<ContextEntry> entries;
  uint32_t slots_used = 0;  // from a drafter (kRows, kTaken): its context slots holding a request after it
};

std::vector<uint8_t> encode_context(const ContextMessage& m);
// `rows` is what the link carried with the header: for kRows the entries' lengths add up to it, the other
// kinds carry none. A slot appears once. `peer` names the sender in errors.
Result<ContextMessage> decode_context(std::span<const uint8_t> bytes, uint32_t rows, int peer);
// Whether a data-plane header is one of these (else a DraftAsk or DraftReply).
bool is_context_message(std::span<const uint8_t> bytes);

}  // namespace tandem::worker
