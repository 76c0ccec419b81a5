// The RoundScheduler's state (round_scheduler.h), shared by its two halves: round_scheduler.cpp (events,
// admissions, rounds) and drafter_drain.cpp (taking drafter ranks out of service, the drafter views).
// Everything lives on the "rounds" thread under `mutex`. Internal to coordinator/.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "coordinator/round_scheduler.h"

namespace tandem::coordinator {

struct RoundScheduler::Impl {
  struct Entry {
    uint64_t id = 0;
    GenerationRequest request;
    GenerationCallback callback;
    int rank = -1;  // -1 while queued
    uint32_t slot = 0;
    int drafter = -1;  // the rank drafting for it; -1: plain decoding
    bool moved = false;  // its drafter died or was drained and another one took it over
    bool cancelled = false;
    bool prefilled = false;
    SpeculativeStats stats;
  };

  // A request changing drafter, not sent yet. A rebuild (its drafter died) waits for a free slot (the
  // target recomputes the tap rows there), which schedule() keeps from admissions; a hand-over (its
  // drafter is drained, alive) goes with the next round, with the drained rank in Round::drains.
  struct Move {
    uint64_t id = 0;
    int to = -1;  // the new drafter; -1: plain decoding
    bool handoff = false;
  };

  struct TargetRank {
    TargetRankView view;
    std::string name;
    uint32_t block = 0;        // the rank's block size (Ready)
    uint32_t max_context = 0;
    uint32_t vocab = 0;
    bool in_flight = false;
    uint64_t round = 0;
    std::vector<int> drafters;  // a generator: itself; a target: its drafter ranks
    std::map<uint32_t, std::shared_ptr<Entry>> slots;  // occupied slots
    std::map<uint32_t, Move> moves;                    // by slot
    std::set<int> drains;            // drained drafters the next round names (Round::drains)
    std::vector<int> drains_sent;    // those the round in flight names
    bool rebuilds_pending() const {
      for (const auto& [slot, m] : moves) {
        if (!m.handoff) return true;
      }
      return false;
    }
  };

  struct Submitted {
    std::shared_ptr<Entry> entry;
  };
  struct Cancel {
    uint64_t id = 0;
  };
  struct Ready {
    int rank = -1;
    worker::Ready ready;
  };
  struct Done {
    int rank = -1;
    worker::RoundDone done;
  };
  struct Failed {
    int rank = -1;
    worker::RoundFailed failed;
  };
  struct Dead {
    int rank = -1;
    std::string why;
  };
  struct Stop {
    ApiError error;
  };
  struct Wake {};  // state changed outside the thread (a drain): schedule
  using Event = std::variant<Submitted, Cancel, Ready, Done, Failed, Dead, Stop, Wake>;

  Impl(const config::Deployment& d, const worker::Topology& t, worker::BlockingQueue<Dispatch>& o);

  // The live drafter of `t` in service with the fewest requests; -1 when there is none.
  int pick_drafter(const TargetRank& t) const;
  bool serving(int drafter) const;  // alive and not drained
  // Why `rank` cannot be drained or put back in service: not in the job or not a drafter rank (400), dead
  // (409); nullopt when it can.
  std::optional<ApiError> check_drafter(int rank) const;

  using Calls = std::vector<std::pair<GenerationCallback, GenerationEvent>>;

  void run();
  void handle(Event& e, Calls& calls);
  void schedule(Calls& calls);
  void send_round(TargetRank& rank, std::vector<std::shared_ptr<Entry>> admits);
  void finish(Entry& e, GenerationFinish f, std::optional<ApiError> error, Calls& calls, std::vector<uint32_t> tokens = {});
  void fail_rank(TargetRank& rank, const ApiError& error, Calls& calls);
  bool any_target_alive() const;
  // drafter_drain.cpp: a dead drafter's requests move to another drafter (rebuilt there); a drained one's
  // are handed over; a round that named drained drafters has ended (they are drained now).
  void on_drafter_dead(int rank);
  void drains_done(TargetRank& t);

  config::Generation generation;
  const worker::Topology& topology;
  worker::BlockingQueue<Dispatch>& outbox;
  worker::BlockingQueue<Event> events;
  std::thread thread;

  mutable std::mutex mutex;  // everything below
  std::map<int, TargetRank> ranks;
  std::map<int, bool> drafters_dead;  // drafter ranks (role drafter): whether declared dead
  std::map<int, DrainState> drain;    // drafter ranks taken out of service (absent: serving)
  std::map<int, uint64_t> drains;     // times each drafter rank was drained
  std::map<int, uint32_t> drafter_slots;  // what each drafter (or generator) reported last
  std::deque<std::shared_ptr<Entry>> queue;
  size_t waiting = 0;  // submitted, not yet admitted nor ended (also those still in `events`)
  std::map<uint64_t, std::shared_ptr<Entry>> entries;  // queued or holding a slot
  uint64_t next_id = 1;
  std::optional<ApiError> stopped;
};

}  // namespace tandem::coordinator
