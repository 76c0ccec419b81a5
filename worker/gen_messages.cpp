// DraftAsk and DraftReply on the wire (gen_messages.h): u8 kind | fields, little-endian (engine/core/wire.h);
// each proposal q in the smallest of its exact forms.
#include "worker/gen_messages.h"

#include <bit>

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

// A proposal q in the smallest of three exact forms (gen_messages.h): kList, its ids and probabilities
// as they are; kDense, ids 0..n-1 implied, the probabilities only; kRange, ids 0..n-1 implied and every
// probability +0.0 but the (id, q) pairs sent. The target rebuilds the same ids and bits.
constexpr uint8_t kList = 0;
constexpr uint8_t kDense = 1;
constexpr uint8_t kRange = 2;
// The proposal is the reply's next link row (DraftReply::row_proposals): the form byte alone.
constexpr uint8_t kRow = 3;

bool is_positive_zero(double v) { return std::bit_cast<uint64_t>(v) == 0; }

void write_proposal(WireWriter& w, const ir::Distribution& q) {
  const size_t n = q.ids.size();
  bool range = n > 0 && q.probs.size() == n;
  size_t kept = 0;
  for (size_t i = 0; i < n && range; ++i) {
    range = q.ids[i] == i;
    if (!is_positive_zero(q.probs[i])) ++kept;
  }
  const size_t list_bytes = 8 + 12 * n, dense_bytes = 4 + 8 * n, range_bytes = 12 + 12 * kept;
  if (range && range_bytes < dense_bytes && range_bytes < list_bytes) {
    w.u8(kRange);
    w.u32(static_cast<uint32_t>(n));
    std::vector<uint32_t> ids;
    std::vector<double> probs;
    ids.reserve(kept);
    probs.reserve(kept);
    for (size_t i = 0; i < n; ++i) {
      if (is_positive_zero(q.probs[i])) continue;
      ids.push_back(static_cast<uint32_t>(i));
      probs.push_back(q.probs[i]);
    }
    w.u32s(ids);
    w.f64s(probs);
  } else if (range && dense_bytes < list_bytes) {
    w.u8(kDense);
    w.f64s(q.probs);
  } else {
    w.u8(kList);
    w.u32s(q.ids);
    w.f64s(q.probs);
  }
}

// Reads a proposal back; "" or why it is malformed (the caller names the entry).
std::string read_proposal(WireReader& r, uint32_t vocab, ir::Distribution& q) {
  const uint8_t form = r.u8("drafts.proposals.form");
  if (r.failed()) return {};
  if (form == kList) {
    q.ids = r.u32s("drafts.proposals.ids");
    q.probs = r.f64s("drafts.proposals.probs");
    if (!r.failed() && (q.ids.empty() || q.ids.size() != q.probs.size())) {
      return fmt::format(".probs: {} probabilities for {} ids", q.probs.size(), q.ids.size());
    }
    return {};
  }
  if (form == kDense) {
    q.probs = r.f64s("drafts.proposals.probs");
    if (r.failed()) return {};
    if (q.probs.empty() || q.probs.size() > vocab) {
      return fmt::format(".probs: a dense proposal over {} ids (the vocabulary has {})", q.probs.size(), vocab);
    }
    q.ids.resize(q.probs.size());
    for (uint32_t i = 0; i < q.ids.size(); ++i) q.ids[i] = i;
    return {};
  }
  if (form != kRange) return fmt::format(".form: {} is not a proposal form", form);
  const uint32_t n = r.u32("drafts.proposals.range");
  const std::vector<uint32_t> ids = r.u32s("drafts.proposals.ids");
  const std::vector<double> probs = r.f64s("drafts.proposals.probs");
  if (r.failed()) return {};
  if (n == 0 || n > vocab) return fmt::format(".range: {} ids (the vocabulary has {})", n, vocab);
  if (ids.size() != probs.size()) return fmt::format(".probs: {} probabilities for {} ids", probs.size(), ids.size());
  q.ids.resize(n);
  for (uint32_t i = 0; i < n; ++i) q.ids[i] = i;
  q.probs.assign(n, 0.0);
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] >= n || (j > 0 && ids[j] <= ids[j - 1])) {
      return fmt::format(".ids[{}]: id {} is not ascending below the range of {}", j, ids[j], n);
    }
    q.probs[ids[j]] = probs[j];
  }
  return {};
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
      const uint32_t rows = i < reply.row_proposals.size() ? reply.row_proposals[i] : 0;
      if (rows > 0) {
        w.u32(rows);
        for (uint32_t k = 0; k < rows; ++k) w.u8(kRow);
        continue;
      }
      const size_t n = i < reply.proposals.size() ? reply.proposals[i].size() : 0;
      w.u32(static_cast<uint32_t>(n));
      for (size_t k = 0; k < n; ++k) write_proposal(w, reply.proposals[i][k]);
    }
  }
  w.u32(reply.slots_used);
  w.u64(reply.settle_us);
  w.u64(reply.draft_us);
  w.u64(reply.device_to_host_total);
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
  if (r.failed()) return malformed_frame("draft ask", peer, bytes.size(), r.error());
  if (kind != kAsk) return malformed_frame("draft ask", peer, bytes.size(), fmt::format("kind {} is not an ask", kind));
  if (size_t{n} * kEntryBytes > r.left()) {
    return malformed_frame("draft ask", peer, bytes.size(),
                           fmt::format("entries: {} entries need at least {} bytes, {} are left", n,
                                       size_t{n} * kEntryBytes, r.left()));
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
      return malformed_frame("draft ask", peer, bytes.size(),
                             fmt::format("entries.flags: slot {}: unknown flags {:#x}", e.slot, flags));
    }
    if (uint64_t{e.settled} + e.rows != e.start) {
      return malformed_frame("draft ask", peer, bytes.size(),
                             fmt::format("entries.rows: slot {}: context {} + {} rows does not reach the block at {}",
                                         e.slot, e.settled, e.rows, e.start));
    }
  }
  if (r.failed()) return malformed_frame("draft ask", peer, bytes.size(), r.error());
  if (r.left() != 0) {
    return malformed_frame("draft ask", peer, bytes.size(), fmt::format("{} bytes past the end", r.left()));
  }
  if (total != rows) {
    return malformed_frame("draft ask", peer, bytes.size(),
                           fmt::format("entries.rows: they add up to {} rows, the message carries {}", total, rows));
  }
  return ask;
}

