// `tandem serve --config deploy.yaml`: one rank of a serving job (serving.md, architecture.md
// "Processes and ranks"). The Topology says which: the coordinator runs HTTP and the control plane,
// workers load their role's model and run batches. A job whose ranks are all alive ends with
// MPI_Finalize on every rank, also when it fails (a bad deployment every rank reads, a busy port, a
// worker that cannot load), so Open MPI adds nothing to the one line that says why; a job that lost a
// rank ends through MPI_Abort, because MPI_Finalize would wait forever for it. The coordinator's exit
// code also goes to --exit-file, since `mpirun --enable-recovery` (which the 503 grace period needs)
// reports 0 whatever the ranks returned (launch_command.cpp reads the file); under it every rank exits 0
// after an orderly end, which keeps mpirun quiet. Rank 0 stops on SIGINT, SIGTERM and SIGUSR1 (what
// `tandem launch` sends through mpirun, which forwards it to every rank); workers ignore all three.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "config/config.h"
#include "coordinator/coordinator.h"
#include "engine/core/log.h"
#include "launch/commands.h"
#include "launch/rank0_process.h"
#include "launch/stop_signals.h"
#include "worker/worker.h"

namespace tandem::launch {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop.store(true); }

struct ServeOptions {
  std::string config;
  std::string log_level = "info";
  std::string exit_file;
};

void write_exit_file(const std::string& path, int code) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  out << code << "\n";
}

int serve(const ServeOptions& options) {
  // Before anything else: SIGUSR1's default action would end the process.
  std::signal(SIGUSR1, on_stop_signal);
  // And before MPI starts its threads (they inherit this thread's mask).
  unblock_stop_signals();
  auto session = worker::MpiSession::init(nullptr, nullptr);
  if (!session.ok()) {
    std::fprintf(stderr, "tandem serve: %s\n", session.error().message().c_str());
    return 1;
  }
  worker::MpiSession& mpi = *session.value();
  const bool reporter = worker::Topology::reports_errors(mpi.rank());
  log::init(fmt::format("rank {}", mpi.rank()), options.log_level);
  // The process's code after an orderly MPI_Finalize: under `tandem launch` (an exit file) 0, since the
  // wrapper returns the file's code and mpirun --enable-recovery would only print noise for another.
  auto finish = [&](int code) {
    mpi.finalize();
    return options.exit_file.empty() ? code : 0;
  };
  // Every rank reads the file (one shared file system, or the same file on every node) and stops at the
  // same mistake; only rank 0 reports it, so it is said once, and all finalize together.
  auto fail = [&](const std::string& message, int code) {
    if (reporter) {
      log::error("{}", message);
      write_exit_file(options.exit_file, code);
    }
    return finish(code);
  };
  auto deployment = config::load_deployment(options.config);
  if (!deployment.ok()) return fail(deployment.error().message(), coordinator::kExitError);
  auto topology = worker::Topology::make(deployment.value(), mpi.rank(), mpi.size());
  if (!topology.ok()) return fail(topology.error().message(), coordinator::kExitError);
  const config::Deployment& d = deployment.value();
  const worker::Topology& topo = topology.value();
  auto buckets = config::serving_buckets(d);
  if (!buckets.ok()) return fail(buckets.error().message(), coordinator::kExitError);
  auto transport = worker::make_mpi_transport();

  if (topo.is_coordinator()) {
    if (!options.exit_file.empty()) write_rank0_file(options.exit_file);  // tandem launch stops the job through it
    // SIGUSR1 is how `tandem launch` stops the job (mpirun passes it on): if MPI's start took it, take it
    // back, and say so, since a stop that never arrives looks like a hang.
    if (!handles_signal(SIGUSR1, on_stop_signal)) {
      log::warn("MPI's start replaced rank 0's SIGUSR1 handler; restoring it, so that tandem launch can stop the job");
      std::signal(SIGUSR1, on_stop_signal);
    }
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    // A job serves scoring, generation or both: name the models it has (a generation-only job has no
    // scorer model).
    std::string served;
    size_t generation_ranks = 0;
    if (const config::Model* m = d.model(config::Role::kScorer)) served = m->name;
    if (const config::Model* m = d.model(config::Role::kTarget)) served += (served.empty() ? "" : " and ") + m->name;
    for (const config::Rank& r : d.ranks) generation_ranks += config::runs_target(r.role) ? 1 : 0;
    const coordinator::CoordinatorExit end = coordinator::run_coordinator(d, topo, *transport, g_stop, [&](uint16_t port) {
      std::printf("tandem: serving %s at http://%s:%u (%zu scorer ranks, %zu generation ranks)\n", served.c_str(),
                  d.server.host.c_str(), static_cast<unsigned>(port), topo.ranks_with(config::Role::kScorer).size(),
                  generation_ranks);
      std::fflush(stdout);
    });
    write_exit_file(options.exit_file, end.code);
    if (!end.orderly) mpi.abort(end.code);
    return finish(end.code);
  }

  // Workers stop when the coordinator says so (mpirun's signals reach them too).
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGUSR1, SIG_IGN);
  worker::RankFactory factory;
  const config::Backend backend = topo.config().backend;
  if (topo.role() == config::Role::kScorer) {
    const config::Model model = *d.model(config::Role::kScorer);
    factory = [model, backend, table = buckets.value()](worker::Mailbox& mail,
                                                        worker::Outbox&) -> Result<std::unique_ptr<worker::RankRunner>> {
      TANDEM_ASSIGN(auto runner, worker::load_scorer(model, backend, table, [&mail] { return mail.closed(); }));
      return worker::serve_batches(std::move(runner));
    };
  } else if (config::runs_target(topo.role()) || config::runs_drafter(topo.role())) {
    factory = worker::generation_rank_factory(d, topo);
  } else {
    const std::string role = config::to_string(topo.role());
    factory = [role](worker::Mailbox&, worker::Outbox&) -> Result<std::unique_ptr<worker::RankRunner>> {
      return Error::make(ErrorKind::kUnsupported, "role {} is not served yet", role);
    };
  }
  const int code = worker::run_worker(*transport, topo, d.health, std::move(factory));
  if (code != 0) mpi.abort(code);
  mpi.finalize();
  // The compute thread may still be loading (a goodbye during the load does not wait for it):
  // end without running static destructors under it.
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "run one rank of a serving job: mpirun -np N tandem serve --config F");
  cmd->add_option("--config", options->config, "deployment YAML")->required();
  cmd->add_option("--log-level", options->log_level, "trace, debug, info, warn, error or off");
  cmd->add_option("--exit-file", options->exit_file, "rank 0 writes its exit code here (tandem launch reads it)");
  cmd->callback([options, &exit_code] { exit_code = serve(*options); });
}

}  // namespace tandem::launch
