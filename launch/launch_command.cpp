// `tandem launch --config deploy.yaml [--hostfile F] [-- mpirun args]`: starts a serving job from its
// YAML (serving.md "Launch"). It checks the deployment and the rank count (and the hostfile's slots, or
// this machine's cores: more ranks than cores on one machine get --oversubscribe, said so) before
// anything starts, shows each rank's role and GPU, sets the NCCL environment (never NVLink multicast:
// NCCL_NVLS_ENABLE=0), runs `mpirun --enable-recovery ... tandem serve` and exits with the coordinator's
// code. Recovery mode is what lets rank 0 outlive a dead worker to answer 503s; Open MPI 4.1 then reports
// 0 whatever happened, so rank 0 writes its code to a file this command reads.
// Stopping: mpirun runs in its own process group, so a Ctrl-C reaches only this command, which asks
// rank 0 for an orderly stop (SIGUSR1, which mpirun forwards to every rank, and straight to rank 0 where it
// runs on this machine: rank0_process.h), waits for it (the work in
// hand answered, the port released, every rank gone) and returns its code. A second signal, or a stop
// still going after --stop-timeout, ends the job at once (SIGTERM to mpirun); a third, or mpirun still
// there 10 s later, kills mpirun and its ranks on this machine (SIGKILL). A job ended so exits 128 +
// the first signal's number, as a shell reports a process a signal ended. mpirun's stderr passes
// through MpiOutputFilter. Its own lines (the plan) are logs, on stderr; --dry-run prints the mpirun
// command alone on stdout.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "config/config.h"
#include "launch/commands.h"
#include "launch/mpi_output_filter.h"
#include "launch/rank0_process.h"
#include "launch/stop_signals.h"

