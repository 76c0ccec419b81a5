// TANDEM_MPI_CHECK: turns an MPI return code into an Error carrying the call text, file:line and MPI's
// own description (style.md "C API checks"). Internal to worker/.
#pragma once

#include <mpi.h>

#include <string>

#include "engine/core/result.h"

namespace tandem::worker {

inline Error mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return Error::make(ErrorKind::kIo, "{} failed at {}:{}: {} (MPI error {})", call, file, line,
                     std::string(text, static_cast<size_t>(len)), code);
}

}  // namespace tandem::worker

#define TANDEM_MPI_CHECK(call)                                                            \
  do {                                                                                    \
    const int tandem_mpi_rc_ = (call);                                                    \
    if (tandem_mpi_rc_ != MPI_SUCCESS) {                                                  \
      return ::tandem::worker::mpi_error(tandem_mpi_rc_, #call, __FILE__, __LINE__);      \
    }                                                                                     \
  } while (false)
