// ServiceJob: a real serving job for the MPI tests: writes a deployment YAML into a fresh folder, runs
// `tandem launch` in its own process group with output to a log (without --oversubscribe: on a machine
// with fewer cores than ranks the launcher adds it itself), finds the port the coordinator prints, and
// can kill one rank. The destructor ends whatever is left, so a failing test never leaves ranks behind.
// Also: running a command to completion with its output, and checks that a port is free and that
// Open MPI's noise stays out of a job's output.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh folder under /tmp named after the test, removed at the end.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("tandem-svc-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    if (std::getenv("TANDEM_KEEP_TEST_DIRS") == nullptr) std::filesystem::remove_all(path_);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs argv with stdout+stderr to `log`, in a new process group; returns the pid.
inline pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out == nullptr) _exit(126);
    dup2(fileno(stdout), fileno(stderr));
    // mpirun refuses root without these (CI containers run as root).
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

// Waits for `pid` up to `timeout`; its exit code, 128+signal, or nullopt if still running.
inline std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct CommandResult {
  int code = -1;
  std::string output;
};

// Runs a command to completion (killed after `timeout`), capturing what it prints.
inline CommandResult run_command(const std::vector<std::string>& argv, const std::filesystem::path& log,
                                 std::chrono::milliseconds timeout = std::chrono::milliseconds(300000)) {
  const pid_t pid = spawn(argv, log);
  auto code = wait_exit(pid, timeout);
  if (!code) {
    kill(-pid, SIGKILL);
    code = wait_exit(pid, std::chrono::milliseconds(5000));
  }
  return {code.value_or(-1), read_text(log)};
}

class ServiceJob {
 public:
  // Writes `yaml` as deploy.yaml and starts `tandem launch` on it (after `prefix`, a command that execs
  // the rest, such as `ip netns exec NS`).
  ServiceJob(const std::string& yaml, std::vector<std::string> extra_args = {}, std::vector<std::string> prefix = {}) {
    config_ = dir_.path() / "deploy.yaml";
    std::ofstream(config_) << yaml;
    log_ = dir_.path() / "job.log";
    std::vector<std::string> argv = std::move(prefix);
    argv.insert(argv.end(), {TANDEM_BINARY, "launch", "--config", config_.string(), "--exit-dir",
                             dir_.path().string()});
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    pid_ = spawn(argv, log_);
  }
  // An orderly stop first (Ctrl-C on the launcher), then SIGKILL for whatever is left: the launcher's
  // group, mpirun's (its own group, led by it) and the ranks.
  ~ServiceJob() {
    if (!exit_code_) {
      kill(pid_, SIGINT);
      if (!wait(std::chrono::milliseconds(15000))) {
        for (pid_t p : processes("mpirun")) kill(-p, SIGKILL);
        kill(-pid_, SIGKILL);
        wait_exit(pid_, std::chrono::milliseconds(10000));
      }
    }
    for (pid_t rank : ranks()) kill(rank, SIGKILL);
  }
  ServiceJob(const ServiceJob&) = delete;
  ServiceJob& operator=(const ServiceJob&) = delete;

  // The port rank 0 printed, waiting up to `timeout`; nullopt if the job died or never got there.
  std::optional<uint16_t> wait_listening(std::chrono::milliseconds timeout = std::chrono::milliseconds(120000)) {
    const std::regex line("tandem: serving .* at http://127\\.0\\.0\\.1:([0-9]+)");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string text = output();
      if (std::regex_search(text, m, line)) return static_cast<uint16_t>(std::stoi(m[1]));
      if (auto code = wait(std::chrono::milliseconds(50))) return std::nullopt;
    }
    return std::nullopt;
  }
  // The launcher's exit code once it ends within `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (!exit_code_) exit_code_ = wait_exit(pid_, timeout);
    return exit_code_;
  }
  std::string output() const { return read_text(log_); }
  pid_t launcher() const { return pid_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // The processes running this job's file whose command line starts with `program` ("mpirun", or the
  // tandem binary for the launcher and the ranks).
  std::vector<pid_t> processes(const std::string& program) const {
    std::vector<pid_t> out;
    for (const Process& p : job_processes()) {
      if (p.cmdline.rfind(program, 0) == 0) out.push_back(p.pid);
    }
    return out;
  }
  // The pids of this job's ranks (processes whose command line runs `serve` on this job's file),
  // by MPI rank; empty slots for ranks not found.
  std::vector<pid_t> ranks() const {
    std::vector<pid_t> out;
    for (const Process& p : job_processes()) {
      if (p.cmdline.find(" serve ") == std::string::npos || p.cmdline.find("mpirun") != std::string::npos) continue;
      std::string environ = read_text(p.proc / "environ");
      const std::string key = std::string(1, '\0') + "OMPI_COMM_WORLD_RANK=";
      environ.insert(0, 1, '\0');
      const size_t at = environ.find(key);
      if (at == std::string::npos) continue;
      const size_t rank = std::stoul(environ.substr(at + key.size()));
      if (out.size() <= rank) out.resize(rank + 1, 0);
      out[rank] = p.pid;
    }
    return out;
  }
  bool kill_rank(size_t rank) {
    const auto pids = ranks();
    if (rank >= pids.size() || pids[rank] == 0) return false;
    return kill(pids[rank], SIGKILL) == 0;
  }

 private:
  struct Process {
    pid_t pid = 0;
    std::filesystem::path proc;  // its /proc folder
    std::string cmdline;         // arguments joined by spaces
  };
  // Every process whose command line names this job's file.
  std::vector<Process> job_processes() const {
    std::vector<Process> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = read_text(entry.path() / "cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(config_.string()) == std::string::npos) continue;
      out.push_back({static_cast<pid_t>(std::stol(name)), entry.path(), std::move(cmdline)});
    }
    return out;
  }

  TempDir dir_;
  std::filesystem::path config_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Whether a listener can take `port` now (with SO_REUSEADDR, as tandem's own listener does): what an
// immediate relaunch needs.
inline bool port_is_free(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE: the sockets API takes sockaddr*
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  return ok;
}

// The first piece of Open MPI's noise (abort banners, PMIx and ORTE error lines, help aggregation, signal
// forwarding) in a job's output, or "" when there is none.
inline std::string mpi_noise(const std::string& output) {
  for (const char* noise : {"MPI_ABORT", "PMIX ERROR", "ORTE_ERROR_LOG", "orte_base_help_aggregate",
                            "more processes have sent help message", "Forwarding signal", "-------------------"}) {
    if (output.find(noise) != std::string::npos) return noise;
  }
  return "";
}

}  // namespace tandem::testing
