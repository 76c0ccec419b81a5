// How a serving job under `tandem launch` ends, as a user meets it: Ctrl-C (SIGINT to the launcher's
// process group) or SIGTERM to the launcher alone, under load, finishes the work in hand and exits 0
// with no request lost, the port free at once and no rank left; Ctrl-C while a rank is inside one long
// call (a long prefill here, a plan lowering on a GPU) still stops cleanly in bounded time, and a second
// Ctrl-C ends the job at once; a busy port ends the job at once with one line and no Open MPI noise,
// before any worker has loaded; the shipped CPU example runs on this machine as the README shows it,
// without --oversubscribe; a stop reaches rank 0 even through an mpirun that does not pass it on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <future>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using nlohmann::json;

// A closed loop of checked requests that runs until the server refuses connections.
std::future<std::pair<int, json>> load_until_stopped(const TempDir& dir, uint16_t port) {
  const auto [input, expect] = score_pool_files(dir);
  return std::async(std::launch::async, [&dir, port, input = input, expect = expect] {
    auto r = run_command({TANDEM_LOADGEN, "--url", "http://127.0.0.1:" + std::to_string(port), "--input", input,
                          "--expect", expect, "--requests", "200000", "--connections", "16", "--per-request", "2",
                          "--allow", "503", "--timeout-ms", "20000", "--until-refused"},
                         dir.path() / "loadgen.log", 120s);
    return std::make_pair(r.code, json_from_first_brace(r.output));
  });
}

// Stops a job under load with `signal_job` and checks what the issue asks of an orderly stop.
void stop_under_load(const std::function<void(ServiceJob&)>& signal_job) {
  ServiceJob job(cpu_deployment(2));
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  TempDir dir;
  auto load = load_until_stopped(dir, *port);
  // Load is on: answers are coming back.
  bool busy = false;
  for (int i = 0; i < 100 && !busy; ++i) {
    std::this_thread::sleep_for(100ms);
    HttpConnection c(*port);
    auto m = c.request("GET", "/metrics", "", 5s);
    busy = m && m->body.find("tandem_requests_total{endpoint=\"/v1/score\",status=\"200\"}") != std::string::npos;
  }
  ASSERT_TRUE(busy) << job.output();
  std::this_thread::sleep_for(1500ms);

  signal_job(job);
  auto code = job.wait(30s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 0) << job.output();
  // Right after the launcher returns: the port can be bound again, and no rank is left.
  EXPECT_TRUE(port_is_free(*port));
  EXPECT_TRUE(job.processes(TANDEM_BINARY).empty()) << job.output();
  EXPECT_TRUE(job.processes("mpirun").empty()) << job.output();
  EXPECT_EQ(mpi_noise(job.output()), "") << job.output();
  EXPECT_NE(job.output().find("stopping: finishing the work in hand"), std::string::npos) << job.output();
  EXPECT_NE(job.output().find("tandem launch: the job stopped cleanly"), std::string::npos) << job.output();

  auto [lg_code, summary] = load.get();
  EXPECT_EQ(lg_code, 0) << summary.dump(2);
  EXPECT_EQ(summary.at("lost"), 0) << summary.dump(2);
  EXPECT_EQ(summary.at("timed_out"), 0) << summary.dump(2);
  EXPECT_EQ(summary.at("mismatched"), 0) << summary.dump(2);
  EXPECT_EQ(summary.at("duplicated"), 0) << summary.dump(2);
  EXPECT_GT(summary.at("statuses").value("200", 0), 100) << summary.dump(2);
}

TEST(ServeStop, CtrlCToTheProcessGroupUnderLoadFinishesTheWorkAndExits0) {
  stop_under_load([](ServiceJob& job) { ASSERT_EQ(kill(-job.launcher(), SIGINT), 0); });
}

