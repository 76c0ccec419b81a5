// The runner factories of the generation roles (batch_runner.h generation_rank_factory): a generator
// loads its target and drafter; a target first sets up one data-plane link per drafter rank paired with
// it, and a drafter its link to its target (NCCL between CUDA ranks, MPI otherwise), both before loading,
// since an NCCL set-up needs both ranks at once.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "engine/comm/data_link.h"
#include "worker/batch_runner.h"
#include "worker/mailbox.h"
#include "worker/topology.h"

namespace tandem::worker {
namespace {

// A rank's end of a data-plane link, from its backend in the YAML.
comm::LinkEnd link_end(const config::Backend& b) { return {b.name == "cuda", b.device}; }

// The data-plane link from `rank` to `peer` (NCCL between CUDA ranks, set up now; MPI otherwise).
Result<std::unique_ptr<comm::Link>> data_link(Mailbox& mail, Outbox& out, int rank, const config::Backend& self,
                                              int peer, const config::Backend& other) {
  auto link = comm::make_data_link(make_peer_pipe(mail, out, peer), rank, link_end(self), link_end(other),
                                   std::chrono::milliseconds(60000));
  if (!link.ok()) {
    return std::move(link).error().context(fmt::format("the data link from rank {} to rank {}", rank, peer));
  }
  return link;
}

}  // namespace

RankFactory generation_rank_factory(const config::Deployment& d, const Topology& topology) {
  const config::Model target = *d.model(config::Role::kTarget);
  const config::Model drafter = *d.model(config::Role::kDrafter);
  const config::Backend backend = topology.config().backend;
  const int rank = topology.rank();
  const config::Generation generation = d.generation;
  switch (topology.role()) {
    case config::Role::kGenerator:
      return [=](Mailbox& mail, Outbox&) {
        return load_generator(target, drafter, backend, generation, rank, [&mail] { return mail.closed(); });
      };
    case config::Role::kTarget: {
      std::map<int, config::Backend> drafters;  // by rank
      for (int r : topology.workers()) {
        if (topology.role_of(r) == config::Role::kDrafter && topology.config_of(r).target == rank) {
          drafters.emplace(r, topology.config_of(r).backend);
        }
      }
      // A drafter slower than this is as good as gone; a dead one is reported sooner (PeerLost).
      const auto wait = std::chrono::milliseconds(std::max<uint32_t>(10 * d.health.dead_after_ms, 60000));
      return [=](Mailbox& mail, Outbox& out) -> Result<std::unique_ptr<RankRunner>> {
        std::map<int, std::unique_ptr<comm::Link>> links;
        for (const auto& [r, other] : drafters) {
          TANDEM_ASSIGN(std::unique_ptr<comm::Link> link, data_link(mail, out, rank, backend, r, other));
          links.emplace(r, std::move(link));
        }
        return load_target(target, drafter, backend, generation, rank, std::move(links), wait,
                           [&mail] { return mail.closed(); });
      };
    }
    case config::Role::kDrafter: {
      const int target_rank = topology.config().target;
      const config::Backend other = topology.config_of(target_rank).backend;
      return [=](Mailbox& mail, Outbox& out) -> Result<std::unique_ptr<RankRunner>> {
        // Made before loading, as the target makes its links: an NCCL set-up needs both ranks at once.
        TANDEM_ASSIGN(std::unique_ptr<comm::Link> link, data_link(mail, out, rank, backend, target_rank, other));
        return load_drafter(target, drafter, backend, generation, target_rank, std::move(link),
                            [&mail] { return mail.closed(); });
      };
    }
    case config::Role::kCoordinator:
    case config::Role::kScorer: break;
  }
  const std::string role = config::to_string(topology.role());
  return [role](Mailbox&, Outbox&) -> Result<std::unique_ptr<RankRunner>> {
    return Error::make(ErrorKind::kInternal, "role {} does not generate", role);
  };
}

}  // namespace tandem::worker
