// ContextMessage on the wire (context_messages.h): u8 kind | u64 round | u32 entries | (u32 slot, u32
// length) per entry | u32 slots_used, little-endian (engine/core/wire.h).
#include "worker/context_messages.h"

#include <set>

#include <fmt/format.h>

#include "engine/core/wire.h"

namespace tandem::worker {
namespace {

constexpr size_t kEntryBytes = 8;

}  // namespace

const char* to_string(ContextKind kind) {
  switch (kind) {
    case ContextKind::kAsk: return "ask";
    case ContextKind::kRows: return "rows";
    case ContextKind::kTaken: return "taken";
  }
  return "?";
}

bool is_context_message(std::span<const uint8_t> bytes) {
  return !bytes.empty() && bytes[0] >= static_cast<uint8_t>(ContextKind::kAsk) &&
         bytes[0] <= static_cast<uint8_t>(ContextKind::kTaken);
}

std::vector<uint8_t> encode_context(const ContextMessage& m) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(m.kind));
  w.u64(m.round);
  w.u32(static_cast<uint32_t>(m.entries.size()));
  for (const ContextEntry& e : m.entries) {
    w.u32(e.slot);
    w.u32(e.length);
  }
  w.u32(m.slots_used);
  return std::move(w.bytes());
}

Result<ContextMessage> decode_context(std::span<const uint8_t> bytes, uint32_t rows, int peer) {
  WireReader r(bytes);
  auto bad = [&](const std::string& why) { return malformed_frame("context message", peer, bytes.size(), why); };
  ContextMessage m;
  const uint8_t kind = r.u8("kind");
  m.round = r.u64("round");
  const uint32_t n = r.u32("entries");
  if (r.failed()) return bad(r.error());
  if (!is_context_message(bytes)) {
    return bad(fmt::format("kind: {} is not 4 (ask), 5 (rows) or 6 (taken)", kind));
  }
  m.kind = static_cast<ContextKind>(kind);
  if (size_t{n} * kEntryBytes > r.left()) {
    return bad(fmt::format("entries: {} entries need {} bytes, {} are left", n, size_t{n} * kEntryBytes, r.left()));
  }
  m.entries.resize(n);
  std::set<uint32_t> slots;
  uint64_t total = 0;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    ContextEntry& e = m.entries[i];
    e.slot = r.u32("entries.slot");
    e.length = r.u32("entries.length");
    if (r.failed()) break;
    if (!slots.insert(e.slot).second) {
      return bad(fmt::format("entries[{}].slot: slot {} appears twice", i, e.slot));
    }
    total += e.length;
  }
  m.slots_used = r.u32("slots_used");
  if (r.failed()) return bad(r.error());
  if (r.left() != 0) return bad(fmt::format("{} bytes past the end", r.left()));
  const uint64_t want = m.kind == ContextKind::kRows ? total : 0;
  if (rows != want) {
    return bad(fmt::format("entries.length: a context '{}' message carries {} rows, its entries say {}",
                           to_string(m.kind), rows, want));
  }
  return m;
}

}  // namespace tandem::worker
