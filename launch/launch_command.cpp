// `tandem launch --config deploy.yaml [--hostfile F] [-- mpirun args]`: starts a serving job from its
// YAML (serving.md "Launch"). It checks the deployment and the rank count (and the hostfile's slots)
// before anything starts, shows each rank's role and GPU, sets the NCCL environment (never NVLink
// multicast: NCCL_NVLS_ENABLE=0), runs `mpirun --enable-recovery ... tandem serve` and exits with the
// coordinator's code. Recovery mode is what lets rank 0 outlive a dead worker to answer 503s; Open MPI
// 4.1 then reports 0 whatever happened, so rank 0 writes its code to a file this command reads.

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/config.h"
#include "launch/commands.h"

namespace tandem::launch {
namespace {

struct LaunchOptions {
  std::string config;
  std::string hostfile;
  std::string mpirun = "mpirun";
  int np = 0;
  bool oversubscribe = false;
  bool dry_run = false;
  std::string exit_dir = "/tmp";   // where rank 0 leaves its exit code: a folder rank 0's node sees
  std::vector<std::string> extra;  // after `--`, passed to mpirun as they are
};

pid_t g_child = 0;

extern "C" void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// Open MPI hostfile slots: "host [slots=N] [max_slots=M]" per line, '#' comments; a host without
// slots counts one.
Result<uint32_t> hostfile_slots(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::make(ErrorKind::kNotFound, "--hostfile {}: cannot open it", path);
  uint32_t total = 0;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    uint32_t slots = 1;
    for (std::string word; words >> word;) {
      if (word.rfind("slots=", 0) != 0) continue;
      const std::string n = word.substr(6);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 6) {
        return Error::make(ErrorKind::kFormat, "{}:{}: '{}' is not slots=<count>", path, number, word);
      }
      slots = static_cast<uint32_t>(std::stoul(n));
    }
    total += slots;
  }
  if (total == 0) return Error::make(ErrorKind::kFormat, "{}: no hosts in it", path);
  return total;
}

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tandem") : p.string();
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int launch(const LaunchOptions& o) {
  auto loaded = config::load_deployment(o.config);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tandem launch: %s\n", loaded.error().message().c_str());
    return 1;
  }
  const config::Deployment& d = loaded.value();
  const int ranks = static_cast<int>(d.ranks.size());
  if (o.np != 0 && o.np != ranks) {
    std::fprintf(stderr, "tandem launch: %s lists %d ranks under 'ranks' but --np is %d; they must agree\n",
                 d.origin.c_str(), ranks, o.np);
    return 1;
  }
  if (!o.hostfile.empty()) {
    auto slots = hostfile_slots(o.hostfile);
    if (!slots.ok()) {
      std::fprintf(stderr, "tandem launch: %s\n", slots.error().message().c_str());
      return 1;
    }
    if (static_cast<int>(*slots) < ranks && !o.oversubscribe) {
      std::fprintf(stderr,
                   "tandem launch: %s has %u slots for the %d ranks of %s; add slots or pass --oversubscribe\n",
                   o.hostfile.c_str(), *slots, ranks, d.origin.c_str());
      return 1;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const config::Rank& rank = d.ranks[static_cast<size_t>(r)];
    std::string where;
    if (rank.role != config::Role::kCoordinator) {
      where = rank.backend.name == "cuda" ? fmt::format(" on GPU {} of its node ({})", rank.backend.device,
                                                        ir::to_string(rank.backend.precision))
                                          : fmt::format(" on the CPU ({} threads)", rank.backend.threads == 0
                                                                                        ? std::string("all")
                                                                                        : std::to_string(rank.backend.threads));
    }
    std::printf("tandem launch: rank %d: %s%s\n", r, config::to_string(rank.role), where.c_str());
  }
  std::printf("tandem launch: the coordinator will listen on http://%s:%s\n", d.server.host.c_str(),
              d.server.port == 0 ? "<a free port>" : std::to_string(d.server.port).c_str());

  std::string exit_file = o.exit_dir + "/tandem-exit-XXXXXX";
  const int fd = mkstemp(exit_file.data());
  if (fd < 0) {
    std::fprintf(stderr, "tandem launch: cannot make a file in --exit-dir %s: %s\n", o.exit_dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  close(fd);

  // NCCL settings every rank inherits (-x); NVLink multicast stays off whatever the caller's env says.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<std::string> args = {o.mpirun, "-np", std::to_string(ranks), "--enable-recovery", "--bind-to", "none",
                                   "-x", "NCCL_NVLS_ENABLE"};
  for (const char* var : {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_P2P_LEVEL", "CUDA_VISIBLE_DEVICES"}) {
    if (std::getenv(var) != nullptr) {
      args.push_back("-x");
      args.push_back(var);
    }
  }
  if (!o.hostfile.empty()) {
    args.push_back("--hostfile");
    args.push_back(o.hostfile);
  }
  if (o.oversubscribe) args.push_back("--oversubscribe");
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  std::error_code ec;
  const std::string config_abs = std::filesystem::absolute(o.config, ec).string();
  for (const std::string& a : {self_path(), std::string("serve"), std::string("--config"), config_abs,
                               std::string("--exit-file"), exit_file}) {
    args.push_back(a);
  }
  std::string shown;
  for (const auto& a : args) shown += (shown.empty() ? "" : " ") + shell_quote(a);
  std::printf("tandem launch: %s\n", shown.c_str());
  std::fflush(stdout);
  if (o.dry_run) {
    std::remove(exit_file.c_str());
    return 0;
  }

  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "tandem launch: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "tandem launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = child;
  std::signal(SIGINT, forward_signal);
  std::signal(SIGTERM, forward_signal);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(exit_file);
  int reported = -1;
  if (in >> reported) {
    code = reported;
  } else if (code == 0) {
    std::fprintf(stderr, "tandem launch: the coordinator reported no exit status (it died, or never started)\n");
    code = 1;
  }
  std::remove(exit_file.c_str());
  if (code != 0) std::fprintf(stderr, "tandem launch: the job exited with %d\n", code);
  return code;
}

}  // namespace

void add_launch_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand("launch", "start a serving job from its deployment YAML (wraps mpirun)");
  cmd->add_option("--config", o->config, "deployment YAML")->required();
  cmd->add_option("--hostfile", o->hostfile, "Open MPI hostfile for several nodes");
  cmd->add_option("--np", o->np, "rank count (checked against the YAML, which decides)");
  cmd->add_option("--mpirun", o->mpirun, "the mpirun to use");
  cmd->add_flag("--oversubscribe", o->oversubscribe, "allow more ranks than cores or slots (CI, tests)");
  cmd->add_flag("--dry-run", o->dry_run, "check and print the mpirun command without running it");
  cmd->add_option("--exit-dir", o->exit_dir,
                  "folder for rank 0's exit code; on several nodes, one rank 0's node shares with this one");
  cmd->add_option("extra", o->extra, "after --: more mpirun arguments");
  cmd->callback([o, &exit_code] { exit_code = launch(*o); });
}

}  // namespace tandem::launch
