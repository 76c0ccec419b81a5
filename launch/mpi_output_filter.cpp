// MpiOutputFilter (mpi_output_filter.h). Open MPI 4.1's messages, as mpirun prints them:
//   [host:pid] PMIX ERROR: BAD-PARAM in file ../../../src/event/pmix_event_notification.c at line 1033
//   [host:pid] [[20494,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ...
//   [host:pid] 2 more processes have sent help message help-mpi-api.txt / mpi-abort
//   [host:pid] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages
//   mpirun: Forwarding signal 10 to job
// and help banners between two lines of dashes. tandem's own log lines ("[2026-...] [rank 0] [error]
// ...") also start with a bracket, so a line is Open MPI's only by what follows its "[host:pid] ".
#include "launch/mpi_output_filter.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace tandem::launch {
namespace {

// A banner grows no longer than this; past it, it was not one, and its lines pass.
constexpr size_t kMaxBannerLines = 80;

bool is_dash_line(std::string_view s) {
  return s.size() >= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c == '-'; });
}

// What follows "[host:pid] " on an Open MPI line, or nothing when the line has no such prefix.
std::string_view after_host_pid(std::string_view s) {
  if (s.empty() || s.front() != '[') return {};
  const size_t close = s.find("] ");
  if (close == std::string_view::npos) return {};
  const std::string_view inside = s.substr(1, close - 1);
  const size_t colon = inside.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == inside.size()) return {};
  const std::string_view pid = inside.substr(colon + 1);
  if (!std::all_of(pid.begin(), pid.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) return {};
  return s.substr(close + 2);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_noise(std::string_view s) {
  if (starts_with(s, "mpirun: Forwarding signal ")) return true;
  const std::string_view rest = after_host_pid(s);
  if (rest.empty()) return false;
  if (starts_with(rest, "PMIX ERROR: ")) return true;
  if (starts_with(rest, "[[") && rest.find("] ORTE_ERROR_LOG: ") != std::string_view::npos) return true;
  if (starts_with(rest, "Set MCA parameter \"orte_base_help_aggregate\"")) return true;
  // "<n> more process(es) have sent help message ..."
  const size_t digits = rest.find_first_not_of("0123456789");
  return digits != 0 && digits != std::string_view::npos && starts_with(rest.substr(digits), " more process");
}

}  // namespace

std::string MpiOutputFilter::feed(std::string_view chunk) {
  partial_.append(chunk);
  std::string out;
  size_t from = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', from)) {
    out += line(partial_.substr(from, nl - from));
    from = nl + 1;
  }
  partial_.erase(0, from);
  return out;
}

std::string MpiOutputFilter::finish() {
  std::string out;
  if (!partial_.empty()) out += line(std::exchange(partial_, {}));
  for (const std::string& l : banner_) out += l + "\n";
  banner_.clear();
  in_banner_ = false;
  return out;
}

std::string MpiOutputFilter::line(std::string text) {
  if (in_banner_) {
    banner_.push_back(std::move(text));
    if (is_dash_line(banner_.back())) return close_banner();
    if (banner_.size() < kMaxBannerLines) return {};
    return finish();
  }
  if (is_dash_line(text)) {
    in_banner_ = true;
    banner_.push_back(std::move(text));
    return {};
  }
  if (is_noise(text)) return {};
  return text + "\n";
}

std::string MpiOutputFilter::close_banner() {
  std::string joined;
  for (const std::string& l : banner_) joined += l + "\n";
  banner_.clear();
  in_banner_ = false;
  // The ranks logged why they aborted; the banner only says that they did.
  if (joined.find("MPI_ABORT was invoked") != std::string::npos) return {};
  if (joined.find("There are not enough slots available") != std::string::npos) {
    slots_short_ = true;
    return {};
  }
  return joined;
}

}  // namespace tandem::launch
