// MpiSession (mpi_session.h).
#include "worker/mpi_session.h"

#include <mpi.h>

#include <cstdlib>

#include "worker/mpi_check_impl.h"

namespace tandem::worker {

Result<std::unique_ptr<MpiSession>> MpiSession::init(int* argc, char*** argv) {
  int provided = 0;
  TANDEM_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    return Error(ErrorKind::kUnsupported, "this MPI library does not provide MPI_THREAD_FUNNELED");
  }
  // A failed call must come back as a code we can report, not end the process from inside MPI.
  TANDEM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0;
  int size = 1;
  TANDEM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  TANDEM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return std::unique_ptr<MpiSession>(new MpiSession(rank, size));
}

MpiSession::~MpiSession() { finalize(); }

void MpiSession::finalize() {
  if (finalized_) return;
  finalized_ = true;
  MPI_Finalize();
}

void MpiSession::abort(int code) {
  finalized_ = true;
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return on Open MPI; this is for one that would
}

}  // namespace tandem::worker