TEST(ServeStop, SigtermToTheLauncherUnderLoadFinishesTheWorkAndExits0) {
  stop_under_load([](ServiceJob& job) { ASSERT_EQ(kill(job.launcher(), SIGTERM), 0); });
}

// A listener on the job's port: the job ends at once, before it waits for the workers to load, exit 1,
// with one line naming the port and the fix, and nothing from Open MPI or the workers.
TEST(ServeStop, ABusyPortEndsTheJobAtOnceWithOneLine) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE: the sockets API takes sockaddr*
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  // NOLINTNEXTLINE: the sockets API takes sockaddr*
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const unsigned port = ntohs(addr.sin_port);
  ServiceJob job(cpu_deployment(2).replace(0, std::string("server: {host: 127.0.0.1, port: 0}").size(),
                                           "server: {host: 127.0.0.1, port: " + std::to_string(port) + "}"));
  const auto start = std::chrono::steady_clock::now();
  auto code = job.wait(60s);
  ::close(fd);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 1) << job.output();
  const std::string out = job.output();
  const std::string line = "cannot listen on 127.0.0.1:" + std::to_string(port) +
                           ": the port is in use by another process; stop it or set server.port to another port (0 "
                           "picks a free one)";
  EXPECT_NE(out.find(line), std::string::npos) << out;
  EXPECT_EQ(out.find(line), out.rfind(line)) << "said once:\n" << out;
  // Found before the workers were waited for: the line comes before any worker's "ready".
  EXPECT_LT(out.find(line), out.find("ready: model")) << out;
  EXPECT_EQ(out.find("the coordinator ended the job"), std::string::npos) << out;
  EXPECT_EQ(mpi_noise(out), "") << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << out;
  EXPECT_TRUE(job.processes(TANDEM_BINARY).empty()) << out;
}

// A generator rank (models/pylm + models/pylm-dflash, CPU) with room for 64 prompts of 900 tokens: one
// round that admits them all is one long call on the rank (a prefill of 10-30 s on one core, by the
// machine), as a cold plan's lowering or a warm-up bucket is on a GPU. The work in hand gets 1 s on a stop,
// so the rank is told to stop a few seconds into that call on any machine (with the default 10 s, a fast
// core had finished the prefill before the rank's 2 s wait ran out, and the test tested nothing).
std::string long_call_deployment(uint32_t shutdown_drain_ms = 1000) {
  return pylm_deployment("{slots: 64, kv_capacity: 1024, block_size: 16}", {"generator"},
                         "limits: {request_timeout_ms: 600000, shutdown_drain_ms: " +
                             std::to_string(shutdown_drain_ms) + "}\n");
}

// 64 concurrent completions of 900-token prompts; each future gets its answer (nullopt: none came).
std::vector<std::future<std::optional<loadgen::HttpReply>>> long_prefill(uint16_t port) {
  std::vector<std::future<std::optional<loadgen::HttpReply>>> replies;
  for (int i = 0; i < 64; ++i) {
    json prompt = json::array();
    for (int t = 0; t < 900; ++t) prompt.push_back(4 + (i * 131 + t * 17) % 6000);
    const std::string body = json{{"prompt", prompt}, {"max_tokens", 8}}.dump();
    replies.push_back(std::async(std::launch::async, [port, body] {
      HttpConnection c(port);
      return c.request("POST", "/v1/completions", body, 120s);
    }));
  }
  return replies;
}

