#include "launch/rank0_process.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <vector>

namespace tandem::launch {
namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

// A process's arguments (/proc/PID/cmdline, NUL-separated).
std::vector<std::string> arguments(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t at = 0;
  while (at < raw.size()) {
    const size_t end = raw.find('\0', at);
    out.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

}  // namespace

std::string rank0_file(const std::string& exit_file) { return exit_file + ".rank0"; }

void write_rank0_file(const std::string& exit_file) {
  std::ofstream(rank0_file(exit_file), std::ios::trunc) << host_name() << " " << getpid() << "\n";
}

pid_t local_rank0(const std::string& exit_file) {
  std::ifstream in(rank0_file(exit_file));
  std::string host;
  long pid = 0;
  if (!(in >> host >> pid) || pid <= 1 || host != host_name()) return 0;
  const std::vector<std::string> args = arguments(static_cast<pid_t>(pid));
  bool serve = false, ours = false;
  for (size_t i = 0; i < args.size(); ++i) {
    serve = serve || args[i] == "serve";
    ours = ours || (args[i] == "--exit-file" && i + 1 < args.size() && args[i + 1] == exit_file);
  }
  return serve && ours ? static_cast<pid_t>(pid) : 0;
}

}  // namespace tandem::launch
