// The drafter rank's runner (batch_runner.h): a DFlash drafter fed by its target rank over an
// engine/comm link. Per DraftAsk it settles each request's tap rows into the slot's context and drafts
// a block; it keeps, per slot, only what drafting needs (position, bonus token, sampling keys).
#include <map>

#include <fmt/format.h>

#include "engine/backends/backend_factory.h"
#include "engine/core/log.h"
#include "engine/io/hf_config.h"
#include "engine/spec/spec.h"
#include "worker/batch_runner.h"
#include "worker/gen_messages.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t us_since(Clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
}

class DrafterRunner final : public RankRunner {
 public:
  DrafterRunner(std::string name, config::Generation generation, int target)
      : name_(std::move(name)), generation_(std::move(generation)), target_rank_(target) {}

  Status load(const config::Model& target, const config::Model& drafter, const config::Backend& backend) {
    TANDEM_ASSIGN(const io::Qwen3Config tcfg, io::load_qwen3_config(target.dir + "/config.json"));
    TANDEM_ASSIGN(const io::DFlashConfig dcfg, io::load_dflash_config(drafter.dir + "/config.json"));
    capacity_ = generation_.kv_capacity ? generation_.kv_capacity : tcfg.max_position_embeddings;
    block_ = generation_.block_size ? generation_.block_size : dcfg.block_size;
    vocab_ = tcfg.vocab_size;
    backends::BackendOptions options;
    options.name = backend.name;
    options.precision = backend.precision;
    options.device = backend.device;
    options.threads = backend.threads;
    TANDEM_ASSIGN(backend_, backends::make_backend(options));
    models::dflash::DrafterOptions dopt{generation_.slots, capacity_, block_, std::nullopt, nullptr};
    if (!drafter.quantization.empty()) {
      TANDEM_ASSIGN(dopt.quantization, models::dflash::parse_quantization(drafter.quantization));
    }
    TANDEM_ASSIGN(drafter_, models::dflash::Drafter::open(*backend_, drafter.dir, target.dir, dopt));
    return ok_status();
  }

  RunnerInfo info() const override {
    const ir::Caps caps = backend_->caps();
    RunnerInfo i{"drafter", name_, caps.name, caps.device, 0, 0, vocab_};
    i.slots = generation_.slots;
    i.capacity = capacity_;
    i.block = block_;
    return i;
  }

  void serve(Mailbox& mail, Outbox& out, int) override {
    auto link = comm::make_host_link(make_peer_pipe(mail, out, target_rank_));
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
      DraftReply reply = answer(**p);
      Status s = link->send(encode_reply(reply), comm::RowsOut::none());
      if (!s.ok()) log::error("drafter: answering round {}: {}", reply.round, s.error().message());
    }
  }

 private:
  DraftReply answer(const comm::Packet& p) {
    DraftReply reply;
    auto ask = decode_ask(p.header, p.rows, target_rank_);
    if (!ask.ok()) {
      log::error("drafter: {}", ask.error().message());
      return reply;  // round 0, no drafts: the target fails the round on the mismatch
    }
    reply.round = ask->round;
    for (uint32_t slot : ask->releases) mirrors_.erase(slot);
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
    }
    reply.slots_used = static_cast<uint32_t>(mirrors_.size());
    return reply;
  }

  Status run(const DraftAsk& ask, const comm::Packet& p, DraftReply& reply) {
    const uint32_t width = drafter_->tap_width();
    if (p.rows > 0 && p.width != width) {
      return Error::make(ErrorKind::kShape, "tap rows of width {}, the drafter takes {}", p.width, width);
    }
    std::vector<spec::Request*> requests;
    size_t at = 0;
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
      const size_t n = size_t{e.rows} * width;
      m.taps.assign(p.data.begin() + static_cast<std::ptrdiff_t>(at), p.data.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      requests.push_back(&m);
    }
    auto t0 = Clock::now();
    TANDEM_TRY(spec::settle(*drafter_, requests));
    reply.settle_us = us_since(t0);
    t0 = Clock::now();
    std::vector<spec::Draft> drafts;
    TANDEM_TRY(spec::draft(*drafter_, requests, ask.block, spec::VerifyMode::kMatch, drafts));
    reply.draft_us = us_since(t0);
    for (spec::Draft& d : drafts) reply.drafts.push_back(std::move(d.tokens));
    return ok_status();
  }

  std::string name_;
  config::Generation generation_;
  int target_rank_;
  uint32_t capacity_ = 0;
  uint32_t block_ = 0;
  uint32_t vocab_ = 0;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<models::dflash::Drafter> drafter_;
  std::map<uint32_t, spec::Request> mirrors_;  // by slot
};

}  // namespace

Result<std::unique_ptr<RankRunner>> load_drafter(const config::Model& target, const config::Model& drafter,
                                                 const config::Backend& backend,
                                                 const config::Generation& generation, int target_rank) {
  auto runner = std::make_unique<DrafterRunner>(drafter.name, generation, target_rank);
  Status s = runner->load(target, drafter, backend);
  if (!s.ok()) return std::move(s).error().context(fmt::format("loading drafter {} on {}", drafter.dir, backend.name));
  return std::unique_ptr<RankRunner>(std::move(runner));
}

}  // namespace tandem::worker