// Ctrl-C while the generator rank is inside that call: the job keeps to the stop policy (the work in
// hand gets limits.shutdown_drain_ms, then 503), the rank keeps heartbeating and says goodbye without waiting for the call,
// and the job exits 0 in bounded time with a line saying what was left. (Before, the rank fell silent
// until the call ended: declared dead, no goodbye, exit 1.)
TEST(ServeStop, CtrlCWhileARankIsInOneLongCallStopsCleanlyInBoundedTime) {
  ServiceJob job(long_call_deployment());
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  auto replies = long_prefill(*port);
  std::this_thread::sleep_for(3s);  // every request is in, and the rank is in the round that admits them
  const auto stop = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(-job.launcher(), SIGINT), 0);
  auto code = job.wait(60s);
  const auto took = std::chrono::steady_clock::now() - stop;
  ASSERT_TRUE(code) << job.output();
  const std::string out = job.output();
  EXPECT_EQ(*code, 0) << out;
  EXPECT_LT(took, 15s) << out;
  EXPECT_NE(out.find("stopping: finishing the work in hand (for up to 1 s, limits.shutdown_drain_ms)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("stopping: what was not finished within 1 s is answered 503: 64 generation requests"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank 1 (generator, cpu): stopping without the batch or round in hand"), std::string::npos)
      << "the rank was not in one long call: the test did not test it\n" << out;
  EXPECT_EQ(out.find("is dead"), std::string::npos) << out;
  EXPECT_NE(out.find("tandem launch: the job stopped cleanly"), std::string::npos) << out;
  EXPECT_EQ(mpi_noise(out), "") << out;
  EXPECT_TRUE(port_is_free(*port));
  EXPECT_TRUE(job.processes(TANDEM_BINARY).empty()) << out;
  // Every request was answered, as the stop policy says: 503, the server is shutting down.
  for (auto& r : replies) {
    auto reply = r.get();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 503) << reply->body;
    EXPECT_NE(reply->body.find("the server is shutting down"), std::string::npos) << reply->body;
  }
}

// A second Ctrl-C does not wait for the orderly stop: the job ends within seconds, 130 (128 + SIGINT),
// saying so, and no rank is left.
TEST(ServeStop, ASecondCtrlCEndsTheJobAtOnce) {
  ServiceJob job(long_call_deployment(10000));  // the orderly stop is still going when the second comes
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  auto replies = long_prefill(*port);
  std::this_thread::sleep_for(3s);
  ASSERT_EQ(kill(-job.launcher(), SIGINT), 0);
  std::this_thread::sleep_for(1s);
  const auto again = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(-job.launcher(), SIGINT), 0);
  auto code = job.wait(30s);
  ASSERT_TRUE(code) << job.output();
  const std::string out = job.output();
  EXPECT_LT(std::chrono::steady_clock::now() - again, 15s) << out;
  EXPECT_EQ(*code, 130) << out;
  EXPECT_NE(out.find("tandem launch: SIGINT again: ending the job now (SIGTERM to mpirun)"), std::string::npos) << out;
  EXPECT_NE(out.find("tandem launch: the job was ended before it stopped cleanly (exit 130)"), std::string::npos)
      << out;
  EXPECT_TRUE(job.processes(TANDEM_BINARY).empty()) << out;
  EXPECT_TRUE(job.processes("mpirun").empty()) << out;
  for (auto& r : replies) r.wait();  // answered or cut off: the job is gone
}

// A generator job answers a completion, then SIGINT to its launcher stops it cleanly within 20 s: rank 0
// finishes the work in hand, the launcher exits 0, and no rank or mpirun is left.
void expect_sigint_stops_it_cleanly(ServiceJob& job) {
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  HttpConnection c(*port);
  auto reply = c.request("POST", "/v1/completions", json{{"prompt", held_out_prompts().at(0)}, {"max_tokens", 8}}.dump(),
                         60s);
  ASSERT_TRUE(reply) << job.output();
  EXPECT_EQ(reply->status, 200) << reply->body;
  const auto stop = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(job.launcher(), SIGINT), 0);
  auto code = job.wait(50s);
  ASSERT_TRUE(code) << "not stopped 50 s after SIGINT\n" << job.output();
  const std::string out = job.output();
  EXPECT_EQ(*code, 0) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 20s) << out;
  EXPECT_NE(out.find("stopping: finishing the work in hand"), std::string::npos) << out;
  EXPECT_NE(out.find("tandem launch: the job stopped cleanly"), std::string::npos) << out;
  EXPECT_TRUE(job.processes(TANDEM_BINARY).empty()) << out;
  EXPECT_TRUE(job.processes("mpirun").empty()) << out;
}

