// ThreadPool: a fixed set of workers running parallel_for over an index range.
// Work is split into contiguous chunks, and callers make each index's result depend on that index
// alone, so results are bit-identical for any thread count (the CPU backend's promise).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // threads == 0 picks std::thread::hardware_concurrency().
  explicit ThreadPool(size_t threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls fn(begin, end) over [0, n) in chunks of at least `grain` indices, on the calling thread and
  // the workers; returns when every chunk is done. Not reentrant: fn must not call parallel_for.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_main(size_t index);
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  size_t next_chunk_ = 0;
  size_t chunks_total_ = 0;
  size_t chunks_done_ = 0;
  size_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace tandem
