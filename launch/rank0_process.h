// Rank 0's process, named beside the exit file (`<exit file>.rank0`: "<host> <pid>"), so that `tandem
// launch` can ask it to stop directly as well as through mpirun. mpirun passes SIGUSR1 on to every rank, but
// not every mpirun does: the H200 machine's Open MPI 4.1.6 caught it and passed nothing on, so a job there
// never stopped on Ctrl-C (tools/stop-check.sh). A rank 0 on another host is left to mpirun.
#pragma once

#include <sys/types.h>

#include <string>

namespace tandem::launch {

std::string rank0_file(const std::string& exit_file);

// Rank 0 under `tandem launch` (it was given an exit file): names this host and this process.
void write_rank0_file(const std::string& exit_file);

// Rank 0's pid when the file names this host and that process is still the `tandem serve` given this exit
// file; 0 otherwise (no file yet, another host, a pid reused since).
pid_t local_rank0(const std::string& exit_file);

}  // namespace tandem::launch
