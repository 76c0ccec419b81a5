// The signals that stop a job (SIGINT, SIGTERM from a user; SIGUSR1 from `tandem launch` to mpirun, passed on
// to the ranks) unblocked in the calling thread. A signal mask passes through fork and exec, so a mask that
// blocks them, inherited from whoever started the command, would keep the job from ever hearing of a stop.
// Call it before starting threads (they inherit the mask) or children (mpirun).
#pragma once

#include <pthread.h>

#include <csignal>

namespace tandem::launch {

inline void unblock_stop_signals() {
  sigset_t stop;
  sigemptyset(&stop);
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
}

}  // namespace tandem::launch