Result<DraftReply> decode_reply(std::span<const uint8_t> bytes, int peer, uint32_t vocab, uint32_t rows,
                                uint32_t width) {
  WireReader r(bytes);
  const uint8_t kind = r.u8("kind");
  DraftReply reply;
  reply.round = r.u64("round");
  reply.guess = kind == kGuess;
  const uint32_t n = r.u32(reply.guess ? "guesses" : "drafts");
  if (r.failed()) return malformed_frame("draft reply", peer, bytes.size(), r.error());
  if (kind != kReply && kind != kGuess) {
    return malformed_frame("draft reply", peer, bytes.size(), fmt::format("kind {} is not a reply", kind));
  }
  // Each guess list: its count; each draft: its token count and its proposal count.
  const size_t each = reply.guess ? 4 : 8;
  if (size_t{n} * each > r.left()) {
    return malformed_frame("draft reply", peer, bytes.size(),
                           fmt::format("{}: {} entries exceed the {} bytes left", reply.guess ? "guesses" : "drafts", n,
                                       r.left()));
  }
  if (reply.guess && rows != 0) {
    return malformed_frame("draft reply", peer, bytes.size(), fmt::format("guesses carry no rows, the message has {}",
                                                                          rows));
  }
  if (reply.guess) {
    reply.guesses.resize(n);
    for (auto& gs : reply.guesses) {
      const uint32_t m = r.u32("guesses");
      if (r.failed()) break;
      if (size_t{m} * 8 > r.left()) {
        return malformed_frame("draft reply", peer, bytes.size(),
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
    reply.row_proposals.assign(n, 0);
    for (uint32_t i = 0; i < n && !r.failed(); ++i) {
      reply.drafts[i] = r.u32s("drafts");
      const uint32_t q = r.u32("drafts.proposals");
      if (r.failed()) break;
      if (q != 0 && q != reply.drafts[i].size()) {
        return malformed_frame("draft reply", peer, bytes.size(),
                               fmt::format("drafts[{}].proposals: {} proposals for {} draft tokens", i, q,
                                           reply.drafts[i].size()));
      }
      // An entry's proposals are all rows (the form byte alone) or all lists.
      WireReader probe = r;
      const bool on_rows = q > 0 && probe.u8("drafts.proposals.form") == kRow;
      reply.proposals[i].resize(on_rows ? 0 : q);
      for (uint32_t k = 0; k < q && !r.failed(); ++k) {
        probe = r;
        if (const uint8_t form = probe.u8("drafts.proposals.form"); on_rows || form == kRow) {
          r.u8("drafts.proposals.form");
          if (!r.failed() && (form != kRow || !on_rows)) {
            return malformed_frame("draft reply", peer, bytes.size(),
                                   fmt::format("drafts[{}].proposals[{}].form: {} among {}", i, k, form,
                                               on_rows ? "row proposals" : "listed ones"));
          }
          continue;
        }
        const std::string why = read_proposal(r, vocab, reply.proposals[i][k]);
        if (!why.empty()) {
          return malformed_frame("draft reply", peer, bytes.size(),
                                 fmt::format("drafts[{}].proposals[{}]{}", i, k, why));
        }
      }
      if (on_rows) reply.row_proposals[i] = q;
    }
    uint64_t total = 0;
    for (uint32_t q : reply.row_proposals) total += q;
    if (!r.failed() && total != rows) {
      return malformed_frame("draft reply", peer, bytes.size(),
                             fmt::format("drafts.proposals: {} row proposals, the message carries {} rows", total,
                                         rows));
    }
    if (!r.failed() && rows > 0 && (width == 0 || width > vocab)) {
      return malformed_frame("draft reply", peer, bytes.size(),
                             fmt::format("drafts.proposals: rows of {} ids (the vocabulary has {})", width, vocab));
    }
  }
  reply.slots_used = r.u32("slots_used");
  reply.settle_us = r.u64("settle_us");
  reply.draft_us = r.u64("draft_us");
  reply.device_to_host_total = r.u64("device_to_host_total");
  if (r.failed()) return malformed_frame("draft reply", peer, bytes.size(), r.error());
  if (r.left() != 0) {
    return malformed_frame("draft reply", peer, bytes.size(), fmt::format("{} bytes past the end", r.left()));
  }
  return reply;
}

}  // namespace tandem::worker
