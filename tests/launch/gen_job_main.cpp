// tandem-gen-job: a generation job under mpirun without HTTP, for gen_job_mpi_test. Rank 0 runs the
// control plane and the RoundScheduler, submits every prompt of --prompt-file at once through
// GenerationService::submit and prints one JSON object (per request: tokens, finish, stats); the other
// ranks serve their role as `tandem serve` does.
//   mpirun -np N tandem-gen-job DEPLOY.yaml PROMPTS MAX_TOKENS TEMPERATURE SEED
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator/control_plane.h"
#include "coordinator/round_scheduler.h"
#include "engine/core/log.h"
#include "worker/worker.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;

std::vector<std::vector<uint32_t>> read_prompts(const std::string& path) {
  std::vector<std::vector<uint32_t>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    for (char& c : line) c = c == ',' ? ' ' : c;
    std::istringstream ids(line);
    std::vector<uint32_t> p;
    uint32_t id = 0;
    while (ids >> id) p.push_back(id);
    if (!p.empty()) out.push_back(std::move(p));
  }
  return out;
}

int coordinate(const config::Deployment& d, const worker::Topology& topo, worker::Transport& transport,
               const std::vector<std::vector<uint32_t>>& prompts, uint32_t max_tokens, float temperature,
               uint64_t seed) {
  coordinator::RankTable ranks(topo, 4);
  coordinator::Metrics metrics;
  coordinator::ControlPlane control(transport, topo, d.health, ranks, metrics);
  worker::BlockingQueue<coordinator::Dispatch> outbox;
  auto service = coordinator::make_generation_service(d, topo, outbox, control);
  if (!service) {
    log::error("{}: no rank runs a target", d.origin);
    control.abort_workers("no rank runs a target");
    return 1;
  }
  coordinator::RoundScheduler& scheduler = *service;
  std::atomic<bool> stop{false};
  if (Status s = control.wait_ready(stop); !s.ok()) {
    log::error("{}", s.error().message());
    control.abort_workers(s.error().message());
    return 2;
  }
  struct Out {
    std::vector<uint32_t> tokens;
    coordinator::GenerationEvent last;
    bool done = false;
  };
  std::mutex mutex;
  std::vector<Out> outs(prompts.size());
  size_t finished = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    coordinator::GenerationRequest g;
    g.prompt = prompts[i];
    g.max_tokens = max_tokens;
    g.sampling = {temperature, 1.0f, seed};
    g.stop_ids = {0};  // models/pylm's eos_token_id, as `tandem generate` adds it
    auto r = scheduler.submit(std::move(g), [&, i](const coordinator::GenerationEvent& ev) {
      std::lock_guard lock(mutex);
      outs[i].tokens.insert(outs[i].tokens.end(), ev.tokens.begin(), ev.tokens.end());
      outs[i].last = ev;
      if (ev.finish != coordinator::GenerationFinish::kNone) {
        outs[i].done = true;
        ++finished;
      }
    });
    if (std::holds_alternative<coordinator::ApiError>(r)) {
      log::error("request {} refused: {}", i, std::get<coordinator::ApiError>(r).message);
      control.abort_workers("a request was refused");
      return 1;
    }
  }
  control.drain(outbox, [&] {
    std::lock_guard lock(mutex);
    return finished == prompts.size();
  }, 300s);
  nlohmann::ordered_json j;
  nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
  {
    std::lock_guard lock(mutex);
    for (const Out& o : outs) {
      nlohmann::ordered_json r = {{"tokens", o.tokens},
                                  {"finish", coordinator::to_string(o.last.finish)},
                                  {"rounds", o.last.stats.rounds},
                                  {"drafted", o.last.stats.drafted},
                                  {"accepted", o.last.stats.accepted}};
      if (o.last.error) r["error"] = {{"status", o.last.error->status}, {"message", o.last.error->message}};
      reqs.push_back(std::move(r));
    }
  }
  j["requests"] = std::move(reqs);
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (const auto& t : scheduler.targets()) {
    targets.push_back({{"rank", t.rank}, {"rounds", t.rounds}, {"tokens", t.tokens},
                       {"rank_slots_used", t.rank_slots_used}, {"bytes_moved", t.bytes_moved},
                       {"guesses", t.guesses}, {"guesses_used", t.guesses_used},
                       {"moves", t.moves}, {"moved_accepted", t.moved_accepted}});
  }
  j["targets"] = std::move(targets);
  j["problem"] = scheduler.problem();
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  // Also to a file when asked: mpirun interleaves the ranks' stderr with this (long) line in one stream.
  if (const char* path = std::getenv("TANDEM_GEN_JOB_JSON")) std::ofstream(path) << j.dump() << "\n";
  scheduler.stop(coordinator::unavailable("the job is over"));
  if (control.lost_a_rank()) {
    // MPI_Finalize would wait for the dead rank: end the job here (its answers are printed).
    std::fprintf(stderr, "tandem-gen-job: %s\n", scheduler.problem().c_str());
    control.abort_workers("a rank died");
    return finished == prompts.size() ? 3 : 1;
  }
  if (!control.shutdown_workers(10s)) return 1;
  return finished == prompts.size() ? 0 : 1;
}

int main_impl(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: tandem-gen-job DEPLOY.yaml PROMPTS MAX_TOKENS TEMPERATURE SEED\n");
    return 2;
  }
  auto session = worker::MpiSession::init(&argc, &argv);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.error().message().c_str());
    return 1;
  }
  worker::MpiSession& mpi = *session.value();
  log::init(fmt::format("rank {}", mpi.rank()), "warn");
  auto d = config::load_deployment(argv[1]);
  if (!d.ok()) {
    std::fprintf(stderr, "%s\n", d.error().message().c_str());
    mpi.finalize();
    return 1;
  }
  auto topo = worker::Topology::make(*d, mpi.rank(), mpi.size());
  if (!topo.ok()) {
    std::fprintf(stderr, "%s\n", topo.error().message().c_str());
    mpi.finalize();
    return 1;
  }
  auto transport = worker::make_mpi_transport();
  if (topo->is_coordinator()) {
    const int code = coordinate(*d, *topo, *transport, read_prompts(argv[2]), static_cast<uint32_t>(std::stoul(argv[3])),
                                std::stof(argv[4]), std::stoull(argv[5]));
    if (code != 0) mpi.abort(code);
    mpi.finalize();
    return code;
  }
  worker::RankFactory factory = worker::generation_rank_factory(*d, *topo);
  // TANDEM_GEN_JOB_KILL=RANK:MS: that rank dies (SIGKILL) MS after it loaded, as a crashed rank would.
  if (const char* kill = std::getenv("TANDEM_GEN_JOB_KILL")) {
    const std::string spec = kill;
    const int victim = std::stoi(spec.substr(0, spec.find(':')));
    const int after_ms = std::stoi(spec.substr(spec.find(':') + 1));
    if (victim == topo->rank()) {
      factory = [inner = std::move(factory), after_ms](worker::Mailbox& mail, worker::Outbox& out) {
        auto made = inner(mail, out);
        std::thread([after_ms] {
          std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
          std::raise(SIGKILL);
        }).detach();
        return made;
      };
    }
  }
  const int code = worker::run_worker(*transport, *topo, d->health, std::move(factory));
  if (code != 0) mpi.abort(code);
  mpi.finalize();
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::main_impl(argc, argv); }
