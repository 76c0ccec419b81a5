// The drafter rank's runner: load, the serve loop and the drafts of an ask (drafter_runner_impl.h).
#include <algorithm>

#include <fmt/format.h>

#include "engine/backends/backend_factory.h"
#include "engine/backends/row_buffers.h"
#include "engine/core/elapsed.h"
#include "engine/core/log.h"
#include "engine/io/hf_config.h"
#include "worker/drafter_runner_impl.h"

namespace tandem::worker {

using Clock = std::chrono::steady_clock;

Status DrafterRunner::load(const config::Model& target, const config::Model& drafter,
                           const config::Backend& backend, const Stopping& stopping) {
  TANDEM_ASSIGN(const io::Qwen3Config tcfg, io::load_qwen3_config(target.dir + "/config.json"));
  TANDEM_ASSIGN(const io::DFlashConfig dcfg, io::load_dflash_config(drafter.dir + "/config.json"));
  capacity_ = generation_.kv_capacity ? generation_.kv_capacity : tcfg.max_position_embeddings;
  block_ = generation_.block_size ? generation_.block_size : dcfg.block_size;
  vocab_ = tcfg.vocab_size;
  TANDEM_ASSIGN(backend_, make_rank_backend(backend));
  models::dflash::DrafterOptions dopt{generation_.slots, capacity_, block_, std::nullopt, nullptr};
  if (!drafter.quantization.empty()) {
    TANDEM_ASSIGN(dopt.quantization, models::dflash::parse_quantization(drafter.quantization));
  }
  TANDEM_ASSIGN(drafter_, models::dflash::Drafter::open(*backend_, drafter.dir, target.dir, dopt));
  // Tap rows settle from where the link receives them: an NCCL link's device buffer, no host copy.
  link_->receive_to_device(*backend_);
  mode_ = generation_.verify == config::Verify::kReject ? spec::VerifyMode::kReject : spec::VerifyMode::kMatch;
  if (generation_.warm_up) {  // as the target's (target_runner.cpp)
    const auto t0 = Clock::now();
    TANDEM_ASSIGN(const size_t plans, drafter_->prepare_rounds(generation_.slots, block_, stopping));
    log::info("drafter {}: warm-up lowered {} plans in {:.1f} s", name_, plans,
              std::chrono::duration<double>(Clock::now() - t0).count());
  }
  d2h_loading_ = device_to_host_total();
  return ok_status();
}

RunnerInfo DrafterRunner::info() const {
  const ir::Caps caps = backend_->caps();
  // Plans: those the warm-up lowered (later first uses add to them).
  RunnerInfo i{"drafter", name_, caps.name, caps.device, drafter_->weight_bytes(), drafter_->plan_bytes(), vocab_};
  i.state_bytes = drafter_->context().bytes();
  i.slots = generation_.slots;
  i.capacity = capacity_;
  i.block = block_;
  return i;
}

void DrafterRunner::serve(Mailbox& mail, Outbox&, int) {
  comm::Link* link = link_.get();
  for (;;) {
    auto p = link->recv(Clock::now() + std::chrono::milliseconds(200));
    if (!p.ok()) {
      // The rank is stopping, or its target is gone: nothing more to draft for.
      if (p.error().kind() != ErrorKind::kCancelled) log::warn("drafter: {}", p.error().message());
      return;
    }
    if (!p->has_value()) {
      if (mail.closed()) return;
      continue;
    }
    if (is_context_message((*p)->header)) {
      std::vector<float> rows;
      const ContextMessage answer = hand_over(**p, rows);
      Status s = link->send(encode_context(answer), comm::RowsOut::of_host(rows, drafter_->context().row_width()));
      if (!s.ok()) log::error("drafter: answering context message of round {}: {}", answer.round, s.error().message());
      continue;
    }
    std::optional<DraftAsk> ask;
    DraftReply reply = answer(**p, ask);
    Status s = send_reply(reply);
    if (!s.ok()) log::error("drafter: answering round {}: {}", reply.round, s.error().message());
    if (!ask || std::none_of(ask->entries.begin(), ask->entries.end(), [](const DraftEntry& e) { return e.guess; })) {
      continue;
    }
    DraftReply guesses = guess(*ask, reply);
    s = send_reply(guesses);
    if (!s.ok()) log::error("drafter: guessing past round {}: {}", guesses.round, s.error().message());
  }
}

DraftReply DrafterRunner::answer(const comm::Packet& p, std::optional<DraftAsk>& decoded) {
  DraftReply reply;
  auto ask = decode_ask(p.header, p.rows, target_rank_);
  if (!ask.ok()) {
    log::error("drafter: {}", ask.error().message());
    return reply;  // round 0, no drafts: the target fails the round on the mismatch
  }
  decoded = *ask;
  reply.round = ask->round;
  for (uint32_t slot : ask->releases) {
    mirrors_.erase(slot);
    last_tap_slots_.erase(slot);
  }
  if (ask->entries.empty()) {
    reply.slots_used = static_cast<uint32_t>(mirrors_.size());
    return reply;
  }
  Status s = run(*ask, p, reply);
  if (!s.ok()) {
    // The contexts of these slots are unknown now: they are dropped, and their requests get empty
    // drafts (plain decoding steps on the target) from here on, since no later ask can continue them.
    log::error("drafter: round {}: {}", ask->round, s.error().message());
    for (const DraftEntry& e : ask->entries) mirrors_.erase(e.slot);
    reply.drafts.assign(ask->entries.size(), {});
    reply.proposals.clear();
    reply.row_proposals.clear();
    proposal_pieces_.clear();
  }
  reply.slots_used = static_cast<uint32_t>(mirrors_.size());
  return reply;
}

Status DrafterRunner::run(const DraftAsk& ask, const comm::Packet& p, DraftReply& reply) {
  const uint32_t width = drafter_->tap_width();
  if (p.rows > 0 && p.width != width) {
    return Error::make(ErrorKind::kShape, "tap rows of width {}, the drafter takes {}", p.width, width);
  }
  std::vector<spec::Request*> requests;
  uint32_t at = 0;
  for (const DraftEntry& e : ask.entries) {
    if (e.slot >= generation_.slots) {
      return Error::make(ErrorKind::kInvalidArgument, "slot {} is past the drafter's {} slots", e.slot,
                         generation_.slots);
    }
    if (e.start + ask.block + 1 > capacity_) {
      return Error::make(ErrorKind::kCapacity, "slot {}: a block at {} passes the {} context positions", e.slot,
                         e.start, capacity_);
    }
    spec::Request& m = mirrors_[e.slot];
    if (e.settled == 0) {
      m = spec::Request{};
      m.slot = e.slot;
    } else if (m.settled != e.settled) {
      return Error::make(ErrorKind::kInvalidArgument, "slot {}: the context reaches {}, the ask continues from {}",
                         e.slot, m.settled, e.settled);
    }
    m.params.sampling = {e.temperature, 1.0f, e.seed};
    m.start = e.start;
    m.tokens.resize(size_t{e.start} + 1);
    m.tokens.back() = e.bonus;
    TANDEM_TRY(take_rows(p, at, e, m));
    at += e.rows;
    requests.push_back(&m);
  }
  auto t0 = Clock::now();
  TANDEM_TRY(spec::settle(*drafter_, requests));
  reply.settle_us = us_since(t0);
  t0 = Clock::now();
  // Only the entries that want a draft get one (the others verify a guess this round).
  std::vector<spec::Request*> drafting;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (ask.entries[i].wants_draft) drafting.push_back(requests[i]);
  }
  std::vector<spec::Draft> drafts;
  if (!drafting.empty()) TANDEM_TRY(draft_blocks(drafting, ask.block, drafts));
  reply.draft_us = us_since(t0);
  size_t k = 0;
  reply.drafts.resize(ask.entries.size());
  reply.proposals.resize(ask.entries.size());
  reply.row_proposals.assign(ask.entries.size(), 0);
  for (size_t i = 0; i < ask.entries.size(); ++i) {
    if (!ask.entries[i].wants_draft) continue;
    reply.drafts[i] = std::move(drafts[k].tokens);
    reply.proposals[i] = std::move(drafts[k].proposals);
    reply.row_proposals[i] = drafts[k].device.values.rows;
    ++k;
  }
  return ok_status();
}

