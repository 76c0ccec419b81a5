// RankTable: the coordinator's picture of its workers (state, last heartbeat, what they loaded) and of
// the batches in flight on each. The control-plane thread writes it; the batcher asks it for the least
// loaded scorer with room and waits on it; /health, /v1/models and /metrics read it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/job.h"
#include "engine/ir/bucket.h"
#include "worker/worker.h"

namespace tandem::coordinator {

enum class RankState : uint8_t { kStarting, kReady, kLoadFailed, kDead, kGone };
const char* to_string(RankState state);

struct InflightBatch {
  uint64_t id = 0;
  int rank = -1;
  std::vector<WorkItem> items;
  uint32_t tokens = 0;
  uint32_t markers = 0;
  ir::Bucket bucket;
  Clock::time_point sent;
};

struct RankView {
  int rank = 0;
  std::string name;  // Topology::describe
  config::Role role = config::Role::kScorer;
  RankState state = RankState::kStarting;
  std::string detail;  // why it is not ready
  worker::Ready info;
  uint32_t inflight_batches = 0;
  uint64_t inflight_tokens = 0;
};

class RankTable {
 public:
  RankTable(const worker::Topology& topology, uint32_t max_inflight_per_rank);

  // ---- control plane ----
  void beat(int rank);
  void set_ready(int rank, worker::Ready info);
  void set_load_failed(int rank, std::string why);
  void set_gone(int rank);
  // Marks a rank dead and hands back its batches in flight, for the caller to fail.
  std::vector<InflightBatch> set_dead(int rank, std::string why);
  // Every batch in flight on any rank, removed from the table (a stopping job fails them).
  std::vector<InflightBatch> take_all_inflight();
  // The batch a result answers, removed from the table; nullopt if unknown (late or duplicate).
  std::optional<InflightBatch> finish(int rank, uint64_t batch_id);
  // Ranks (starting or ready) whose last heartbeat is older than `cutoff`, with its age.
  std::vector<std::pair<int, Clock::duration>> silent(Clock::time_point cutoff) const;

  // ---- batcher ----
  // The least loaded ready scorer with room, waiting for one until `until` or notify(); nullopt if none.
  std::optional<int> wait_for_room(Clock::time_point until);
  // Registers a batch on its rank; false (nothing registered) if the rank is no longer ready.
  bool dispatch(InflightBatch batch);
  bool any_scorer_alive() const;
  void notify();

  // ---- readers ----
  std::vector<RankView> view() const;
  bool all_ready() const;
  uint32_t inflight_batches() const;  // over all ranks
  // Why the job is not healthy ("rank 2 (scorer, cpu) is dead: no heartbeat for 1512 ms"); nullopt if it is.
  std::optional<std::string> problem() const;

 private:
  struct Entry {
    RankView view;
    Clock::time_point last_beat;
    std::map<uint64_t, InflightBatch> inflight;
    // Moves every in-flight batch to `out` and zeroes the rank's load.
    void take_inflight(std::vector<InflightBatch>& out);
  };
  std::optional<int> least_loaded_locked() const;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> ranks_;  // index = MPI rank; the coordinator's own entry is kReady, never used
  uint32_t max_inflight_;
};

}  // namespace tandem::coordinator
