// One job across two "hosts" (labels mpi, netns): two network namespaces joined by a veth pair, each
// with its own address, and `tandem launch` in the first with a hostfile naming both, Open MPI over TCP
// on the veth subnet and tests/launch/netns_rsh.sh as its rsh agent. The coordinator and the target run
// in one namespace, the drafter and the scorer in the other; /v1/decide and /v1/completions (greedy and
// seeded) answer exactly as the same job on one host. Needs root and CAP_NET_ADMIN: where a namespace
// cannot be made the test skips saying why. The namespaces (and so the veths) are always removed.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "bench/loadgen_http.h"
#include "tests/launch/job_inputs.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using loadgen::HttpConnection;
using nlohmann::json;

const std::string kRsh = TANDEM_SOURCE_DIR "/tests/launch/netns_rsh.sh";
constexpr uint32_t kMaxTokens = 24;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Two namespaces `<base>a` and `<base>b` joined by veths `tdv<pid>a` / `tdv<pid>b`, at
// 10.231.<n>.1 and .2. The destructor deletes both namespaces (which removes the veth pair too),
// first killing whatever still runs in them.
class NetnsPair {
 public:
  NetnsPair(const TempDir& dir) : log_(dir.path() / "ip.log") {
    const std::string id = std::to_string(::getpid());
    a_ = "tandem" + id + "a";
    b_ = "tandem" + id + "b";
    subnet_ = "10.231." + std::to_string(::getpid() % 250) + ".";
    if (::geteuid() != 0) {
      reason_ = "network namespaces need root and CAP_NET_ADMIN; this test runs as uid " +
                std::to_string(::geteuid());
      return;
    }
    const std::string va = "tdv" + id + "a", vb = "tdv" + id + "b";
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", a_},
        {"ip", "netns", "add", b_},
        {"ip", "link", "add", va, "type", "veth", "peer", "name", vb},
        {"ip", "link", "set", va, "netns", a_},
        {"ip", "link", "set", vb, "netns", b_},
        {"ip", "-n", a_, "addr", "add", address(0) + "/24", "dev", va},
        {"ip", "-n", b_, "addr", "add", address(1) + "/24", "dev", vb},
        {"ip", "-n", a_, "link", "set", va, "up"},
        {"ip", "-n", b_, "link", "set", vb, "up"},
        {"ip", "-n", a_, "link", "set", "lo", "up"},
        {"ip", "-n", b_, "link", "set", "lo", "up"}};
    for (const auto& step : steps) {
      const CommandResult r = run_command(step, log_, 10s);
      if (r.code == 0) continue;
      std::string line;
      for (const auto& w : step) line += (line.empty() ? "" : " ") + w;
      reason_ = "cannot set up the network namespaces (root with CAP_NET_ADMIN needed): `" + line + "` exited " +
                std::to_string(r.code) + ": " + trimmed(r.output);
      // Only a namespace that cannot be made means this machine cannot run the test; a later step
      // failing once namespaces work is a failure.
      can_skip_ = &step == &steps.front();
      return;
    }
  }
  ~NetnsPair() {
    for (const std::string& ns : {a_, b_}) {
      const CommandResult pids = run_command({"ip", "netns", "pids", ns}, log_, 10s);
      std::istringstream in(pids.code == 0 ? pids.output : "");
      for (long pid = 0; in >> pid;) ::kill(static_cast<pid_t>(pid), SIGKILL);
      run_command({"ip", "netns", "del", ns}, log_, 10s);
    }
  }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Empty once both namespaces are up; otherwise why not, and whether that means skipping.
  const std::string& failure() const { return reason_; }
  bool can_skip() const { return can_skip_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  std::string address(int host) const { return subnet_ + std::to_string(host + 1); }
  std::string cidr() const { return subnet_ + "0/24"; }

 private:
  std::filesystem::path log_;
  std::string a_, b_, subnet_;
  std::string reason_;
  bool can_skip_ = true;
};

// Runs `fn` on a thread that has joined namespace `ns` (sockets it opens live there).
void in_netns(const std::string& ns, const std::function<void()>& fn) {
  std::string failure;
  std::thread t([&] {
    const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      failure = "cannot join network namespace " + ns + ": " + std::strerror(errno);
      if (fd >= 0) ::close(fd);
      return;
    }
    ::close(fd);
    fn();
  });
  t.join();
  ASSERT_EQ(failure, "");
}

// The inode of a network namespace: of a process, or of a named one.
ino_t netns_inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string deployment() {
  return pylm_deployment("{slots: 3, kv_capacity: 512, block_size: 8}", {"target", "drafter", "scorer"},
                         "health: {heartbeat_ms: 100, dead_after_ms: 3000}\n");
}