Status DrafterRunner::draft_blocks(std::span<spec::Request* const> drafting, uint32_t block,
                                   std::vector<spec::Draft>& drafts) {
  if (mode_ != spec::VerifyMode::kReject || drafter_->version() != 1) {
    return spec::draft(*drafter_, drafting, block, mode_, drafts);
  }
  const size_t group = std::max<uint32_t>(drafter_->block_seqs(block), 1);
  const uint32_t width = drafter_->draft_vocab();
  if (drafting.size() > group &&
      (!proposal_rows_ || proposal_rows_->view().rows < drafting.size() * (block - 1))) {
    const auto rows = static_cast<uint32_t>(drafting.size()) * (block - 1);
    TANDEM_ASSIGN(proposal_rows_, backends::make_row_buffer(*backend_, rows, width, ir::Storage::kF32));
  }
  drafts.clear();
  uint32_t kept = 0;  // rows of proposal_rows_ in use
  for (size_t at = 0; at < drafting.size(); at += group) {
    std::vector<spec::Draft> made;
    TANDEM_TRY(spec::draft(*drafter_, drafting.subspan(at, std::min(group, drafting.size() - at)), block, mode_, made,
                           spec::TapRoute::kDevice));
    const bool last = at + group >= drafting.size();
    for (spec::Draft& d : made) {
      ir::DeviceRows& q = d.device.values;
      if (!d.device.empty() && !last) {
        TANDEM_TRY(proposal_rows_->copy(q, 0, q.rows, kept));
        ir::DeviceRows copied = proposal_rows_->view();
        // INVARIANT: rows [kept, kept + q.rows) of the buffer (the copy above checked them), f32 packed.
        copied.data = static_cast<const float*>(copied.data) + size_t{kept} * copied.stride;
        copied.rows = q.rows;
        kept += q.rows;
        q = copied;
      }
      if (!d.device.empty()) proposal_pieces_.push_back(q);
      drafts.push_back(std::move(d));
    }
  }
  return ok_status();
}

