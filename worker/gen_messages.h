// The generation data plane's headers (engine/comm Link messages between a target rank and its drafter
// ranks, architecture.md "A speculative round, drafter on another GPU"): per round the target asks each
// drafter for blocks (with the requests' pending tap rows as the link's rows) and the drafter answers
// with the draft tokens, and under rejection sampling their proposals q. With overlap the drafter then
// guesses each request's next round while the target verifies (a second reply, `guess`). Decoding checks
// every count against the bytes there.
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
// Overlap: `wants_draft` false means the target verifies a guess this round (the entry only settles);
// `guess` asks for guesses of the next round for the outcomes of verifying, at `start`, the drafter's
// own draft or (without one) the drafts in `verified`.
struct DraftEntry {
  uint32_t slot = 0;
  uint32_t settled = 0;
  uint32_t rows = 0;
  uint32_t start = 0;
  uint32_t bonus = 0;
  float temperature = 0.0f;
  uint64_t seed = 0;
  bool wants_draft = true;
  bool guess = false;
  std::vector<uint32_t> verified;  // the drafts verified this round when wants_draft is false
};
// Round 0 drafts nothing and its reply is skipped by the target: with no entries it only releases (a
// request of the target finished or was cancelled); its entries (none wanting a draft, each `start` at
// settled + rows) settle the tap rows a target run just left.
struct DraftAsk {
  uint64_t round = 0;
  uint32_t block = 0;
  std::vector<uint32_t> releases;   // slots whose context is freed first
  std::vector<DraftEntry> entries;  // the link's rows: each entry's tap rows, in order
};
// A guess of the next round (dflash.md §1.6 read ahead), one per accepted length a of the n drafts
// d_1..d_n verified at `start` (lengths 0..3 and n): the next block would start at start + a + 1 with
// the target's token there as its bonus. The drafter cannot know the taps of the verified rows yet, so
// it settles a filler context rows (copies of the last tap row it got) for positions start..start+a-1,
// drafts the block anchored on the last committed token it knows (the bonus for a = 0, else d_a) at
// start + a, and crops the fillers off again. Row 1 guesses the bonus (for a < n, the best token other
// than d_{a+1}, which the target rejected there); rows 2.. are the next round's drafts. The target uses
// a guess only when the outcome is exactly it (start == at, bonus == first token): every committed
// token is still the target's own, so the output is unchanged.
struct Guess {
  uint32_t at = 0;               // the start the guess is for
  std::vector<uint32_t> tokens;  // the bonus guess, then the drafts
};
struct DraftReply {
  uint64_t round = 0;
  std::vector<std::vector<uint32_t>> drafts;  // per entry: block - 1 tokens (empty: none asked)
  uint32_t slots_used = 0;
  uint64_t settle_us = 0;
  uint64_t draft_us = 0;
  bool guess = false;                       // a guess reply: `guesses`, no drafts
  std::vector<std::vector<Guess>> guesses;  // per entry (none where it cannot guess)
  // Per entry of a draft reply: none, or one proposal per draft token (verify: reject at temperature >
  // 0); sent exactly (f64 probabilities), so the target accepts as the one-process library does. On the
  // wire each takes the smallest exact form: its (id, q) list as it is (a v2 selector's candidates, a
  // top-p nucleus: 12 bytes an id), or for a q over ids 0..n-1 (v1 at top_p 1) either the n
  // probabilities (8 bytes an id) or only its (id, q) pairs where q is not +0.0 (12 bytes a pair); the
  // target rebuilds the same ids and bits.
  std::vector<std::vector<ir::Distribution>> proposals;
  // Bytes the drafter rank has copied from its GPU to the host since it was loaded (its backend's copies
  // and its link's received rows; not its warm-up's): a running total, so the target counts the difference
  // even across replies it does not read (a settling ask's). 0 on the CPU backend.
  uint64_t device_to_host_total = 0;
  // Per entry of a draft reply: how many of the reply's link rows (in entry order) are its proposals,
  // instead of `proposals` (0: none there). A v1 drafter's q at top_p 1 is softmax(row / T) of its logits
  // row over the draft vocabulary (the rows' width), which crosses device to device as it was left, so
  // the target rejects on its device as a generator does, with the same rows. On the wire each such
  // proposal is one form byte.
  std::vector<uint32_t> row_proposals = {};
};

std::vector<uint8_t> encode_ask(const DraftAsk& ask);
std::vector<uint8_t> encode_reply(const DraftReply& reply);
// `peer` names the sender in errors; an ask's rows, and a reply's row proposals, must add up to `rows`
// (what the link carried); a proposal over ids 0..n-1, or a row proposal's `width`, must fit `vocab`
// (n <= vocab).
Result<DraftAsk> decode_ask(std::span<const uint8_t> bytes, uint32_t rows, int peer);
Result<DraftReply> decode_reply(std::span<const uint8_t> bytes, int peer, uint32_t vocab, uint32_t rows = 0,
                                uint32_t width = 0);

}  // namespace tandem::worker
