// Topology: who is who in the job, built once from the deployment and MPI's rank and size (style.md
// "Ranks"). It alone knows which rank is the coordinator; everything else asks it for roles, devices
// and peers.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "engine/core/result.h"

namespace tandem::worker {

class Topology {
 public:
  // Fails, naming the deployment file and both counts, when the job's size differs from its ranks.
  static Result<Topology> make(const config::Deployment& deployment, int rank, int size);
  // Whether `rank` reports job-wide errors (before a Topology exists, e.g. a bad YAML file).
  static bool reports_errors(int rank) { return rank == kCoordinatorRank; }

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  config::Role role() const { return ranks_[static_cast<size_t>(rank_)].role; }
  config::Role role_of(int rank) const { return ranks_[static_cast<size_t>(rank)].role; }
  bool is_coordinator() const { return rank_ == kCoordinatorRank; }
  int coordinator() const { return kCoordinatorRank; }
  const config::Rank& config() const { return ranks_[static_cast<size_t>(rank_)]; }
  const config::Rank& config_of(int rank) const { return ranks_[static_cast<size_t>(rank)]; }
  std::vector<int> workers() const;
  std::vector<int> ranks_with(config::Role role) const;
  // "rank 2 (scorer, cpu)", "rank 1 (scorer, cuda:0)", "rank 0 (coordinator)".
  std::string describe(int rank) const;

 private:
  static constexpr int kCoordinatorRank = 0;
  Topology(std::vector<config::Rank> ranks, int rank) : ranks_(std::move(ranks)), rank_(rank) {}
  std::vector<config::Rank> ranks_;
  int rank_ = 0;
};

}  // namespace tandem::worker
