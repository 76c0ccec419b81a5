// MpiOutputFilter: what `tandem launch` passes on from mpirun's stderr (the ranks' logs and Open MPI's
// own messages). The ranks say why a job ends in one line of their own; Open MPI then adds the same
// noise to every orderly failure and every rank death: the MPI_ABORT banner, "PMIX ERROR: BAD-PARAM",
// ORTE_ERROR_LOG and help-aggregation lines, "Forwarding signal". Those are dropped; Open MPI's "not
// enough slots" banner is dropped and flagged, so the wrapper says it in its own words with the fix.
// Every other line, banners included, passes unchanged. Line-based: a partial line waits for its end.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::launch {

class MpiOutputFilter {
 public:
  // The text to print now for the next chunk of mpirun's output.
  std::string feed(std::string_view chunk);
  // What is still held (a last line without its newline, a banner that never closed).
  std::string finish();
  // Open MPI said it has fewer slots than the job asks for.
  bool slots_short() const { return slots_short_; }

 private:
  std::string line(std::string text);  // one complete line, without its newline
  std::string close_banner();

  std::string partial_;
  std::vector<std::string> banner_;  // lines from an opening dash line on
  bool in_banner_ = false;
  bool slots_short_ = false;
};

}  // namespace tandem::launch