uint64_t DrafterRunner::device_to_host_total() const {
  return backends::device_to_host_bytes(*backend_).value_or(0) + link_->stats().rows_to_host_bytes - d2h_loading_;
}

Status DrafterRunner::send_reply(DraftReply& reply) {
  reply.device_to_host_total = device_to_host_total();
  if (reply.guess || proposal_pieces_.empty()) return link_->send(encode_reply(reply), comm::RowsOut::none());
  // The q rows go as they are (NCCL: device to device), before a guess's block run could overwrite them.
  Status s = link_->send(encode_reply(reply), comm::RowsOut::of_pieces(proposal_pieces_, drafter_->draft_vocab(),
                                                                       *backend_));
  proposal_pieces_.clear();
  return s;
}

Status DrafterRunner::take_rows(const comm::Packet& p, uint32_t at, const DraftEntry& e, spec::Request& m) {
  const uint32_t width = drafter_->tap_width();
  m.taps.clear();
  m.device_taps = {};
  if (e.rows == 0) return ok_status();
  if (uint64_t{at} + e.rows > p.rows) {
    return Error::make(ErrorKind::kInvalidArgument, "slot {}: rows [{}, {}) of a message of {} rows", e.slot, at,
                       uint64_t{at} + e.rows, p.rows);
  }
  // Sampled requests under rejection sampling never guess.
  const bool guesses = generation_.overlap && !(mode_ == spec::VerifyMode::kReject && e.temperature > 0.0f);
  if (!p.on_device()) {
    const auto first = p.data.begin() + static_cast<std::ptrdiff_t>(size_t{at} * width);
    m.taps.assign(first, first + static_cast<std::ptrdiff_t>(size_t{e.rows} * width));
  } else {
    m.device_taps = p.device;
    m.device_taps.data = static_cast<const uint8_t*>(p.device.data) +
                         size_t{at} * p.device.stride * ir::storage_bytes(p.device.storage);
    m.device_taps.rows = e.rows;
  }
  return guesses ? keep_last_tap(e.slot, p, at + e.rows - 1) : ok_status();
}

Status DrafterRunner::keep_last_tap(uint32_t slot, const comm::Packet& p, uint32_t row) {
  const uint32_t width = drafter_->tap_width();
  const ir::Storage storage = p.on_device() ? p.device.storage : ir::Storage::kF32;
  if (!last_taps_ || last_taps_->view().storage != storage) {
    // The first row kept, or rows of another storage than before: the slots' earlier rows go.
    TANDEM_ASSIGN(last_taps_, backends::make_row_buffer(*backend_, generation_.slots, width, storage));
    last_tap_slots_.clear();
  }
  // A device-to-device copy where the rows arrived there (an NCCL link's buffer); host rows are written.
  if (p.on_device()) {
    TANDEM_TRY(last_taps_->copy(p.device, row, 1, slot));
  } else {
    TANDEM_TRY(last_taps_->write(slot, std::span<const float>(p.data).subspan(size_t{row} * width, width)));
  }
  last_tap_slots_.insert(slot);
  return ok_status();
}

Result<std::unique_ptr<RankRunner>> load_drafter(const config::Model& target, const config::Model& drafter,
                                                 const config::Backend& backend,
                                                 const config::Generation& generation, int target_rank,
                                                 std::unique_ptr<comm::Link> link, const Stopping& stopping) {
  auto runner = std::make_unique<DrafterRunner>(drafter.name, generation, target_rank, std::move(link));
  Status s = runner->load(target, drafter, backend, stopping);
  if (!s.ok()) return std::move(s).error().context(fmt::format("loading drafter {} on {}", drafter.dir, backend.name));
  return std::unique_ptr<RankRunner>(std::move(runner));
}

}  // namespace tandem::worker
