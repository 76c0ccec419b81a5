// The drafter rank's runner (batch_runner.h load_drafter): a DFlash drafter fed by its target rank over an
// engine/comm link. Per DraftAsk it settles each request's tap rows into the slot's context (from the
// link's device buffer on an NCCL link: no host copy) and drafts a block (none for a settling ask); it
// keeps, per slot, only what drafting needs (position, bonus token, sampling keys, with overlap the last
// tap row). Under verify: reject it samples drafts at temperature > 0 and sends their proposals q with
// them. With overlap it answers the drafts first, then guesses the next round (gen_messages.h Guess)
// while its target verifies (drafter_guesses.cpp). A drain moves contexts between drafters
// (context_messages.h, drafter_handover.cpp): it gives a slot's context K/V rows up, or takes them in.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

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
  // A drain's context move (context_messages.h): an ask gives each slot's context rows up (those whose
  // context is here whole; every asked slot is freed), rows from the target are taken in. `rows` gets
  // what goes back with the answer.
  ContextMessage hand_over(const comm::Packet& p, std::vector<float>& rows);
  // The slot holds no request from here on.
  void forget(uint32_t slot);
  // DraftReply::device_to_host_total: the backend's copies to the host and the link's received rows staged
  // there, since the rank started.
  uint64_t device_to_host_total() const;
  // Sends a reply with the running device-to-host total.
  Status send_reply(DraftReply& reply);
  // The guesses of the next round (gen_messages.h Guess) for the entries of `ask` that want them, after
  // `drafts` answered it: none where the entry verifies no drafts, has no tap row yet or no room left.
  DraftReply guess(const DraftAsk& ask, const DraftReply& drafts);
  // The tokens of guess blocks (anchored at each slot's context length, start + a): each row's argmax
  // with row 1 skipping d_{a+1} for a < n (v1), or the greedy selector walk, no guess where it picks
  // d_{a+1} (v2).
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
  std::map<uint32_t, spec::Request> mirrors_;  // by slot
  std::map<uint32_t, std::vector<float>> last_tap_;  // by slot: the last tap row settled there (overlap)
};

}  // namespace tandem::worker