namespace tandem::launch {
namespace {

struct LaunchOptions {
  std::string config;
  std::string hostfile;
  std::string mpirun = "mpirun";
  int np = 0;
  bool oversubscribe = false;
  bool dry_run = false;
  bool raw_mpi_output = false;
  std::string exit_dir = "/tmp";   // where rank 0 leaves its exit code: a folder rank 0's node sees
  // Seconds an orderly stop may take before the job is ended (0: no limit; -1, the default: the YAML's
  // limits.shutdown_drain_ms + kStopMargin). Rank 0's own stop is bounded (the work in hand gets
  // shutdown_drain_ms, the workers' goodbyes 5 s): this catches what is not (a hung MPI_Finalize).
  int stop_timeout_s = -1;
  std::vector<std::string> extra;  // after `--`, passed to mpirun as they are
};

// What an orderly stop takes beyond the work in hand's drain: the workers' goodbyes (5 s), a worker's
// wait for its long call (2 s), rank 0's answers going out, MPI_Finalize, and room to spare.
constexpr int kStopMargin = 50;

// --stop-timeout as the job runs it: the default follows limits.shutdown_drain_ms; a limit shorter than
// the drain plus the goodbyes would end a stop that is going as it should, which is said once.
int stop_timeout_for(const LaunchOptions& o, const config::Deployment& d) {
  const int drain_s = static_cast<int>((d.limits.shutdown_drain_ms + 999) / 1000);
  if (o.stop_timeout_s < 0) return drain_s + kStopMargin;
  if (o.stop_timeout_s > 0 && o.stop_timeout_s < drain_s + 10) {
    std::fprintf(stderr,
                 "tandem launch: warning: --stop-timeout %d s is shorter than limits.shutdown_drain_ms (%d s) plus "
                 "the ranks' goodbyes (10 s): a stop may be ended while it still answers the work in hand\n",
                 o.stop_timeout_s, drain_s);
  }
  return o.stop_timeout_s;
}

// Signals seen, for the wait loop; the handler only counts (and wakes poll by interrupting it).
volatile std::sig_atomic_t g_signals = 0;
volatile std::sig_atomic_t g_last_signal = 0;

extern "C" void count_signal(int sig) {
  g_signals = g_signals + 1;
  g_last_signal = sig;
}

// The cores this process may run on, as Open MPI counts a machine's slots without a hostfile: distinct
// (package, core) pairs of the CPUs in the affinity mask (hardware threads of one core count once).
int local_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string topo = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    std::string package, core;
    std::ifstream(topo + "physical_package_id") >> package;
    std::ifstream(topo + "core_id") >> core;
    if (package.empty() || core.empty()) core = "cpu" + std::to_string(cpu);  // unknown: a core of its own
    cores.insert({package, core});
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

// Whether the mpirun arguments after `--` place ranks on hosts themselves.
bool places_hosts(const std::vector<std::string>& extra) {
  for (const std::string& a : extra) {
    for (const char* flag : {"--host", "-host", "-H", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
                             "--default-hostfile", "--oversubscribe", "-oversubscribe"}) {
      if (a == flag) return true;
    }
    if (a.find("OVERSUBSCRIBE") != std::string::npos) return true;
  }
  return false;
}

const char* meaning(int code) {
  switch (code) {
    case 1: return " (a configuration or listener error)";
    case 2: return " (a start-up failure)";
    case 3: return " (a rank died)";
    default: return "";
  }
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

// The processes below `root` (mpirun's ranks on this machine: its children, each in a process group of its
// own), from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid) children.emplace(ppid, static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (auto [it, end] = children.equal_range(p); it != end; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

// How a job under this command ended.
struct MpirunEnd {
  int code = 0;              // mpirun's exit status, or 128 + signal
  bool slots_short = false;  // Open MPI reported too few slots
  int forced_by = 0;         // the first signal, when the job had to be ended rather than stopped; else 0
};

// What the wait loop has asked of the job; a signal, or the time one step may take, moves it on.
enum class Ending { kRunning, kStopping, kTerminating, kKilling };

constexpr auto kKillAfter = std::chrono::seconds(10);  // from SIGTERM to mpirun to SIGKILL for it and its ranks

// Runs mpirun (argv) in its own process group with stdin from /dev/null and, unless `raw`, its stderr
// through MpiOutputFilter; forwards this command's SIGINT/SIGTERM as described at the top.
MpirunEnd run_mpirun(std::vector<std::string>& args, bool raw, std::chrono::seconds stop_timeout,
                     const std::string& exit_file) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int err[2] = {-1, -1};
  if (!raw && pipe2(err, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "tandem launch: pipe: %s\n", std::strerror(errno));
    return {1, false, 0};
  }
  // Blocked here, a SIGINT or SIGTERM would never reach count_signal, and in mpirun (forked below with this
  // mask) the SIGUSR1 that stops the job would stay pending.
  unblock_stop_signals();
  struct sigaction counting {};
  counting.sa_handler = count_signal;
  sigemptyset(&counting.sa_mask);
  sigaction(SIGINT, &counting, nullptr);  // no SA_RESTART: a signal interrupts poll and waitpid
  sigaction(SIGTERM, &counting, nullptr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "tandem launch: fork: %s\n", std::strerror(errno));
    return {1, false, 0};
  }
  if (child == 0) {
    // Its own group: a Ctrl-C on the terminal reaches this command only. Ended if this command dies.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // Not the terminal: a background group reading it would be stopped (and no rank reads stdin).
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    if (!raw) dup2(err[1], STDERR_FILENO);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "tandem launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(child, child);
  if (!raw) close(err[1]);
  MpiOutputFilter filter;
  auto pass = [](const std::string& text) {
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), stderr);
  };
  using Clock = std::chrono::steady_clock;
  Ending ending = Ending::kRunning;
  Clock::time_point since = Clock::now();  // when `ending` last moved on
  int first_signal = 0;
  // One step further; `why` says what moved it (a signal's name, or the time a step took).
  auto escalate = [&](const std::string& why) {
    switch (ending) {
      case Ending::kRunning:
        ending = Ending::kStopping;
        std::fprintf(stderr,
                     "tandem launch: %s: stopping the job (the work in hand is answered first); a second signal ends "
                     "it at once\n",
                     why.c_str());
        kill(child, SIGUSR1);  // mpirun forwards it to every rank; rank 0 stops, the workers ignore it
        // Not every mpirun does (rank0_process.h): rank 0 hears it from here too where it runs on this machine.
        if (const pid_t rank0 = local_rank0(exit_file); rank0 > 0) kill(rank0, SIGUSR1);
        break;
      case Ending::kStopping:
        ending = Ending::kTerminating;
        std::fprintf(stderr, "tandem launch: %s: ending the job now (SIGTERM to mpirun)\n", why.c_str());
        kill(child, SIGTERM);
        break;
      case Ending::kTerminating:
        ending = Ending::kKilling;
        std::fprintf(stderr, "tandem launch: %s: killing mpirun and its ranks on this machine (SIGKILL)\n",
                     why.c_str());
        for (const pid_t p : descendants(child)) kill(p, SIGKILL);
        kill(-child, SIGKILL);
        break;
      case Ending::kKilling: return;
    }
    std::fflush(stderr);
    since = Clock::now();
  };
  int handled = 0;
  int status = 0;
  bool exited = false;
  bool open = !raw;
  while (!exited || open) {
    while (!exited && handled < g_signals) {
      ++handled;
      const int sig = g_last_signal;
      if (first_signal == 0) first_signal = sig;
      escalate(std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + (handled > 1 ? " again" : ""));
    }
    const auto waited = Clock::now() - since;
    if (!exited && ending == Ending::kStopping && stop_timeout.count() > 0 && waited >= stop_timeout) {
      escalate(
          fmt::format("the job has not stopped {} s after the stop request (--stop-timeout)", stop_timeout.count()));
    } else if (!exited && ending == Ending::kTerminating && waited >= kKillAfter) {
      escalate(fmt::format("mpirun is still there {} s after SIGTERM", kKillAfter.count()));
    }
    if (open) {
      pollfd p{err[0], POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char chunk[8192];
        const ssize_t n = read(err[0], chunk, sizeof chunk);
        if (n > 0) {
          pass(filter.feed(std::string_view(chunk, static_cast<size_t>(n))));
        } else if (n == 0 || errno != EINTR) {
          open = false;
        }
      }
    } else {
      usleep(50 * 1000);
    }
    if (!exited) {
      const pid_t r = waitpid(child, &status, WNOHANG);
      exited = r == child || (r < 0 && errno != EINTR);
      // mpirun gone: what is in the pipe now is passed on, and nothing more waited for (a process it left
      // behind may hold the pipe open, and would keep this command waiting as long as it lives).
      if (exited && open) {
        fcntl(err[0], F_SETFL, O_NONBLOCK);
        char chunk[8192];
        ssize_t n = 0;
        while ((n = read(err[0], chunk, sizeof chunk)) > 0) {
          pass(filter.feed(std::string_view(chunk, static_cast<size_t>(n))));
        }
        open = false;
      }
    }
  }
  if (!raw) {
    pass(filter.finish());
    close(err[0]);
  }
  std::fflush(stderr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, filter.slots_short(), ending >= Ending::kTerminating ? first_signal : 0};
}

