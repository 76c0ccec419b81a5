// The generation data plane's headers (engine/comm Link messages between a target rank and its drafter
// ranks, architecture.md "A speculative round, drafter on another GPU"): per round the target asks each
// drafter for blocks (with the requests' pending tap rows as the link's rows) and the drafter answers
// with the draft tokens, and under rejection sampling their proposals q. Decoding checks every count
// against the bytes there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/sampling.h"

namespace tandem::worker {

// One request's part of an ask: its drafter context runs to `settled` (0: a new request, the slot's
// context is started afresh), `rows` tap rows follow for positions [settled, settled + rows), and the
// block starts at `start` with the bonus token `bonus`.
struct DraftEntry {
  uint32_t slot = 0;
  uint32_t settled = 0;
  uint32_t rows = 0;
  uint32_t start = 0;
  uint32_t bonus = 0;
  float temperature = 0.0f;
  uint64_t seed = 0;
};
// Round 0 with no entries only releases (a request of the target finished or was cancelled); its
// reply is skipped by the target.
struct DraftAsk {
  uint64_t round = 0;
  uint32_t block = 0;
  std::vector<uint32_t> releases;   // slots whose context is freed first
  std::vector<DraftEntry> entries;  // the link's rows: each entry's tap rows, in order
};
struct DraftReply {
  uint64_t round = 0;
  std::vector<std::vector<uint32_t>> drafts;  // per entry: block - 1 tokens
  uint32_t slots_used = 0;
  uint64_t settle_us = 0;
  uint64_t draft_us = 0;
  // Per entry: none, or one proposal per draft token (verify: reject at temperature > 0); sent exactly
  // (f64 probabilities), so the target accepts as the one-process library does.
  std::vector<std::vector<ir::Distribution>> proposals;
};

std::vector<uint8_t> encode_ask(const DraftAsk& ask);
std::vector<uint8_t> encode_reply(const DraftReply& reply);
// `peer` names the sender in errors; an ask's rows must add up to `rows` (what the link carried).
Result<DraftAsk> decode_ask(std::span<const uint8_t> bytes, uint32_t rows, int peer);
Result<DraftReply> decode_reply(std::span<const uint8_t> bytes, int peer);

}  // namespace tandem::worker
