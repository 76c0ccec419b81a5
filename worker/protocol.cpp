// Encoding and checked decoding of control-plane frames (protocol.h).
#include "worker/protocol.h"

#include <limits>

#include <fmt/format.h>

#include "engine/core/overloaded.h"
#include "engine/core/wire.h"

namespace tandem::worker {
namespace {

void write_round(WireWriter& w, const Round& r) {
  w.u64(r.round);
  w.u32(r.block);
  w.u32s(r.releases);
  w.u32(static_cast<uint32_t>(r.moves.size()));
  for (const GenMove& m : r.moves) {
    w.u32(m.slot);
    w.i32(m.drafter);
    w.u32(m.scratch);
  }
  w.u32(static_cast<uint32_t>(r.admits.size()));
  for (const GenAdmit& a : r.admits) {
    w.u64(a.request);
    w.u32(a.slot);
    w.i32(a.drafter);
    w.u32(a.max_tokens);
    w.f32(a.temperature);
    w.f32(a.top_p);
    w.u64(a.seed);
    w.u32s(a.prompt);
    w.u32s(a.stop_ids);
  }
  w.u32(static_cast<uint32_t>(r.drains.size()));
  for (int32_t d : r.drains) w.i32(d);
}

void write_round_done(WireWriter& w, const RoundDone& d) {
  w.u64(d.round);
  w.u32(static_cast<uint32_t>(d.results.size()));
  for (const GenResult& g : d.results) {
    w.u64(g.request);
    w.u32(g.slot);
    w.u32s(g.tokens);
    w.u8(static_cast<uint8_t>(g.finish));
    w.u32(g.drafted);
    w.u32(g.accepted);
  }
  w.u32(d.slots_used);
  w.u64(d.prefill_us);
  w.u64(d.wait_us);
  w.u64(d.verify_us);
  w.u64(d.send_us);
  w.u64(d.bytes_sent);
  w.u64(d.bytes_received);
  w.u32(d.guesses);
  w.u32(d.guesses_used);
  w.u32(static_cast<uint32_t>(d.drafters.size()));
  for (const DrafterReport& r : d.drafters) {
    w.i32(r.rank);
    w.u32(r.slots_used);
    w.u64(r.settle_us);
    w.u64(r.draft_us);
    w.u64(r.device_to_host_bytes);
  }
  w.u32(d.handoffs);
  w.u64(d.device_to_host_bytes);
}

// A list count that `unit` bytes per entry (at least) can fit in what is left, else 0 and an error.
uint32_t entries(WireReader& r, const char* field, size_t unit) {
  const uint32_t n = r.u32(field);
  if (!r.failed() && uint64_t{n} * unit > r.left()) {
    r.fail(fmt::format("{}: {} entries exceed the {} bytes left", field, n, r.left()));
    return 0;
  }
  return r.failed() ? 0 : n;
}

Round read_round(WireReader& r) {
  Round m;
  m.round = r.u64("round");
  m.block = r.u32("block");
  m.releases = r.u32s("releases");
  m.moves.resize(entries(r, "moves", 12));
  for (GenMove& g : m.moves) {
    g.slot = r.u32("moves.slot");
    g.drafter = r.i32("moves.drafter");
    g.scratch = r.u32("moves.scratch");
  }
  m.admits.resize(entries(r, "admits", 40));
  for (GenAdmit& a : m.admits) {
    a.request = r.u64("admits.request");
    a.slot = r.u32("admits.slot");
    a.drafter = r.i32("admits.drafter");
    a.max_tokens = r.u32("admits.max_tokens");
    a.temperature = r.f32("admits.temperature");
    a.top_p = r.f32("admits.top_p");
    a.seed = r.u64("admits.seed");
    a.prompt = r.u32s("admits.prompt");
    a.stop_ids = r.u32s("admits.stop_ids");
  }
  m.drains.resize(entries(r, "drains", 4));
  for (int32_t& d : m.drains) d = r.i32("drains");
  return m;
}

RoundDone read_round_done(WireReader& r) {
  RoundDone d;
  d.round = r.u64("round");
  d.results.resize(entries(r, "results", 25));
  for (GenResult& g : d.results) {
    g.request = r.u64("results.request");
    g.slot = r.u32("results.slot");
    g.tokens = r.u32s("results.tokens");
    const uint8_t finish = r.u8("results.finish");
    if (!r.failed() && finish > static_cast<uint8_t>(GenFinish::kStop)) {
      r.fail(fmt::format("results.finish: {} is not 0 (none), 1 (length) or 2 (stop)", finish));
    }
    g.finish = static_cast<GenFinish>(finish);
    g.drafted = r.u32("results.drafted");
    g.accepted = r.u32("results.accepted");
    if (!r.failed() && g.accepted > g.drafted) {
      r.fail(fmt::format("results.accepted: {} of {} drafts", g.accepted, g.drafted));
    }
  }
  d.slots_used = r.u32("slots_used");
  d.prefill_us = r.u64("prefill_us");
  d.wait_us = r.u64("wait_us");
  d.verify_us = r.u64("verify_us");
  d.send_us = r.u64("send_us");
  d.bytes_sent = r.u64("bytes_sent");
  d.bytes_received = r.u64("bytes_received");
  d.guesses = r.u32("guesses");
  d.guesses_used = r.u32("guesses_used");
  d.drafters.resize(entries(r, "drafters", 32));
  for (DrafterReport& p : d.drafters) {
    p.rank = r.i32("drafters.rank");
    p.slots_used = r.u32("drafters.slots_used");
    p.settle_us = r.u64("drafters.settle_us");
    p.draft_us = r.u64("drafters.draft_us");
    p.device_to_host_bytes = r.u64("drafters.device_to_host_bytes");
  }
  d.handoffs = r.u32("handoffs");
  d.device_to_host_bytes = r.u64("device_to_host_bytes");
  return d;
}

void write_body(WireWriter& w, const Message& m) {
  std::visit(Overloaded{
                 [&](const RunBatch& r) {
                   w.u64(r.batch_id);
                   w.u32s(r.batch.ids);
                   w.u32s(r.batch.cu);
                   w.u32s(r.batch.picks);
                   w.u32s(r.batch.pcu);
                   w.u8s(r.batch.qtype);
                 },
                 [&](const Shutdown&) {},
                 [&](const Abort& a) { w.string(a.reason); },
                 [&](const Round& r) { write_round(w, r); },
                 [&](const PeerLost& p) {
                   w.i32(p.rank);
                   w.string(p.why);
                 },
                 [&](const Ready& r) {
                   w.string(r.role);
                   w.string(r.model);
                   w.string(r.backend);
                   w.string(r.device);
                   w.u64(r.weight_bytes);
                   w.u64(r.plan_bytes);
                   w.u32(r.vocab);
                   w.u32(r.slots);
                   w.u32(r.capacity);
                   w.u32(r.block);
                   w.u32(r.max_context);
                   w.u64(r.state_bytes);
                 },
                 [&](const LoadFailed& f) { w.string(f.message); },
                 [&](const BatchDone& d) {
                   w.u64(d.batch_id);
                   w.u64(d.run_us);
                   w.u32(d.bucket.tokens);
                   w.u32(d.bucket.seqs);
                   w.u32(d.bucket.picks);
                   w.f32s(d.logits);
                   w.u32(static_cast<uint32_t>(d.act.size()));
                   for (const auto& a : d.act) {
                     w.f32(a[0]);
                     w.f32(a[1]);
                   }
                 },
                 [&](const BatchFailed& f) {
                   w.u64(f.batch_id);
                   w.string(f.message);
                 },
                 [&](const Bye&) {},
                 [&](const RoundDone& d) { write_round_done(w, d); },
                 [&](const RoundFailed& f) {
                   w.u64(f.round);
                   w.string(f.message);
                 },
                 [&](const Heartbeat& h) { w.u64(h.seq); },
             },
             m);
}

Result<Message> read_body(MessageKind kind, WireReader& r) {
  switch (kind) {
    case MessageKind::kRunBatch: {
      RunBatch m;
      m.batch_id = r.u64("batch_id");
      m.batch.ids = r.u32s("ids");
      m.batch.cu = r.u32s("cu");
      m.batch.picks = r.u32s("picks");
      m.batch.pcu = r.u32s("pcu");
      m.batch.qtype = r.u8s("qtype");
      if (!r.failed()) {
        // Structure only (offsets, picks inside their sequences); the worker checks ids against its
        // model's vocabulary when it runs the batch.
        ir::BatchLimits limits;
        limits.vocab = std::numeric_limits<uint32_t>::max();
        Status s = ir::check(m.batch, limits);
        if (!s.ok()) r.fail(s.error().message());
      }
      return Message(std::move(m));
    }
    case MessageKind::kShutdown: return Message(Shutdown{});
    case MessageKind::kAbort: return Message(Abort{r.string("reason")});
    case MessageKind::kRound: return Message(read_round(r));
    case MessageKind::kPeerLost: {
      PeerLost m;
      m.rank = r.i32("rank");
      m.why = r.string("why");
      return Message(std::move(m));
    }
    case MessageKind::kReady: {
      Ready m;
      m.role = r.string("role");
      m.model = r.string("model");
      m.backend = r.string("backend");
      m.device = r.string("device");
      m.weight_bytes = r.u64("weight_bytes");
      m.plan_bytes = r.u64("plan_bytes");
      m.vocab = r.u32("vocab");
      m.slots = r.u32("slots");
      m.capacity = r.u32("capacity");
      m.block = r.u32("block");
      m.max_context = r.u32("max_context");
      m.state_bytes = r.u64("state_bytes");
      return Message(std::move(m));
    }
    case MessageKind::kLoadFailed: return Message(LoadFailed{r.string("message")});
    case MessageKind::kBatchDone: {
      BatchDone m;
      m.batch_id = r.u64("batch_id");
      m.run_us = r.u64("run_us");
      m.bucket.tokens = r.u32("bucket.tokens");
      m.bucket.seqs = r.u32("bucket.seqs");
      m.bucket.picks = r.u32("bucket.picks");
      m.logits = r.f32s("logits");
      const uint32_t pairs = r.u32("act");
      if (!r.failed() && uint64_t{pairs} * 8 > r.left()) {
        r.fail(fmt::format("act: length {} exceeds the {} bytes left", pairs, r.left()));
      } else if (!r.failed()) {
        m.act.resize(pairs);
        for (auto& a : m.act) {
          a[0] = r.f32("act");
          a[1] = r.f32("act");
        }
      }
      return Message(std::move(m));
    }
    case MessageKind::kBatchFailed: {
      BatchFailed m;
      m.batch_id = r.u64("batch_id");
      m.message = r.string("message");
      return Message(std::move(m));
    }
    case MessageKind::kBye: return Message(Bye{});
    case MessageKind::kRoundDone: return Message(read_round_done(r));
    case MessageKind::kRoundFailed: {
      RoundFailed m;
      m.round = r.u64("round");
      m.message = r.string("message");
      return Message(std::move(m));
    }
    case MessageKind::kHeartbeat: return Message(Heartbeat{r.u64("seq")});
  }
  return Error::make(ErrorKind::kFormat, "message kind {} is unknown", static_cast<unsigned>(kind));
}

bool kind_allowed(MessageKind kind, Tag tag) {
  switch (tag) {
    case Tag::kCommand:
      return kind == MessageKind::kRunBatch || kind == MessageKind::kShutdown || kind == MessageKind::kAbort ||
             kind == MessageKind::kRound || kind == MessageKind::kPeerLost;
    case Tag::kCoordinatorBeat:
    case Tag::kWorkerBeat: return kind == MessageKind::kHeartbeat;
    case Tag::kStatus:
      return kind == MessageKind::kReady || kind == MessageKind::kLoadFailed || kind == MessageKind::kBye;
    case Tag::kResult:
      return kind == MessageKind::kBatchDone || kind == MessageKind::kBatchFailed ||
             kind == MessageKind::kRoundDone || kind == MessageKind::kRoundFailed;
    case Tag::kPeerData: return false;  // data-plane frames are engine/comm's, never control messages
  }
  return false;
}

bool known_kind(uint16_t kind) {
  switch (static_cast<MessageKind>(kind)) {
    case MessageKind::kRunBatch:
    case MessageKind::kShutdown:
    case MessageKind::kAbort:
    case MessageKind::kRound:
    case MessageKind::kPeerLost:
    case MessageKind::kReady:
    case MessageKind::kLoadFailed:
    case MessageKind::kBatchDone:
    case MessageKind::kBatchFailed:
    case MessageKind::kBye:
    case MessageKind::kRoundDone:
    case MessageKind::kRoundFailed:
    case MessageKind::kHeartbeat: return true;
  }
  return false;
}

}  // namespace

const char* to_string(Tag tag) {
  switch (tag) {
    case Tag::kCommand: return "command";
    case Tag::kCoordinatorBeat: return "coordinator-heartbeat";
    case Tag::kStatus: return "status";
    case Tag::kResult: return "result";
    case Tag::kWorkerBeat: return "worker-heartbeat";
    case Tag::kPeerData: return "peer-data";
  }
  return "unknown";
}

const char* to_string(MessageKind kind) {
  switch (kind) {
    case MessageKind::kRunBatch: return "RunBatch";
    case MessageKind::kShutdown: return "Shutdown";
    case MessageKind::kAbort: return "Abort";
    case MessageKind::kRound: return "Round";
    case MessageKind::kPeerLost: return "PeerLost";
    case MessageKind::kReady: return "Ready";
    case MessageKind::kLoadFailed: return "LoadFailed";
    case MessageKind::kBatchDone: return "BatchDone";
    case MessageKind::kBatchFailed: return "BatchFailed";
    case MessageKind::kBye: return "Bye";
    case MessageKind::kRoundDone: return "RoundDone";
    case MessageKind::kRoundFailed: return "RoundFailed";
    case MessageKind::kHeartbeat: return "Heartbeat";
  }
  return "unknown";
}

MessageKind kind_of(const Message& m) {
  return std::visit(Overloaded{
                        [](const RunBatch&) { return MessageKind::kRunBatch; },
                        [](const Shutdown&) { return MessageKind::kShutdown; },
                        [](const Abort&) { return MessageKind::kAbort; },
                        [](const Round&) { return MessageKind::kRound; },
                        [](const PeerLost&) { return MessageKind::kPeerLost; },
                        [](const Ready&) { return MessageKind::kReady; },
                        [](const LoadFailed&) { return MessageKind::kLoadFailed; },
                        [](const BatchDone&) { return MessageKind::kBatchDone; },
                        [](const BatchFailed&) { return MessageKind::kBatchFailed; },
                        [](const Bye&) { return MessageKind::kBye; },
                        [](const RoundDone&) { return MessageKind::kRoundDone; },
                        [](const RoundFailed&) { return MessageKind::kRoundFailed; },
                        [](const Heartbeat&) { return MessageKind::kHeartbeat; },
                    },
                    m);
}

Tag tag_for(const Message& m, bool from_coordinator) {
  switch (kind_of(m)) {
    case MessageKind::kRunBatch:
    case MessageKind::kShutdown:
    case MessageKind::kAbort:
    case MessageKind::kRound:
    case MessageKind::kPeerLost: return Tag::kCommand;
    case MessageKind::kReady:
    case MessageKind::kLoadFailed:
    case MessageKind::kBye: return Tag::kStatus;
    case MessageKind::kBatchDone:
    case MessageKind::kBatchFailed:
    case MessageKind::kRoundDone:
    case MessageKind::kRoundFailed: return Tag::kResult;
    case MessageKind::kHeartbeat: return from_coordinator ? Tag::kCoordinatorBeat : Tag::kWorkerBeat;
  }
  return Tag::kStatus;
}

std::vector<uint8_t> encode(const Message& m) {
  WireWriter w;
  w.u32(kProtocolMagic);
  w.u16(kProtocolVersion);
  w.u16(static_cast<uint16_t>(kind_of(m)));
  w.u32(0);  // body size, patched below
  write_body(w, m);
  std::vector<uint8_t>& bytes = w.bytes();
  const auto body = static_cast<uint32_t>(bytes.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) bytes[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(body >> (8 * i));
  return std::move(bytes);
}

Result<Message> decode(std::span<const uint8_t> frame, Tag tag) {
  auto bad = [&](std::string what) {
    return Error::make(ErrorKind::kFormat, "malformed control message on tag {} ({} bytes): {}", to_string(tag),
                       frame.size(), what);
  };
  if (frame.size() < kFrameHeaderBytes) return bad("shorter than the 12-byte header");
  if (frame.size() > kMaxFrameBytes) return bad("larger than the 1 GiB limit");
  WireReader r(frame);
  const uint32_t magic = r.u32("magic");
  const uint16_t version = r.u16("version");
  const uint16_t kind = r.u16("kind");
  const uint32_t body = r.u32("body size");
  if (magic != kProtocolMagic) return bad(fmt::format("magic {:#010x} is not {:#010x}", magic, kProtocolMagic));
  if (version != kProtocolVersion) {
    return bad(fmt::format("protocol version {} is not this build's {}", version, kProtocolVersion));
  }
  if (body != frame.size() - kFrameHeaderBytes) {
    return bad(fmt::format("header says {} body bytes, the frame has {}", body, frame.size() - kFrameHeaderBytes));
  }
  if (!known_kind(kind)) return bad(fmt::format("message kind {} is unknown", kind));
  const auto k = static_cast<MessageKind>(kind);
  if (!kind_allowed(k, tag)) return bad(fmt::format("a {} message may not travel on this tag", to_string(k)));
  TANDEM_ASSIGN(Message m, read_body(k, r));
  if (r.failed()) return bad(fmt::format("{}: {}", to_string(k), r.error()));
  if (r.left() != 0) return bad(fmt::format("{}: {} bytes left over after the last field", to_string(k), r.left()));
  return m;
}

}  // namespace tandem::worker