struct Answers {
  json decide;                                 // /v1/decide's answers
  std::vector<std::vector<uint32_t>> greedy;   // per held-out prompt
  std::vector<std::vector<uint32_t>> seeded;
  uint64_t drafted = 0;
};

// Every question of the job at `port`, one connection at a time.
void ask(uint16_t port, Answers& out) {
  std::ifstream sample(kModels + "decision-tickets/sample.json");
  const json decide = {{"state", "Email: my drill came in the wrong color, I want a refund before tomorrow."},
                       {"questions", json::parse(sample).at("questions")}};
  HttpConnection conn(port);
  auto d = conn.request("POST", "/v1/decide", decide.dump(), 60s);
  ASSERT_TRUE(d) << "no answer to /v1/decide";
  ASSERT_EQ(d->status, 200) << d->body;
  out.decide = json::parse(d->body).at("answers");
  const auto prompts = held_out_prompts();
  for (const float temperature : {0.0f, 0.8f}) {
    for (const auto& p : prompts) {
      const json body = {{"prompt", p},     {"max_tokens", kMaxTokens}, {"temperature", temperature},
                         {"seed", 1234},    {"return_token_ids", true}};
      auto r = conn.request("POST", "/v1/completions", body.dump(), 60s);
      ASSERT_TRUE(r) << "no answer to /v1/completions";
      ASSERT_EQ(r->status, 200) << r->body;
      const json j = json::parse(r->body);
      (temperature > 0 ? out.seeded : out.greedy)
          .push_back(j.at("choices")[0].at("token_ids").get<std::vector<uint32_t>>());
      out.drafted += j.at("usage").at("speculative").at("drafted_tokens").get<uint64_t>();
    }
  }
}

TEST(Netns, AJobOverTwoNamespacesAnswersAsOnOneHost) {
  TempDir dir;
  NetnsPair hosts(dir);
  if (!hosts.failure().empty() && hosts.can_skip()) GTEST_SKIP() << hosts.failure();
  ASSERT_EQ(hosts.failure(), "");

  // The reference: the same YAML on this host alone.
  Answers local;
  {
    ServiceJob job(deployment());
    const auto port = job.wait_listening();
    ASSERT_TRUE(port) << job.output();
    ask(*port, local);
  }
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(local.greedy.size(), 8u);
  EXPECT_GT(local.drafted, 0u) << "the drafter rank never drafted";

  // Ranks fill the hostfile in order: 0 (coordinator) and 1 (target) in a, 2 (drafter) and 3 (scorer) in b.
  const auto hostfile = dir.path() / "hostfile";
  std::ofstream(hostfile) << hosts.address(0) << " slots=2\n" << hosts.address(1) << " slots=2\n";
  ServiceJob job(deployment(), {"--hostfile", hostfile.string(), "--", "--mca", "plm_rsh_agent", kRsh, "--mca", "btl",
                                "tcp,self", "--mca", "btl_tcp_if_include", hosts.cidr(), "--mca",
                                "oob_tcp_if_include", hosts.cidr()},
                 {"ip", "netns", "exec", hosts.a()});
  std::optional<uint16_t> port = job.wait_listening();
  ASSERT_TRUE(port) << job.output();
  const std::vector<pid_t> ranks = job.ranks();
  ASSERT_EQ(ranks.size(), 4u) << job.output();
  const ino_t a = netns_inode("/var/run/netns/" + hosts.a()), b = netns_inode("/var/run/netns/" + hosts.b());
  const std::vector<ino_t> want = {a, a, b, b};
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(netns_inode("/proc/" + std::to_string(ranks[r]) + "/ns/net"), want[r]) << "rank " << r;
  }

  Answers remote;
  in_netns(hosts.a(), [&] { ask(*port, remote); });
  ASSERT_FALSE(HasFatalFailure()) << job.output();
  EXPECT_EQ(remote.decide, local.decide);
  EXPECT_EQ(remote.greedy, local.greedy);
  EXPECT_EQ(remote.seeded, local.seeded);
  EXPECT_EQ(remote.drafted, local.drafted);

  kill(job.launcher(), SIGINT);
  const auto code = job.wait(60s);
  ASSERT_TRUE(code) << job.output();
  EXPECT_EQ(*code, 0) << job.output();
  EXPECT_NE(job.output().find("the job stopped cleanly"), std::string::npos) << job.output();
}

}  // namespace
}  // namespace tandem::testing
