// A drafter rank's part of a drain (drafter_runner_impl.h, context_messages.h): it gives a slot's context
// K/V rows up to its target, or takes a moved context in, as the rows are.
#include "engine/core/log.h"
#include "worker/drafter_runner_impl.h"

namespace tandem::worker {

ContextMessage DrafterRunner::hand_over(const comm::Packet& p, std::vector<float>& rows) {
  ContextMessage answer;
  auto m = decode_context(p.header, p.rows, target_rank_);
  if (!m.ok() || m->kind == ContextKind::kTaken) {
    // Round 0: the target gives the move up and rebuilds or decodes those requests plainly.
    log::error("drafter: {}", m.ok() ? "a 'taken' context message is for the target" : m.error().message());
    answer.kind = ContextKind::kTaken;
    answer.slots_used = static_cast<uint32_t>(mirrors_.size());
    return answer;
  }
  answer.round = m->round;
  answer.kind = m->kind == ContextKind::kAsk ? ContextKind::kRows : ContextKind::kTaken;
  decode::CacheSlots& context = drafter_->context();
  bool fits = p.rows == 0 || p.width == context.row_width();
  if (!fits) log::error("drafter: context rows of width {}, this drafter's are {}", p.width, context.row_width());
  // Context rows go into the caches from the host (State::write_rows): rows the link left on the device
  // come over first (a drain's, rare).
  ir::Tensor2 fetched;
  if (fits && p.on_device()) {
    Status s = backend_->fetch(p.device, 0, p.rows, fetched);
    if (!s.ok()) log::error("drafter: fetching context rows: {}", s.error().message());
    fits = s.ok();
  }
  const std::span<const float> data = p.on_device() ? std::span<const float>(fetched.data) : p.data;
  size_t at = 0;
  for (const ContextEntry& e : m->entries) {
    ContextEntry out{e.slot, 0};
    if (m->kind == ContextKind::kAsk) {
      auto held = mirrors_.find(e.slot);
      std::vector<float> one;
      if (held != mirrors_.end() && held->second.settled == e.length) {
        Status s = context.export_rows(e.slot, e.length, one);
        if (s.ok()) {
          rows.insert(rows.end(), one.begin(), one.end());
          out.length = e.length;
        } else {
          log::error("drafter: handing slot {} over: {}", e.slot, s.error().message());
        }
      }
      forget(e.slot);
    } else {
      const size_t n = size_t{e.length} * context.row_width();
      forget(e.slot);  // whatever the slot held before
      Status s = fits && data.size() >= at + n
                     ? context.import_rows(e.slot, e.length, data.subspan(at, n))
                     : Status(Error(ErrorKind::kFormat, "the rows do not fit this drafter's context"));
      at += n;
      if (s.ok()) {
        spec::Request& r = mirrors_[e.slot];
        r.slot = e.slot;
        r.settled = e.length;
        out.length = e.length;
      } else {
        log::error("drafter: taking slot {} over: {}", e.slot, s.error().message());
      }
    }
    answer.entries.push_back(out);
  }
  answer.slots_used = static_cast<uint32_t>(mirrors_.size());
  return answer;
}

void DrafterRunner::forget(uint32_t slot) {
  mirrors_.erase(slot);
  last_tap_slots_.erase(slot);
  if (slot < drafter_->context().slots()) (void)drafter_->context().release(slot);
}

}  // namespace tandem::worker