// The exit file and rank 0's beside it, once the job is over.
void remove_job_files(const std::string& exit_file) {
  std::remove(exit_file.c_str());
  std::remove(rank0_file(exit_file).c_str());
}

int launch(const LaunchOptions& o) {
  auto loaded = config::load_deployment(o.config);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tandem launch: %s\n", loaded.error().message().c_str());
    return 1;
  }
  const config::Deployment& d = loaded.value();
  const int stop_timeout_s = stop_timeout_for(o, d);
  const int ranks = static_cast<int>(d.ranks.size());
  if (o.np != 0 && o.np != ranks) {
    std::fprintf(stderr, "tandem launch: %s lists %d ranks under 'ranks' but --np is %d; they must agree\n",
                 d.origin.c_str(), ranks, o.np);
    return 1;
  }
  bool oversubscribe = o.oversubscribe;
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
  } else if (!oversubscribe && !places_hosts(o.extra)) {
    // One machine: Open MPI gives it one slot per core and refuses more ranks than that; the coordinator
    // and CPU scorers share cores well, so the job runs oversubscribed instead, and says so.
    const int cores = local_cores();
    if (cores < ranks) {
      std::fprintf(stderr,
                   "tandem launch: %d ranks on the %d cores of this machine: passing --oversubscribe to mpirun (the "
                   "ranks share the cores)\n",
                   ranks, cores);
      oversubscribe = true;
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
    std::fprintf(stderr, "tandem launch: rank %d: %s%s\n", r, config::to_string(rank.role), where.c_str());
  }
  std::fprintf(stderr, "tandem launch: the coordinator will listen on http://%s:%s\n", d.server.host.c_str(),
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
  if (oversubscribe) args.push_back("--oversubscribe");
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  std::error_code ec;
  const std::string config_abs = std::filesystem::absolute(o.config, ec).string();
  for (const std::string& a : {self_path(), std::string("serve"), std::string("--config"), config_abs,
                               std::string("--exit-file"), exit_file}) {
    args.push_back(a);
  }
  std::string shown;
  for (const auto& a : args) shown += (shown.empty() ? "" : " ") + shell_quote(a);
  // The plan is a log (stderr); under --dry-run the command itself is the output, alone on stdout.
  if (o.dry_run) {
    std::printf("%s\n", shown.c_str());
    std::fflush(stdout);
    remove_job_files(exit_file);
    return 0;
  }
  std::fprintf(stderr, "tandem launch: %s\n", shown.c_str());
  if (geteuid() == 0 && (std::getenv("OMPI_ALLOW_RUN_AS_ROOT") == nullptr ||
                         std::getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == nullptr)) {
    std::fprintf(stderr,
                 "tandem launch: this runs as root, which mpirun refuses unless OMPI_ALLOW_RUN_AS_ROOT=1 and "
                 "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set; set both, or run as another user\n");
    remove_job_files(exit_file);
    return 1;
  }

  const MpirunEnd end = run_mpirun(args, o.raw_mpi_output, std::chrono::seconds(stop_timeout_s), exit_file);
  int code = end.code;
  std::ifstream in(exit_file);
  int reported = -1;
  const bool has_report = static_cast<bool>(in >> reported);
  if (end.forced_by != 0) {
    // Ended, not stopped: what rank 0 may have written is not how the job ended.
    code = has_report && reported != 0 ? reported : 128 + end.forced_by;
    remove_job_files(exit_file);
    std::fprintf(stderr, "tandem launch: the job was ended before it stopped cleanly (exit %d)\n", code);
    return code;
  }
  if (has_report) {
    code = reported;
  } else if (end.slots_short) {
    std::fprintf(stderr,
                 "tandem launch: Open MPI has fewer slots than the %d ranks of %s; pass --oversubscribe (ranks share "
                 "cores) or a --hostfile with more slots\n",
                 ranks, d.origin.c_str());
    code = 1;
  } else if (code == 0) {
    std::fprintf(stderr, "tandem launch: the coordinator reported no exit status (it died, or never started)\n");
    code = 1;
  }
  remove_job_files(exit_file);
  if (code != 0) {
    std::fprintf(stderr, "tandem launch: the job exited with %d%s\n", code, meaning(code));
  } else if (g_signals > 0) {
    std::fprintf(stderr, "tandem launch: the job stopped cleanly\n");
  }
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
  cmd->add_flag("--oversubscribe", o->oversubscribe,
                "allow more ranks than a hostfile's slots (on one machine it is added when the cores are fewer)");
  cmd->add_flag("--dry-run", o->dry_run, "check and print the mpirun command without running it");
  cmd->add_flag("--raw-mpi-output", o->raw_mpi_output,
                "pass mpirun's stderr on unfiltered (Open MPI's abort banners and PMIx errors included)");
  cmd->add_option("--exit-dir", o->exit_dir,
                  "folder for rank 0's exit code; on several nodes, one rank 0's node shares with this one");
  cmd->add_option("--stop-timeout", o->stop_timeout_s,
                  "seconds an orderly stop (Ctrl-C, SIGTERM) may take before the job is ended; 0: no limit "
                  "(default: limits.shutdown_drain_ms + 50 s, 60 s with the default drain)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("extra", o->extra, "after --: more mpirun arguments");
  cmd->callback([o, &exit_code] { exit_code = launch(*o); });
}

}  // namespace tandem::launch
