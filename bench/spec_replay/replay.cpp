// The replay drafter (replay.h): the acceptance schedule, the greedy continuations and the draft rewrite.
#include "bench/spec_replay/replay.h"

#include <cmath>

namespace tandem::bench {

Result<ReplaySchedule> ReplaySchedule::make(double mean, uint32_t block) {
  if (block < 2) return Error::make(ErrorKind::kInvalidArgument, "replay block size {} must be at least 2", block);
  if (!std::isfinite(mean) || mean < 1.0 || mean > static_cast<double>(block)) {
    return Error::make(ErrorKind::kInvalidArgument, "replay acceptance {} must be in [1, {}] (the block size)", mean,
                       block);
  }
  return ReplaySchedule(mean, block);
}

uint32_t ReplaySchedule::length(uint32_t round) const {
  // floor((k + 1) · mean) − floor(k · mean): the running sum never falls a whole token behind k · mean.
  const double k = static_cast<double>(round);
  const auto len = static_cast<uint32_t>(std::floor((k + 1.0) * mean_) - std::floor(k * mean_));
  return std::min(std::max(len, 1u), block_);
}

Result<std::vector<std::vector<uint32_t>>> greedy_continuations(models::qwen3::Target& target,
                                                                std::span<const spec::RequestParams> params,
                                                                uint32_t tokens,
                                                                const std::function<Status()>& step_done) {
  std::vector<spec::Request> requests;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].sampling.temperature != 0.0f) {
      return Error::make(ErrorKind::kInvalidArgument, "replay request {}: temperature {} (a replay is greedy)", i,
                         params[i].sampling.temperature);
    }
    spec::RequestParams p = params[i];
    p.max_tokens = tokens;
    p.stop_ids.clear();
    TANDEM_ASSIGN(spec::Request r, spec::make_request(std::move(p), static_cast<uint32_t>(i), target.vocab()));
    requests.push_back(std::move(r));
  }
  std::vector<spec::Request*> ptrs;
  for (spec::Request& r : requests) ptrs.push_back(&r);
  const spec::TapRoute route =
      target.backend().caps().name == "cpu" ? spec::TapRoute::kHost : spec::TapRoute::kDevice;
  TANDEM_TRY(spec::prefill(target, ptrs, route));
  if (step_done) TANDEM_TRY(step_done());
  const std::vector<spec::Draft> none(ptrs.size());
  // Every request has the same max_tokens and no stop ids, so all finish in the same step.
  while (!ptrs.empty() && ptrs.front()->active()) {
    for (spec::Request* r : ptrs) {
      r->taps.clear();
      r->device_taps = {};
      r->settled = r->start;
    }
    TANDEM_TRY(spec::verify(target, ptrs, none, spec::VerifyMode::kMatch, false, route));
    if (step_done) TANDEM_TRY(step_done());
  }
  std::vector<std::vector<uint32_t>> out;
  for (const spec::Request& r : requests) out.emplace_back(r.generated().begin(), r.generated().end());
  return out;
}

Result<uint32_t> replay_drafts(const ReplaySchedule& schedule, std::span<spec::Request* const> requests,
                               std::span<const std::vector<uint32_t>> continuations, uint32_t vocab,
                               std::vector<spec::Draft>& drafts) {
  if (continuations.size() != requests.size() || drafts.size() != requests.size()) {
    return Error::make(ErrorKind::kInvalidArgument, "replay: {} continuations and {} drafts for {} requests",
                       continuations.size(), drafts.size(), requests.size());
  }
  uint32_t diverged = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const spec::Request& r = *requests[i];
    const std::vector<uint32_t>& c = continuations[i];
    const uint32_t drafted = schedule.block() - 1, len = schedule.length(r.rounds);
    // Continuation index k is position prompt_len + k; the block's draft j fills position start + j.
    const size_t base = size_t{r.start} - r.prompt_len;
    if (base + drafted >= c.size()) {
      return Error::make(ErrorKind::kInvalidArgument, "replay of slot {}: the round drafts positions up to {} but the "
                         "continuation ends at {}", r.slot, r.start + drafted, r.prompt_len + c.size() - 1);
    }
    if (r.tokens.back() != c[base]) ++diverged;
    spec::Draft d;
    for (uint32_t j = 1; j <= drafted; ++j) {
      const uint32_t next = c[base + j];
      // Draft `len` is the first the target must refuse: anything but its greedy pick there.
      d.tokens.push_back(j == len ? (next + 1) % vocab : next);
    }
    drafts[i] = std::move(d);
  }
  return diverged;
}

}  // namespace tandem::bench
