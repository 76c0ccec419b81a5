// A drain on the target's side (remote_drafting_impl.h, context_messages.h): the drained drafter gives the
// contexts up, and they go on to each new drafter as they came, nothing recomputed.
#include "engine/core/log.h"
#include "worker/remote_drafting_impl.h"

namespace tandem::worker {

using Clock = std::chrono::steady_clock;

Status RemoteDrafting::hand_over(int from, std::span<Handoff> handoffs, uint64_t round,
                                 RoundDone& done) {
  if (!alive(from)) return ok_status();
  ContextMessage ask{ContextKind::kAsk, round, {}, 0};
  for (const Handoff& h : handoffs) {
    ask.entries.push_back({h.slot, h.length});
    guesses_.erase(h.slot);  // the new drafter drafts them from here on
  }
  auto rows = exchange(from, ask, comm::RowsOut::none(), ContextKind::kRows);
  if (!rows) return ok_status();
  done.drafters.push_back({from, rows->first.slots_used, 0, 0});
  // The links receive rows on the target's device (for the proposals q); a drain's context rows, rare,
  // come to the host here to be regrouped.
  const comm::Packet& p = rows->second;
  ir::Tensor2 fetched;
  if (p.on_device()) TANDEM_TRY(backend_.fetch(p.device, 0, p.rows, fetched));
  const std::span<const float> given = p.on_device() ? std::span<const float>(fetched.data) : p.data;
  // The rows go on to each new drafter as they came, grouped by drafter, in the order asked.
  std::map<int, std::pair<ContextMessage, std::vector<float>>> onward;
  const uint32_t width = p.width;
  size_t at = 0;
  for (size_t i = 0; i < handoffs.size(); ++i) {
    const ContextEntry& got = rows->first.entries[i];
    const size_t n = size_t{got.length} * width;
    const auto part = given.subspan(at, n);
    at += n;
    if (got.length != handoffs[i].length || handoffs[i].to == from || !alive(handoffs[i].to)) continue;
    if (got.length == 0) {  // nothing settled yet: its next ask starts the context on `to` afresh
      handoffs[i].moved = true;
      continue;
    }
    auto& [message, data] = onward[handoffs[i].to];
    message.kind = ContextKind::kRows;
    message.round = round;
    message.entries.push_back(got);
    data.insert(data.end(), part.begin(), part.end());
  }
  for (auto& [to, sent] : onward) {
    auto taken = exchange(to, sent.first, comm::RowsOut::of_host(sent.second, width), ContextKind::kTaken);
    if (!taken) continue;
    done.drafters.push_back({to, taken->first.slots_used, 0, 0});
    for (const ContextEntry& e : taken->first.entries) {
      for (Handoff& h : handoffs) {
        if (h.slot == e.slot && h.to == to && e.length == h.length) h.moved = true;
      }
    }
  }
  return ok_status();
}

std::optional<std::pair<ContextMessage, comm::Packet>> RemoteDrafting::exchange(int rank, const ContextMessage& m,
                                                                                const comm::RowsOut& rows,
                                                                                ContextKind want) {
  comm::Link& link = *links_.at(rank);
  auto failed = [&](const Error& e) -> std::optional<std::pair<ContextMessage, comm::Packet>> {
    log::warn("handing drafter contexts over in round {}: drafter rank {}: {}", m.round, rank, e.message());
    if (e.kind() == ErrorKind::kUnavailable || e.kind() == ErrorKind::kTimeout) lost(rank, e);
    return std::nullopt;
  };
  if (Status s = link.send(encode_context(m), rows); !s.ok()) return failed(s.error());
  const auto deadline = Clock::now() + wait_;
  for (;;) {
    auto p = link.recv(deadline);
    if (!p.ok()) return failed(p.error());
    if (!p->has_value()) {
      return failed(Error::make(ErrorKind::kTimeout, "no answer within {} ms", wait_.count()));
    }
    if (!is_context_message((*p)->header)) continue;  // a draft reply of a round that did not read it
    auto answer = decode_context((*p)->header, (*p)->rows, rank);
    if (!answer.ok()) return failed(answer.error());
    if (answer->round != 0 && answer->round < m.round) continue;  // a late answer to an earlier hand-over
    if (answer->round != m.round || answer->kind != want || answer->entries.size() != m.entries.size()) {
      return failed(Error::make(ErrorKind::kFormat, "it answered a context {} of {} entries for round {}",
                                to_string(answer->kind), answer->entries.size(), answer->round));
    }
    for (size_t i = 0; i < m.entries.size(); ++i) {
      if (answer->entries[i].slot != m.entries[i].slot || answer->entries[i].length > m.entries[i].length) {
        return failed(Error::make(ErrorKind::kFormat, "entries[{}]: slot {} with {} positions, asked slot {} with {}",
                                  i, answer->entries[i].slot, answer->entries[i].length, m.entries[i].slot,
                                  m.entries[i].length));
      }
    }
    return std::make_pair(std::move(answer).value(), std::move(**p));
  }
}

}  // namespace tandem::worker
