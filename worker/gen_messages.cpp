// DraftAsk and DraftReply on the wire (gen_messages.h): u8 kind | fields, little-endian (engine/core/wire.h).
#include "worker/gen_messages.h"

#include <fmt/format.h>

#include "engine/core/wire.h"

namespace tandem::worker {
namespace {

constexpr uint8_t kAsk = 1;
constexpr uint8_t kReply = 2;
constexpr uint8_t kGuess = 3;
constexpr size_t kEntryBytes = 4 * 5 + 4 + 8 + 4 + 4;  // with no verified drafts
constexpr uint32_t kWantsDraft = 1;
constexpr uint32_t kWantsGuess = 2;

Error malformed(const char* what, int peer, size_t bytes, const std::string& why) {
  return Error::make(ErrorKind::kFormat, "malformed {} from rank {} ({} bytes): {}", what, peer, bytes, why);
}

}  // namespace

std::vector<uint8_t> encode_ask(const DraftAsk& ask) {
  WireWriter w;
  w.u8(kAsk);
  w.u64(ask.round);
  w.u32(ask.block);
  w.u32s(ask.releases);
  w.u32(static_cast<uint32_t>(ask.entries.size()));
  for (const DraftEntry& e : ask.entries) {
    w.u32(e.slot);
    w.u32(e.settled);
    w.u32(e.rows);
    w.u32(e.start);
    w.u32(e.bonus);
    w.f32(e.temperature);
    w.u64(e.seed);
    w.u32((e.wants_draft ? kWantsDraft : 0) | (e.guess ? kWantsGuess : 0));
    w.u32s(e.verified);
  }
  return std::move(w.bytes());
}

std::vector<uint8_t> encode_reply(const DraftReply& reply) {
  WireWriter w;
  w.u8(reply.guess ? kGuess : kReply);
  w.u64(reply.round);
  if (reply.guess) {
    w.u32(static_cast<uint32_t>(reply.guesses.size()));
    for (const auto& gs : reply.guesses) {
      w.u32(static_cast<uint32_t>(gs.size()));
      for (const Guess& g : gs) {
        w.u32(g.at);
        w.u32s(g.tokens);
      }
    }
  } else {
    w.u32(static_cast<uint32_t>(reply.drafts.size()));
    for (size_t i = 0; i < reply.drafts.size(); ++i) {
      w.u32s(reply.drafts[i]);
      const size_t n = i < reply.proposals.size() ? reply.proposals[i].size() : 0;
      w.u32(static_cast<uint32_t>(n));
      for (size_t k = 0; k < n; ++k) {
        w.u32s(reply.proposals[i][k].ids);
        w.f64s(reply.proposals[i][k].probs);
      }
    }
  }
  w.u32(reply.slots_used);
  w.u64(reply.settle_us);
  w.u64(reply.draft_us);
  return std::move(w.bytes());
}

Result<DraftAsk> decode_ask(std::span<const uint8_t> bytes, uint32_t rows, int peer) {
  WireReader r(bytes);
  const uint8_t kind = r.u8("kind");
  DraftAsk ask;
  ask.round = r.u64("round");
  ask.block = r.u32("block");
  ask.releases = r.u32s("releases");
  const uint32_t n = r.u32("entries");
  if (r.failed()) return malformed("draft ask", peer, bytes.size(), r.error());
  if (kind != kAsk) return malformed("draft ask", peer, bytes.size(), fmt::format("kind {} is not an ask", kind));
  if (size_t{n} * kEntryBytes > r.left()) {
    return malformed("draft ask", peer, bytes.size(),
                     fmt::format("entries: {} entries need at least {} bytes, {} are left", n, size_t{n} * kEntryBytes,
                                 r.left()));
  }
  uint64_t total = 0;
  ask.entries.resize(n);
  for (DraftEntry& e : ask.entries) {
    e.slot = r.u32("entries.slot");
    e.settled = r.u32("entries.settled");
    e.rows = r.u32("entries.rows");
    e.start = r.u32("entries.start");
    e.bonus = r.u32("entries.bonus");
    e.temperature = r.f32("entries.temperature");
    e.seed = r.u64("entries.seed");
    const uint32_t flags = r.u32("entries.flags");
    e.wants_draft = (flags & kWantsDraft) != 0;
    e.guess = (flags & kWantsGuess) != 0;
    e.verified = r.u32s("entries.verified");
    total += e.rows;
    if (!r.failed() && (flags & ~(kWantsDraft | kWantsGuess)) != 0) {
      return malformed("draft ask", peer, bytes.size(),
                       fmt::format("entries.flags: slot {}: unknown flags {:#x}", e.slot, flags));
    }
    if (uint64_t{e.settled} + e.rows != e.start) {
      return malformed("draft ask", peer, bytes.size(),
                       fmt::format("entries.rows: slot {}: context {} + {} rows does not reach the block at {}", e.slot,
                                   e.settled, e.rows, e.start));
    }
  }
  if (r.failed()) return malformed("draft ask", peer, bytes.size(), r.error());
  if (r.left() != 0) return malformed("draft ask", peer, bytes.size(), fmt::format("{} bytes past the end", r.left()));
  if (total != rows) {
    return malformed("draft ask", peer, bytes.size(),
                     fmt::format("entries.rows: they add up to {} rows, the message carries {}", total, rows));
  }
  return ask;
}

Result<DraftReply> decode_reply(std::span<const uint8_t> bytes, int peer) {
  WireReader r(bytes);
  const uint8_t kind = r.u8("kind");
  DraftReply reply;
  reply.round = r.u64("round");
  reply.guess = kind == kGuess;
  const uint32_t n = r.u32(reply.guess ? "guesses" : "drafts");
  if (r.failed()) return malformed("draft reply", peer, bytes.size(), r.error());
  if (kind != kReply && kind != kGuess) {
    return malformed("draft reply", peer, bytes.size(), fmt::format("kind {} is not a reply", kind));
  }
  // Each guess list: its count; each draft: its token count and its proposal count.
  const size_t each = reply.guess ? 4 : 8;
  if (size_t{n} * each > r.left()) {
    return malformed("draft reply", peer, bytes.size(),
                     fmt::format("{}: {} entries exceed the {} bytes left", reply.guess ? "guesses" : "drafts", n,
                                 r.left()));
  }
  if (reply.guess) {
    reply.guesses.resize(n);
    for (auto& gs : reply.guesses) {
      const uint32_t m = r.u32("guesses");
      if (r.failed()) break;
      if (size_t{m} * 8 > r.left()) {
        return malformed("draft reply", peer, bytes.size(),
                         fmt::format("guesses: {} guesses exceed the {} bytes left", m, r.left()));
      }
      gs.resize(m);
      for (Guess& g : gs) {
        g.at = r.u32("guesses.at");
        g.tokens = r.u32s("guesses.tokens");
      }
    }
  } else {
    reply.drafts.resize(n);
    reply.proposals.resize(n);
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      reply.drafts[i] = r.u32s("drafts");
      const uint32_t q = r.u32("drafts.proposals");
      if (r.failed()) break;
      if (q != 0 && q != reply.drafts[i].size()) {
        return malformed("draft reply", peer, bytes.size(),
                         fmt::format("drafts[{}].proposals: {} proposals for {} draft tokens", i, q,
                                     reply.drafts[i].size()));
      }
      reply.proposals[i].resize(q);
      for (uint32_t k = 0; k < q && !r.failed(); ++k) {
        ir::Distribution& d = reply.proposals[i][k];
        d.ids = r.u32s("drafts.proposals.ids");
        d.probs = r.f64s("drafts.proposals.probs");
        if (!r.failed() && (d.ids.empty() || d.ids.size() != d.probs.size())) {
          return malformed("draft reply", peer, bytes.size(),
                           fmt::format("drafts[{}].proposals[{}].probs: {} probabilities for {} ids", i, k,
                                       d.probs.size(), d.ids.size()));
        }
      }
    }
  }
  reply.slots_used = r.u32("slots_used");
  reply.settle_us = r.u64("settle_us");
  reply.draft_us = r.u64("draft_us");
  if (r.failed()) return malformed("draft reply", peer, bytes.size(), r.error());
  if (r.left() != 0) return malformed("draft reply", peer, bytes.size(), fmt::format("{} bytes past the end", r.left()));
  return reply;
}

}  // namespace tandem::worker
