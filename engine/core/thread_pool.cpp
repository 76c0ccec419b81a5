// ThreadPool implementation: chunks are claimed under one mutex; fine for the coarse chunks the CPU
// backend hands out (rows of a GEMM, heads of an attention).
#include "engine/core/thread_pool.h"

#include <algorithm>

namespace tandem {

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    size_t chunk;
    const std::function<void(size_t, size_t)>* job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (job_ == nullptr || next_chunk_ >= chunks_total_) return;
      chunk = next_chunk_++;
      job = job_;
    }
    const size_t begin = chunk * job_chunk_;
    const size_t end = std::min(job_n_, begin + job_chunk_);
    (*job)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (++chunks_done_ == chunks_total_) done_.notify_all();
    }
  }
}

void ThreadPool::worker_main(size_t /*index*/) {
  size_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  const size_t threads = size();
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // About 4 chunks per thread balances uneven rows without much locking.
  const size_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    next_chunk_ = 0;
    chunks_total_ = (n + chunk - 1) / chunk;
    chunks_done_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return chunks_done_ == chunks_total_; });
  job_ = nullptr;
}

}  // namespace tandem
