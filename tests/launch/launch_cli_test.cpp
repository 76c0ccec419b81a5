// The tandem binary's commands without a serving job: `tandem generate` refuses what the target cannot
// take (a prompt or prompt + --max-tokens past max_position_embeddings) and malformed --prompt-ids;
// `tandem launch --dry-run` adds --oversubscribe itself when one machine has fewer cores than ranks and
// prints only the mpirun command on stdout (the plan is logged on stderr); a stop that does not finish
// within --stop-timeout is ended, and a third signal kills mpirun and its ranks (a stand-in mpirun);
// and MpiOutputFilter drops Open MPI's noise and nothing else; with --drafter-quantization int8/int4 the
// shipped drafters' speculative output equals plain greedy decoding, and a quantized checkpoint refuses
// 'none'.
#include <gtest/gtest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "launch/mpi_output_filter.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

const std::string kTarget = TANDEM_SOURCE_DIR "/tests/fixtures/qwen3/tiny";  // max_position_embeddings 256

std::string ids(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(10 + i % 200);
  return s;
}

CommandResult generate(const TempDir& dir, const std::string& prompt, const std::string& max_tokens) {
  static int n = 0;
  return run_command({TANDEM_BINARY, "generate", "--target", kTarget, "--prompt-ids", prompt, "--max-tokens", max_tokens,
                      "--threads", "1"},
                     dir.path() / ("generate-" + std::to_string(n++) + ".log"));
}

TEST(Generate, RefusesPromptsAndLengthsPastTheTargetsPositions) {
  TempDir dir;
  const std::string config = kTarget + "/config.json";
  auto fits = generate(dir, ids(250), "6");  // 256 positions exactly
  EXPECT_EQ(fits.code, 0) << fits.output;
  auto prompt = generate(dir, ids(300), "4");
  EXPECT_EQ(prompt.code, 2) << prompt.output;
  EXPECT_NE(prompt.output.find("prompt 0 has 300 tokens; the target takes at most 256 positions "
                               "(max_position_embeddings in " + config + "), so a prompt may have at most 255"),
            std::string::npos)
      << prompt.output;
  auto total = generate(dir, "10,20,30,40", "1000");
  EXPECT_EQ(total.code, 2) << total.output;
  EXPECT_NE(total.output.find("prompt 0 (4 tokens) + --max-tokens 1000 = 1004 positions; the target takes at most "
                              "256 (max_position_embeddings in " + config + "): ask for at most 252 tokens"),
            std::string::npos)
      << total.output;
  auto one_past = generate(dir, ids(250), "7");
  EXPECT_EQ(one_past.code, 2) << one_past.output;
}

TEST(Generate, RefusesEmptyPromptIdEntries) {
  TempDir dir;
  for (const auto& [prompt, why] : std::vector<std::pair<std::string, std::string>>{
           {"1,,2", "--prompt-ids: entry 1 is empty (two commas in a row)"},
           {",1,2", "--prompt-ids: entry 0 is empty (a comma before the first id)"},
           {"1,2,", "--prompt-ids: entry 2 is empty (a comma after the last id)"},
           {"1,x", "--prompt-ids: entry 1 'x' is not a token id"}}) {
    auto r = generate(dir, prompt, "2");
    EXPECT_EQ(r.code, 2) << prompt << ": " << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << prompt << ": " << r.output;
  }
  auto spaced = generate(dir, "10, 20 30,40", "2");  // commas and/or spaces
  EXPECT_EQ(spaced.code, 0) << spaced.output;
}

