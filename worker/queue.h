// BlockingQueue: the one way threads hand work to each other (style.md "each thread one job, a name
// and a queue"). close() wakes every waiter; pop() then drains what is left and returns nullopt.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace tandem::worker {

template <typename T>
class BlockingQueue {
 public:
  // False when the queue is closed (the item is dropped).
  bool push(T item) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
    return take();
  }
  std::optional<T> try_pop() {
    std::lock_guard lock(mutex_);
    return take();
  }
  template <typename Rep, typename Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> wait) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, wait, [&] { return closed_ || !items_.empty(); });
    return take();
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return items_.size();
  }

 private:
  std::optional<T> take() {
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

// Names the calling thread ("compute", "mpi", "batcher") for debuggers and `top -H`.
void name_this_thread(const char* name);

// The polling threads' pause: none while there is work, growing to `max` while idle, so an idle rank
// costs little CPU and a busy one answers within microseconds.
class IdleBackoff {
 public:
  explicit IdleBackoff(std::chrono::microseconds max = std::chrono::microseconds(500)) : max_(max) {}
  void busy() { wait_ = std::chrono::microseconds(0); }
  void idle();
  // After one round of a polling loop: idle() if nothing happened, else busy().
  void after(bool active) {
    if (active) {
      busy();
    } else {
      idle();
    }
  }

 private:
  std::chrono::microseconds max_;
  std::chrono::microseconds wait_{0};
};

}  // namespace tandem::worker