// A generator job whose launcher was started with SIGUSR1 blocked (tools/gpu-gen-serve-bench.sh on the
// H200: a signal mask its starter set, which fork and exec pass on to mpirun and the ranks): SIGINT to
// the launcher stops it cleanly, as with an open mask. Before, the launcher's SIGUSR1 stayed pending in
// mpirun (so rank 0 never heard of the stop and logged nothing) until --stop-timeout ended the job after
// 60 s with SIGTERM: "the job has not stopped 60 s after the stop request", as on the H200.
TEST(ServeStop, AStopSignalBlockedByWhoeverStartedTheJobStillStopsIt) {
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &old), 0);
  ServiceJob job(pylm_deployment("{slots: 4, kv_capacity: 256, block_size: 8}", {"generator"}));
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);  // the launcher was forked with it
  expect_sigint_stops_it_cleanly(job);
}

// An mpirun that keeps the launcher's SIGUSR1 to itself, as the H200 machine's Open MPI 4.1.6 did (it caught
// the signal and passed nothing on: tools/stop-check.sh), so a job there never stopped on Ctrl-C: rank 0,
// on the launcher's machine, hears the stop from the launcher directly (launch/rank0_process.h). Without
// that, this job runs on until --stop-timeout ends it.
TEST(ServeStop, AnMpirunThatDoesNotPassTheStopOnStillStopsCleanly) {
  TempDir bin;
  const std::filesystem::path wrapper = bin.path() / "mpirun-keeping-sigusr1";
  // The real mpirun runs as the wrapper's child, which the launcher's SIGUSR1 (ignored here) never reaches;
  // SIGTERM is passed on, so the launcher can still end the job.
  std::ofstream(wrapper) << R"(#!/bin/sh
trap '' USR1
trap 'kill -TERM $pid 2>/dev/null' TERM
mpirun "$@" &
pid=$!
while :; do wait $pid; rc=$?; kill -0 $pid 2>/dev/null || break; done
exit $rc
)";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  ServiceJob job(pylm_deployment("{slots: 4, kv_capacity: 256, block_size: 8}", {"generator"}),
                 {"--mpirun", wrapper.string(), "--stop-timeout", "40"});
  expect_sigint_stops_it_cleanly(job);
  for (const auto& f : std::filesystem::directory_iterator(job.dir())) {
    EXPECT_EQ(f.path().string().find(".rank0"), std::string::npos) << "left behind: " << f.path();
  }
}

// config/examples/cpu.yaml as shipped (a scorer and a generator rank; only the port, and the model paths
// it finds from its own folder, changed for a test machine), run as the README shows: `tandem launch
// --config`, no flags.
TEST(ServeStop, TheShippedCpuExampleRunsWithoutFlags) {
  std::ifstream in(TANDEM_SOURCE_DIR "/config/examples/cpu.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"port: 8080", "port: 0"},
                                 {"dir: ../../models/decision-tickets", "dir: " + kDecisionTiny},
                                 {"dir: ../../models/pylm\n", "dir: " TANDEM_SOURCE_DIR "/models/pylm\n"},
                                 {"dir: ../../models/pylm-dflash2", "dir: " TANDEM_SOURCE_DIR "/models/pylm-dflash2"}}) {
    const size_t at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
  }
  ServiceJob job(yaml);
  auto port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  HttpConnection c(*port);
  auto h = c.request("GET", "/health", "", 5s);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200) << h->body;
  EXPECT_EQ(job.output().find("not enough slots"), std::string::npos) << job.output();
  kill(job.launcher(), SIGINT);
  auto code = job.wait(30s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 0) << job.output();
}

}  // namespace
}  // namespace tandem::testing