// More ranks than any machine's cores: --oversubscribe, said so; two ranks fit every test machine: none.
// With a hostfile the slots decide, and a shortage is refused in tandem's words.
TEST(Launch, OneMachineWithFewerCoresThanRanksIsOversubscribed) {
  TempDir dir;
  std::ofstream(dir.path() / "many.yaml") << cpu_deployment(1023);
  auto many = run_command({TANDEM_BINARY, "launch", "--config", (dir.path() / "many.yaml").string(), "--dry-run"},
                          dir.path() / "many.log");
  EXPECT_EQ(many.code, 0) << many.output;
  const std::string said = "tandem launch: 1024 ranks on the ";
  EXPECT_NE(many.output.find(said), std::string::npos) << many.output;
  EXPECT_NE(many.output.find("cores of this machine: passing --oversubscribe to mpirun"), std::string::npos);
  EXPECT_NE(many.output.find("--bind-to none -x NCCL_NVLS_ENABLE --oversubscribe "), std::string::npos);

  std::ofstream(dir.path() / "two.yaml") << cpu_deployment(1);
  auto two = run_command({TANDEM_BINARY, "launch", "--config", (dir.path() / "two.yaml").string(), "--dry-run"},
                         dir.path() / "two.log");
  EXPECT_EQ(two.code, 0) << two.output;
  EXPECT_EQ(two.output.find("--oversubscribe"), std::string::npos) << two.output;

  std::ofstream(dir.path() / "hosts") << "node0 slots=4\nnode1 slots=4\n";
  auto hosts = run_command({TANDEM_BINARY, "launch", "--config", (dir.path() / "many.yaml").string(), "--hostfile",
                            (dir.path() / "hosts").string(), "--dry-run"},
                           dir.path() / "hosts.log");
  EXPECT_EQ(hosts.code, 1) << hosts.output;
  EXPECT_NE(hosts.output.find("has 8 slots for the 1024 ranks of"), std::string::npos) << hosts.output;
  EXPECT_NE(hosts.output.find("add slots or pass --oversubscribe"), std::string::npos) << hosts.output;
}

// --stop-timeout shorter than limits.shutdown_drain_ms plus the goodbyes would end a stop that is going as
// it should: said once on stderr, and the launch goes on; a long enough one, or the default (the drain +
// 50 s), says nothing.
TEST(Launch, AStopTimeoutShorterThanTheDrainIsWarnedAbout) {
  TempDir dir;
  const std::string config = (dir.path() / "drain.yaml").string();
  std::ofstream(config) << cpu_deployment(1, "limits: {shutdown_drain_ms: 30000}\n");
  const std::string warning = "tandem launch: warning: --stop-timeout 20 s is shorter than limits.shutdown_drain_ms "
                              "(30 s) plus the ranks' goodbyes (10 s): a stop may be ended while it still answers "
                              "the work in hand";
  auto short_one = run_command({TANDEM_BINARY, "launch", "--config", config, "--dry-run", "--stop-timeout", "20"},
                               dir.path() / "short.log");
  EXPECT_EQ(short_one.code, 0) << short_one.output;
  EXPECT_NE(short_one.output.find(warning), std::string::npos) << short_one.output;
  EXPECT_EQ(short_one.output.find(warning), short_one.output.rfind(warning)) << "said once:\n" << short_one.output;
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--stop-timeout", "40"},
                                                std::vector<std::string>{"--stop-timeout", "0"},
                                                std::vector<std::string>{}}) {
    std::vector<std::string> args{TANDEM_BINARY, "launch", "--config", config, "--dry-run"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = run_command(args, dir.path() / "fine.log");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(r.output.find("warning: --stop-timeout"), std::string::npos) << r.output;
  }
}

// stdout is data only: --dry-run prints the mpirun command there, alone; the plan (each rank, the
// address) goes to stderr with the other logs.
TEST(Launch, DryRunPrintsOnlyTheCommandOnStdout) {
  TempDir dir;
  const auto yaml = dir.path() / "two.yaml";
  std::ofstream(yaml) << cpu_deployment(1);
  const auto err = dir.path() / "stderr.log";
  auto r = run_command({"/bin/sh", "-c",
                        std::string("exec \"$0\" launch --config \"$1\" --exit-dir \"$2\" --dry-run -- --mca btl "
                                    "self 2>\"$3\""),
                        TANDEM_BINARY, yaml.string(), dir.path().string(), err.string()},
                       dir.path() / "stdout.log");
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string logs = read_text(err);
  // One line: mpirun, its arguments (NCCL variables forwarded when set), then tandem serve.
  ASSERT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("mpirun -np 2 --enable-recovery --bind-to none -x NCCL_NVLS_ENABLE ", 0), 0u) << r.output;
  const std::string tail = " --mca btl self " + std::string(TANDEM_BINARY) + " serve --config " + yaml.string() +
                           " --exit-file " + dir.path().string() + "/tandem-exit-";
  const size_t at = r.output.find(tail);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.size(), at + tail.size() + 6 + 1) << r.output;  // mkstemp's six characters, the newline
  EXPECT_EQ(r.output.find("tandem launch:"), std::string::npos) << r.output;
  for (const char* line : {"tandem launch: rank 0: coordinator\n",
                           "tandem launch: rank 1: scorer on the CPU (1 threads)\n",
                           "tandem launch: the coordinator will listen on http://127.0.0.1:<a free port>\n"}) {
    EXPECT_NE(logs.find(line), std::string::npos) << line << "\n" << logs;
  }
}

