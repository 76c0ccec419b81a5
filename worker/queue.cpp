// Thread names and the idle pause of the polling threads (queue.h).
#include "worker/queue.h"

#include <pthread.h>

#include <algorithm>
#include <thread>

namespace tandem::worker {

void name_this_thread(const char* name) {
  char shortened[16] = {};  // Linux keeps 15 characters
  for (size_t i = 0; i < 15 && name[i] != '\0'; ++i) shortened[i] = name[i];
  pthread_setname_np(pthread_self(), shortened);
}

void IdleBackoff::idle() {
  if (wait_.count() > 0) std::this_thread::sleep_for(wait_);
  wait_ = std::min(max_, wait_ + std::chrono::microseconds(wait_.count() / 2 + 20));
}

}  // namespace tandem::worker
