// Topology (topology.h).
#include "worker/topology.h"

#include <fmt/format.h>


namespace tandem::worker {

Result<Topology> Topology::make(const config::Deployment& d, int rank, int size) {
  if (size != static_cast<int>(d.ranks.size())) {
    std::string roles;
    for (const auto& r : d.ranks) roles += (roles.empty() ? "" : ", ") + std::string(config::to_string(r.role));
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: 'ranks' lists {} ranks ({}) but the job has {}; start it with mpirun -np {}", d.origin,
                       d.ranks.size(), roles, size, d.ranks.size());
  }
  if (rank < 0 || rank >= size) {
    return Error::make(ErrorKind::kInternal, "MPI rank {} is outside the job of {}", rank, size);
  }
  if (d.ranks[kCoordinatorRank].role != config::Role::kCoordinator) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: ranks[{}] must be the coordinator", d.origin,
                       kCoordinatorRank);
  }
  return Topology(d.ranks, rank);
}

std::vector<int> Topology::workers() const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r) {
    if (r != kCoordinatorRank) out.push_back(r);
  }
  return out;
}

std::vector<int> Topology::ranks_with(config::Role role) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r) {
    if (role_of(r) == role) out.push_back(r);
  }
  return out;
}

std::string Topology::describe(int rank) const {
  if (rank < 0 || rank >= size()) return fmt::format("rank {}", rank);
  const config::Rank& r = config_of(rank);
  if (r.role == config::Role::kCoordinator) return fmt::format("rank {} (coordinator)", rank);
  const std::string where = r.backend.name == "cuda" ? fmt::format("cuda:{}", r.backend.device) : r.backend.name;
  return fmt::format("rank {} ({}, {})", rank, config::to_string(r.role), where);
}

}  // namespace tandem::worker