// `tandem launch --mpirun SCRIPT`: a stand-in for mpirun that ignores the signals named in `ignored`
// (trap syntax: "USR1", "USR1 TERM") and starts one "rank" of its own, in a session of its own as
// Open MPI's ranks are, which ignores SIGTERM and writes its pid to rank.pid. Returns the launcher's pid.
pid_t launch_stuck_job(const TempDir& dir, const std::string& ignored, const std::vector<std::string>& extra) {
  const auto script = dir.path() / "mpirun.sh";
  std::ofstream(script) << "#!/bin/sh\ntrap '' " << ignored << "\n"
                        << "setsid sh -c 'trap \"\" TERM; echo $$ > " << (dir.path() / "rank.pid").string()
                        << "; while :; do sleep 0.1; done' &\nwhile :; do sleep 0.1; done\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  std::ofstream(dir.path() / "job.yaml") << cpu_deployment(1);
  std::vector<std::string> argv = {TANDEM_BINARY, "launch", "--config", (dir.path() / "job.yaml").string(),
                                   "--exit-dir", dir.path().string(), "--mpirun", script.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const pid_t pid = spawn(argv, dir.path() / "launch.log");
  for (int i = 0; i < 100 && !std::filesystem::exists(dir.path() / "rank.pid"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pid;
}

// A stop that does not finish within --stop-timeout (a rank stuck where it cannot hear it) is ended as
// a second Ctrl-C would end it: SIGTERM to mpirun, exit 130, said so.
TEST(Launch, AStopPastStopTimeoutEndsTheJob) {
  TempDir dir;
  const pid_t launcher = launch_stuck_job(dir, "USR1", {"--stop-timeout", "1"});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  auto code = wait_exit(launcher, std::chrono::milliseconds(15000));
  const std::string out = read_text(dir.path() / "launch.log");
  ASSERT_TRUE(code) << out;
  EXPECT_EQ(*code, 130) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << out;
  EXPECT_NE(out.find("tandem launch: SIGINT: stopping the job"), std::string::npos) << out;
  EXPECT_NE(out.find("tandem launch: the job has not stopped 1 s after the stop request (--stop-timeout): ending the "
                     "job now (SIGTERM to mpirun)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tandem launch: the job was ended before it stopped cleanly (exit 130)"), std::string::npos)
      << out;
  const pid_t rank = std::stoi(read_text(dir.path() / "rank.pid"));
  kill(rank, SIGKILL);  // mpirun's SIGTERM would have reached a real rank; this stand-in leaves it
}

// Signals move the end on a step each: the orderly stop, SIGTERM to mpirun, then SIGKILL to mpirun and
// its ranks on this machine, which ends even a job that ignores SIGTERM; 128 + SIGTERM when SIGTERM
// started it.
TEST(Launch, AThirdSignalKillsMpirunAndItsRanks) {
  TempDir dir;
  const pid_t launcher = launch_stuck_job(dir, "USR1 TERM", {});
  const pid_t rank = std::stoi(read_text(dir.path() / "rank.pid"));
  for (int sig : {SIGTERM, SIGINT, SIGINT}) {
    ASSERT_EQ(kill(launcher, sig), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  auto code = wait_exit(launcher, std::chrono::milliseconds(5000));
  const std::string out = read_text(dir.path() / "launch.log");
  ASSERT_TRUE(code) << out;
  EXPECT_EQ(*code, 143) << out;
  EXPECT_NE(out.find("tandem launch: SIGINT again: ending the job now (SIGTERM to mpirun)"), std::string::npos) << out;
  EXPECT_NE(out.find("tandem launch: SIGINT again: killing mpirun and its ranks on this machine (SIGKILL)"),
            std::string::npos)
      << out;
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = kill(rank, 0) != 0 || read_text("/proc/" + std::to_string(rank) + "/stat").find(" Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the rank outlived the launcher";
  if (!gone) kill(rank, SIGKILL);
}

// Open MPI 4.1's messages as mpirun printed them in a failing job.
TEST(MpiOutputFilter, DropsOpenMpisNoiseAndKeepsEverythingElse) {
  const std::string dashes(74, '-');
  const std::string text =
      "[2026-12-01 09:36:11.815] [rank 0] [error] cannot listen on 127.0.0.1:8080: the port is in use\n"
      "[vm:12832] PMIX ERROR: BAD-PARAM in file ../../../src/event/pmix_event_notification.c at line 1033\n" +
      dashes + "\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n\n" + dashes +
      "\n[vm:15600] [[20494,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file "
      "../../../orte/util/show_help.c at line 501\n"
      "[vm:12832] 2 more processes have sent help message help-mpi-api.txt / mpi-abort\n"
      "[vm:12832] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages\n"
      "mpirun: Forwarding signal 10 to job\n" +
      dashes + "\nORTE was unable to reliably start one or more daemons.\n" + dashes + "\n" +
      "[rank 1] a line of the job\n" + "[note] PMIX ERROR: kept, no host:pid before it\n" +
      "no newline at the end";
  tandem::launch::MpiOutputFilter filter;
  std::string out;
  for (size_t at = 0; at < text.size(); at += 7) out += filter.feed(std::string_view(text).substr(at, 7));
  out += filter.finish();
  EXPECT_EQ(out, "[2026-12-01 09:36:11.815] [rank 0] [error] cannot listen on 127.0.0.1:8080: the port is in use\n" +
                     dashes + "\nORTE was unable to reliably start one or more daemons.\n" + dashes + "\n" +
                     "[rank 1] a line of the job\n" + "[note] PMIX ERROR: kept, no host:pid before it\n" +
                     "no newline at the end\n");
  EXPECT_FALSE(filter.slots_short());

  tandem::launch::MpiOutputFilter slots;
  EXPECT_EQ(slots.feed(dashes + "\nThere are not enough slots available in the system to satisfy the 3\nslots that "
                                "were requested by the application:\n" + dashes + "\n"),
            "");
  EXPECT_TRUE(slots.slots_short());
}

TEST(Generate, QuantizedDrafterOutputEqualsPlainGreedy) {
  TempDir dir;
  const std::string target = kModels + "pylm";
  const std::vector<std::string> common = {TANDEM_BINARY, "generate", "--target", target, "--prompt-ids",
                                           "40,41,42,43,44,45,46,47", "--max-tokens", "24", "--ignore-eos",
                                           "--threads", "2"};
  const CommandResult plain = run_command(common, dir.path() / "plain.log");
  ASSERT_EQ(plain.code, 0) << plain.output;
  const nlohmann::json want = last_json_object(plain.output);
  ASSERT_FALSE(want.is_discarded()) << plain.output;
  for (const std::string drafter : {"pylm-dflash", "pylm-dflash2"}) {
    for (const std::string q : {"int8", "int4"}) {
      std::vector<std::string> args = common;
      args.insert(args.end(), {"--drafter", kModels + drafter, "--drafter-quantization", q,
                               "--block", "8"});
      const CommandResult r = run_command(args, dir.path() / (drafter + "-" + q + ".log"));
      ASSERT_EQ(r.code, 0) << r.output;
      const nlohmann::json got = last_json_object(r.output);
      ASSERT_FALSE(got.is_discarded()) << r.output;
      EXPECT_EQ(got.at("mode"), "speculative");
      EXPECT_EQ(got.at("drafter_quantization"), q);
      ASSERT_EQ(got.at("requests").size(), want.at("requests").size());
      for (size_t i = 0; i < want.at("requests").size(); ++i) {
        EXPECT_EQ(got.at("requests")[i].at("tokens"), want.at("requests")[i].at("tokens")) << drafter << " " << q;
      }
      EXPECT_GT(got.at("accepted").get<uint64_t>(), 0u) << drafter << " " << q << ": nothing accepted";
    }
  }
}

TEST(Generate, QuantizedCheckpointRefusesNone) {
  TempDir dir;
  const std::string drafter = TANDEM_SOURCE_DIR "/tests/fixtures/dflash/v1-int4";
  const CommandResult r = run_command({TANDEM_BINARY, "generate", "--target", kTarget, "--drafter", drafter,
                                       "--drafter-quantization", "none", "--prompt-ids", "10,20,30", "--max-tokens",
                                       "4", "--threads", "1"},
                                      dir.path() / "none.log");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("tandem generate: " + drafter + ": quantization 'none' was asked, but the checkpoint is "
                          "quantized as int4"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tandem::testing
