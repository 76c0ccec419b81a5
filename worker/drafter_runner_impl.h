// The drafter rank's runner (batch_runner.h load_drafter): a DFlash drafter fed by its target rank over an
// engine/comm link. Per DraftAsk it settles each request's tap rows into the slot's context (from the
// link's device buffer on an NCCL link: no host copy) and drafts a block (none for a settling ask); it
// keeps, per slot, only what drafting needs (position, bonus token, sampling keys, with overlap the last
// tap row, on its device). Under verify: reject it samples drafts at temperature > 0 and sends their
// proposals q with them: a v1 drafter's q rows as the reply's link rows, device to device. With overlap
// it answers the drafts first, then guesses the next round (gen_messages.h Guess) while its target
// verifies (drafter_guesses.cpp). A drain moves contexts between drafters
// (context_messages.h, drafter_handover.cpp): it gives a slot's context K/V rows up, or takes them in.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "engine/ir/row_buffer.h"

#include "engine/spec/spec.h"
#include "worker/batch_runner.h"
#include "worker/context_messages.h"
#include "worker/gen_messages.h"

namespace tandem::worker {

class DrafterRunner final : public RankRunner {
 public:
  DrafterRunner(std::string name, config::Generation generation, int target, std::unique_ptr<comm::Link> link)
      : name_(std::move(name)), generation_(std::move(generation)), target_rank_(target), link_(std::move(link)) {}

  Status load(const config::Model& target, const config::Model& drafter, const config::Backend& backend,
              const Stopping& stopping);
  RunnerInfo info() const override;
  void serve(Mailbox& mail, Outbox&, int) override;

 private:
  // The drafts of an ask; `decoded` gets the ask when it decodes.
  DraftReply answer(const comm::Packet& p, std::optional<DraftAsk>& decoded);
  Status run(const DraftAsk& ask, const comm::Packet& p, DraftReply& reply);
  // Entry `e`'s tap rows, rows [at, at + e.rows) of the message, into its mirror `m`: host rows, or a view
  // of the link's device rows (settled before the next receive).
  Status take_rows(const comm::Packet& p, uint32_t at, const DraftEntry& e, spec::Request& m);
  // Overlap: row `row` of the message becomes `slot`'s last tap row, copied into last_taps_ (guess()
  // settles it after later receives may have reused the link's buffer).
  Status keep_last_tap(uint32_t slot, const comm::Packet& p, uint32_t row);
  // The drafts of `drafting` (spec::draft). Under rejection sampling a v1 drafter samples them on its
  // device and leaves q there (spec::TapRoute::kDevice, as a generator does), one block run's worth at a
  // time; proposal_pieces_ gets their q rows in order (a run's copied into proposal_rows_ first when
  // another run follows, which would overwrite them).
  Status draft_blocks(std::span<spec::Request* const> drafting, uint32_t block, std::vector<spec::Draft>& drafts);
  // A drain's context move (context_messages.h): an ask gives each slot's context rows up (those whose
  // context is here whole; every asked slot is freed), rows from the target are taken in. `rows` gets
  // what goes back with the answer.
  ContextMessage hand_over(const comm::Packet& p, std::vector<float>& rows);
  // The slot holds no request from here on.
  void forget(uint32_t slot);
  // DraftReply::device_to_host_total: the backend's copies to the host and the link's received rows staged
  // there, since the rank was loaded (the warm-up's lowering, GEMM probes included, is not a round's).
  uint64_t device_to_host_total() const;
  // Sends a reply with the running device-to-host total, and with a draft reply its row proposals
  // (proposal_pieces_).
  Status send_reply(DraftReply& reply);
  // The guesses of the next round (gen_messages.h Guess) for the entries of `ask` that want them, after
  // `drafts` answered it: none where the entry verifies no drafts, has no tap row yet or no room left.
  DraftReply guess(const DraftAsk& ask, const DraftReply& drafts);
  // `slot`'s last tap row in last_taps_ (a slot of last_tap_slots_).
  ir::DeviceRows last_tap(uint32_t slot) const;
  // The tokens of guess blocks (anchored at each slot's context length, start + a): the greedy picks (v1
  // each row's argmax, v2 the selector walk), no guess where row 1 picks d_{a+1} for a < n (the target
  // rejected it there).
  template <typename P>
  Status guess_blocks(std::span<const models::dflash::BlockRows> blocks, uint32_t block, const std::vector<P*>& which,
                      uint32_t a, std::vector<std::vector<uint32_t>>& made);

  std::string name_;
  config::Generation generation_;
  int target_rank_;
  std::unique_ptr<comm::Link> link_;
  uint32_t capacity_ = 0;
  uint32_t block_ = 0;
  uint32_t vocab_ = 0;
  spec::VerifyMode mode_ = spec::VerifyMode::kMatch;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<models::dflash::Drafter> drafter_;
  uint64_t d2h_loading_ = 0;  // what loading copied to the host (device_to_host_total counts from there)
  std::map<uint32_t, spec::Request> mirrors_;  // by slot
  // Overlap: row `slot` holds the last tap row settled there, for the slots in last_tap_slots_.
  std::unique_ptr<ir::RowBuffer> last_taps_;
  std::set<uint32_t> last_tap_slots_;
  std::unique_ptr<ir::RowBuffer> proposal_rows_;   // v1 q rows of the ask's earlier block runs
  std::vector<ir::DeviceRows> proposal_pieces_;    // the last draft reply's row proposals, in entry order
};

}  // namespace tandem::worker
