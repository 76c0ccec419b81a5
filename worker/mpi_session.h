// MpiSession: MPI_Init_thread (FUNNELED: only the thread that made the session calls MPI) with errors
// returned rather than fatal, and the two ways out: an orderly finalize, or abort when a peer is gone
// (MPI_Finalize would wait for it forever).
#pragma once

#include <memory>

#include "engine/core/result.h"

namespace tandem::worker {

class MpiSession {
 public:
  static Result<std::unique_ptr<MpiSession>> init(int* argc, char*** argv);
  ~MpiSession();  // finalizes unless finalize() or abort() ran
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Every rank must call it; only when all peers are alive.
  void finalize();
  // Ends the whole job with `code` (mpirun reports it unless recovery mode hides it; see
  // launch/launch_command.cpp). Does not return.
  [[noreturn]] void abort(int code);

 private:
  MpiSession(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0;
  int size_ = 1;
  bool finalized_ = false;
};

}  // namespace tandem::worker
