// `tandem serve --config deploy.yaml`: one rank of a serving job (serving.md, architecture.md
// "Processes and ranks"). The Topology says which: the coordinator runs HTTP and the control plane,
// workers load their role's model and run batches. A failed job ends through MPI_Abort, because
// MPI_Finalize would wait forever for a dead rank; the coordinator's exit code also goes to
// --exit-file, since `mpirun --enable-recovery` (which the 503 grace period needs) reports 0 whatever
// the ranks returned (launch_command.cpp reads the file).

#include <csignal>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "config/config.h"
#include "coordinator/coordinator.h"
#include "engine/core/log.h"
#include "launch/commands.h"
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
  auto session = worker::MpiSession::init(nullptr, nullptr);
  if (!session.ok()) {
    std::fprintf(stderr, "tandem serve: %s\n", session.error().message().c_str());
    return 1;
  }
  worker::MpiSession& mpi = *session.value();
  const bool reporter = worker::Topology::reports_errors(mpi.rank());
  log::init(fmt::format("rank {}", mpi.rank()), options.log_level);
  // Every rank reads the file (one shared file system, or the same file on every node); only rank 0
  // reports a mistake in it, so it is said once.
  auto fail = [&](const std::string& message, int code) {
    if (reporter) {
      log::error("{}", message);
      write_exit_file(options.exit_file, code);
    }
    mpi.abort(code);
  };
  auto deployment = config::load_deployment(options.config);
  if (!deployment.ok()) fail(deployment.error().message(), coordinator::kExitError);
  auto topology = worker::Topology::make(deployment.value(), mpi.rank(), mpi.size());
  if (!topology.ok()) fail(topology.error().message(), coordinator::kExitError);
  const config::Deployment& d = deployment.value();
  const worker::Topology& topo = topology.value();
  auto transport = worker::make_mpi_transport();

  if (topo.is_coordinator()) {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    const int code = coordinator::run_coordinator(d, topo, *transport, g_stop, [&](uint16_t port) {
      std::printf("tandem: serving %s at http://%s:%u (%zu scorer ranks)\n", d.model(config::Role::kScorer)->name.c_str(),
                  d.server.host.c_str(), static_cast<unsigned>(port), topo.ranks_with(config::Role::kScorer).size());
      std::fflush(stdout);
    });
    write_exit_file(options.exit_file, code);
    if (code != coordinator::kExitClean) mpi.abort(code);
    mpi.finalize();
    return 0;
  }

  // Workers stop when the coordinator says so; mpirun's SIGTERM on a Ctrl-C reaches it too.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  auto buckets = config::serving_buckets(d);
  if (!buckets.ok()) fail(buckets.error().message(), coordinator::kExitError);
  worker::RunnerFactory factory;
  if (topo.role() == config::Role::kScorer) {
    const config::Model model = *d.model(config::Role::kScorer);
    const config::Backend backend = topo.config().backend;
    factory = [model, backend, table = buckets.value()] { return worker::load_scorer(model, backend, table); };
  } else {
    const std::string role = config::to_string(topo.role());
    factory = [role]() -> Result<std::unique_ptr<worker::BatchRunner>> {
      return Error::make(ErrorKind::kUnsupported, "role {} is not served yet", role);
    };
  }
  const int code = worker::run_worker(*transport, topo, d.health, std::move(factory));
  if (code != 0) mpi.abort(code);
  mpi.finalize();
  return 0;
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
