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

// Whether `handler` still answers `sig`: a library started after it was installed (MPI's run-time, a
// transport under it) may have taken the signal for itself.
inline bool handles_signal(int sig, void (*handler)(int)) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return (now.sa_flags & SA_SIGINFO) == 0 && now.sa_handler == handler;
}

}  // namespace tandem::launch
