// run_coordinator (coordinator.h): start-up, serving and shutdown of rank 0, in that order.
#include "coordinator/coordinator.h"

#include <future>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "coordinator/batcher.h"
#include "coordinator/control_plane.h"
#include "coordinator/decision_frontend.h"
#include "coordinator/generation_api.h"
#include "coordinator/generation_frontend.h"
#include "coordinator/http_server.h"
#include "coordinator/round_scheduler.h"
#include "coordinator/routes.h"
#include "engine/core/log.h"

namespace tandem::coordinator {
namespace {

// At most this long for the HTTP clients to leave after their last answers (idle keep-alive ones do not).
constexpr auto kClientDrain = std::chrono::seconds(2);
constexpr auto kGoodbyeWait = std::chrono::seconds(5);

// What rank 0 opens itself while the workers load: the scorer's tokenizer and layout, the target's
// tokenizer and chat template (either may be absent).
struct Rank0Models {
  std::unique_ptr<DecisionFrontend> scorer;
  std::unique_ptr<GenerationFrontend> generation;
};

Result<Rank0Models> open_rank0_models(const config::Deployment& d) {
  Rank0Models m;
  if (const config::Model* scorer = d.serves_scoring() ? d.model(config::Role::kScorer) : nullptr) {
    auto opened = DecisionFrontend::load(*scorer);
    if (!opened.ok()) return std::move(opened).error().context("the scorer model");
    m.scorer = std::move(opened).value();
  }
  if (const config::Model* target = d.serves_generation() ? d.model(config::Role::kTarget) : nullptr) {
    auto g = GenerationFrontend::load(target->name, target->dir, target->tokenizer);
    if (!g.ok()) return std::move(g).error().context(fmt::format("the target model {}", target->dir));
    m.generation = std::move(g).value();
  }
  return m;
}

std::string rank0_dirs(const config::Deployment& d) {
  std::string out;
  for (config::Role r : {config::Role::kScorer, config::Role::kTarget}) {
    const config::Model* m = d.model(r);
    if (m == nullptr || (r == config::Role::kScorer ? !d.serves_scoring() : !d.serves_generation())) continue;
    out += (out.empty() ? "" : " and ") + m->dir;
  }
  return out;
}

}  // namespace

CoordinatorExit run_coordinator(const config::Deployment& deployment, const worker::Topology& topology,
                                worker::Transport& transport, const std::atomic<bool>& stop,
                                const std::function<void(uint16_t port)>& on_listening) {
  worker::name_this_thread("mpi");
  RankTable ranks(topology, deployment.batcher.max_inflight_per_rank);
  Metrics metrics;
  ControlPlane control(transport, topology, deployment.health, ranks, metrics);
  // Every way out tells the workers, which would otherwise wait for a silence: goodbye when all are
  // alive (every rank then finalizes and Open MPI stays quiet), an Abort when one is dead or silent.
  auto end_job = [&](int code, const std::string& why) -> CoordinatorExit {
    if (!control.lost_a_rank() && control.shutdown_workers(kGoodbyeWait)) return {code, true};
    control.abort_workers(why);
    return {code, false};
  };
  auto fail = [&](int code, const std::string& why) {
    log::error("{}", why);
    return end_job(code, why);
  };
  if (!deployment.serves_scoring() && !deployment.serves_generation()) {
    return fail(kExitError, fmt::format("{}: no rank scores or runs a target model (roles scorer, generator, target)",
                                        deployment.origin));
  }
  if (deployment.serves_scoring() && deployment.model(config::Role::kScorer) == nullptr) {
    return fail(kExitError, fmt::format("{}: scorer ranks without a scorer model", deployment.origin));
  }
  if (deployment.serves_generation() && deployment.model(config::Role::kTarget) == nullptr) {
    return fail(kExitError, fmt::format("{}: target ranks without a target model", deployment.origin));
  }
  auto buckets = config::serving_buckets(deployment);
  if (!buckets.ok()) return fail(kExitError, buckets.error().message());

  // The listener first: a busy port is found now, not after every worker has loaded its weights.
  worker::BlockingQueue<Dispatch> outbox;
  Batcher batcher(deployment, buckets.value(), ranks, outbox, metrics);
  Api api(deployment, buckets.value(), batcher, ranks, metrics);
  // The round scheduler hears of every target rank's readiness, so it exists before the wait. The
  // generation routes open once rank 0 has the target's tokenizer; both outlive the server.
  std::unique_ptr<RoundScheduler> scheduler = make_generation_service(deployment, topology, outbox, control);
  std::unique_ptr<GenerationApi> generation;
  auto server = HttpServer::start(deployment.server, deployment.limits, api);
  if (!server.ok()) {
    batcher.stop(unavailable("the server could not start"));
    return fail(kExitError, fmt::format("{}: {}", deployment.origin, server.error().message()));
  }
  log::info("listening on http://{}:{} (503 until every rank is ready)", deployment.server.host,
            server.value()->port());

  // Rank 0 opens the model and tokenizer while the workers load theirs; the control plane keeps
  // heartbeating meanwhile. A detached thread: a load cannot be cancelled, and must not hold up an exit.
  auto loading = std::make_shared<std::promise<Result<Rank0Models>>>();
  auto loaded = loading->get_future();
  std::thread([loading, d = deployment] { loading->set_value(open_rank0_models(d)); }).detach();
  const std::string dirs = rank0_dirs(deployment);
  log::info("waiting for {} workers to load {}", topology.workers().size(), dirs);
  // Rank 0's own load failing (a tokenizer this build cannot read, say) ends the start-up at once
  // instead of after every worker has loaded its weights.
  std::optional<Result<Rank0Models>> opened;
  auto rank0_failed = [&]() -> Status {
    if (!opened && loaded.wait_for(std::chrono::seconds(0)) == std::future_status::ready) opened = loaded.get();
    if (opened && !opened->ok()) {
      return Error::make(ErrorKind::kUnavailable, "rank 0 cannot open {}", opened->error().message());
    }
    return ok_status();
  };
  if (Status s = control.wait_ready(stop, rank0_failed); !s.ok()) {
    server.value()->stop_accepting();
    if (s.error().kind() != ErrorKind::kCancelled) return fail(kExitStartup, s.error().message());
    // Workers in a warm-up leave it at their next plan (worker.h), so this does not wait for their loads.
    log::info("stopping while the workers load: telling them to stop");
    CoordinatorExit e = end_job(kExitClean, "stopped while the workers were loading");
    if (!e.orderly) e.code = kExitError;
    return e;
  }
  control.drain(outbox, [&] { return opened.has_value() || loaded.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
                std::chrono::seconds(deployment.health.startup_timeout_s));
  if (Status s = rank0_failed(); !s.ok()) return fail(kExitStartup, s.error().message());
  if (!opened) {
    return fail(kExitStartup, fmt::format("rank 0 did not open {} within {} s (health.startup_timeout_s)", dirs,
                                          deployment.health.startup_timeout_s));
  }
  const Rank0Models& models = opened->value();
  if (models.scorer) api.open(*models.scorer);
  if (models.generation) {
    generation = std::make_unique<GenerationApi>(*models.generation, scheduler.get(), metrics);
    api.open_generation(*generation);
  }
  if (scheduler) api.open_admin(*scheduler);
  on_listening(server.value()->port());

  int code = control.serve(outbox, stop);
  // New connections are refused from here (the port is free for a relaunch ~100 ms on); those open are answered,
  // with 503 for new work, and closed after their next answer.
  api.refuse_work();
  server.value()->stop_accepting();
  if (code == kExitClean) {
    // limits.shutdown_drain_ms: the work in hand may take this long.
    const auto work_drain = std::chrono::milliseconds(deployment.limits.shutdown_drain_ms);
    const double drain_s = static_cast<double>(deployment.limits.shutdown_drain_ms) / 1000.0;
    log::info("stopping: finishing the work in hand (for up to {:g} s, limits.shutdown_drain_ms)", drain_s);
    const auto generating = [&] { return scheduler ? scheduler->queued() + scheduler->decoding() : size_t{0}; };
    control.drain(outbox, [&] {
      return batcher.depth() == 0 && ranks.inflight_batches() == 0 && generating() == 0;
    }, work_drain);
    // Said, so a slow stop reads as the policy and not as a hang (a worker in one long call, say).
    if (batcher.depth() > 0 || ranks.inflight_batches() > 0 || generating() > 0) {
      log::warn("stopping: what was not finished within {:g} s is answered 503: {} generation requests, {} queued "
                "scoring sequences, {} scoring batches in flight",
                drain_s, generating(), batcher.depth(), ranks.inflight_batches());
    }
  }
  const std::string why = code == kExitClean ? std::string("the server is shutting down")
                                             : ranks.problem().value_or("a rank died");
  batcher.stop(unavailable(why));
  if (scheduler) scheduler->stop(unavailable(why));
  control.abandon_inflight(unavailable(why));
  // Every answer since the stop began said "Connection: close", so a connection closes once its answers
  // (the 503s just posted too) are written and read; a client that sent its next request on one just
  // before is answered too, instead of finding the connection closed under it. Idle keep-alive clients
  // that send nothing are closed after kClientDrain. The workers keep hearing from rank 0 meanwhile (a
  // silent coordinator is a dead one to them).
  control.drain(outbox, [&] { return server.value()->open_connections() == 0; }, kClientDrain);
  server.value()->stop();
  if (code == kExitClean && control.lost_a_rank()) code = kExitRankDied;  // stopped during the grace
  if (code != kExitClean) {
    control.abort_workers(why);
    return {code, false};
  }
  if (!control.shutdown_workers(kGoodbyeWait)) {
    std::string silent;
    for (const RankView& v : ranks.view()) {
      if (v.role == config::Role::kCoordinator || v.state == RankState::kGone) continue;
      silent += (silent.empty() ? "" : ", ") + v.name;
    }
    const std::string late = fmt::format("not every worker said goodbye within {} s: {}", kGoodbyeWait.count(), silent);
    log::error("{}", late);
    control.abort_workers(late);
    return {kExitError, false};
  }
  log::info("stopped cleanly");
  return {kExitClean, true};
}

}  // namespace tandem::coordinator
