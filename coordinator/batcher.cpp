// Batcher (batcher.h): admission, then a loop of pack, wait to fill, pick a rank, dispatch.
#include "coordinator/batcher.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "coordinator/pack_batch.h"
#include "engine/core/log.h"

namespace tandem::coordinator {

struct Batcher::Impl {
  Impl(const config::Deployment& d, const ir::BucketTable& b, RankTable& r, worker::BlockingQueue<Dispatch>& o,
       Metrics& m)
      : buckets(b),
        pack(PackLimits{d.batcher.max_batch_tokens, &buckets}),
        max_wait(std::chrono::microseconds(d.batcher.max_wait_us)),
        max_queue(d.limits.max_queue_sequences),
        ranks(r),
        outbox(o),
        metrics(m) {}

  void run();
  // Drops items whose job is settled (cancelled, failed) and fails those past their deadline.
  void prune_locked(Clock::time_point now);
  void fail_all_locked(const ApiError& error);
  void send(int rank, std::deque<WorkItem> items, const Pack& p);

  ir::BucketTable buckets;
  PackBatch pack;
  std::chrono::microseconds max_wait;
  size_t max_queue;
  RankTable& ranks;
  worker::BlockingQueue<Dispatch>& outbox;
  Metrics& metrics;

  mutable std::mutex mutex;
  std::condition_variable arrived;
  std::deque<WorkItem> queue;
  bool stopping = false;
  std::optional<ApiError> stop_error;
  uint64_t next_batch_id = 1;
  std::thread thread;
};

void Batcher::Impl::prune_locked(Clock::time_point now) {
  std::erase_if(queue, [&](const WorkItem& item) {
    if (item.job->finished()) return true;
    if (now < item.job->deadline()) return false;
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - item.job->created()).count();
    item.job->fail(ApiError{504, fmt::format("timed out after {} ms waiting in the queue", waited), "timeout",
                            std::nullopt});
    return true;
  });
}

void Batcher::Impl::fail_all_locked(const ApiError& error) {
  for (const WorkItem& item : queue) item.job->fail(error);
  queue.clear();
}

void Batcher::Impl::send(int rank, std::deque<WorkItem> items, const Pack& p) {
  worker::RunBatch rb;
  const auto now = Clock::now();
  for (const WorkItem& item : items) {
    const SequenceInput& s = item.job->sequence(item.index);
    rb.batch.add_sequence(s.ids, s.markers, s.qtype);
    metrics.observe_queue_seconds(std::chrono::duration<double>(now - item.job->created()).count());
  }
  InflightBatch batch;
  batch.rank = rank;
  batch.items.assign(std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
  batch.tokens = p.tokens;
  batch.markers = p.markers;
  batch.bucket = p.bucket;
  batch.sent = now;
  {
    std::lock_guard lock(mutex);
    batch.id = rb.batch_id = next_batch_id++;
  }
  const uint32_t seqs = p.seqs;
  auto frame = worker::encode(rb);
  const uint64_t id = batch.id;
  std::vector<WorkItem> keep = batch.items;  // for a rank that died since it was picked
  if (!ranks.dispatch(std::move(batch))) {
    std::lock_guard lock(mutex);
    queue.insert(queue.begin(), keep.begin(), keep.end());
    return;
  }
  metrics.observe_batch(p.bucket, seqs, p.tokens);
  log::debug("batch {} of {} sequences, {} tokens (bucket {}) to rank {}", id, seqs, p.tokens,
             ir::to_string(p.bucket), rank);
  outbox.push(Dispatch{rank, std::move(frame)});
}

void Batcher::Impl::run() {
  worker::name_this_thread("batcher");
  std::unique_lock lock(mutex);
  while (!stopping) {
    const auto now = Clock::now();
    prune_locked(now);
    if (queue.empty()) {
      arrived.wait(lock);
      continue;
    }
    // Wait for the batch to fill while it is under budget and its oldest sequence is young.
    const Pack p = pack(queue);
    if (p.count == 0) {  // admission keeps this from happening; never let it stall the queue
      queue.front().job->fail(unprocessable("a sequence fits no serving bucket"));
      queue.pop_front();
      continue;
    }
    const auto fill_until = queue.front().job->created() + max_wait;
    if (!p.full && p.count == queue.size() && now < fill_until) {
      arrived.wait_until(lock, std::min(fill_until, queue.front().job->deadline()));
      continue;
    }
    lock.unlock();
    const bool alive = ranks.any_scorer_alive();
    std::optional<int> rank = alive ? ranks.wait_for_room(now + std::chrono::milliseconds(50)) : std::nullopt;
    lock.lock();
    if (stopping) break;
    if (!alive) {
      fail_all_locked(unavailable(fmt::format("no scorer rank is alive: {}", ranks.problem().value_or("none"))));
      continue;
    }
    if (!rank) continue;
    // The queue may have changed while the lock was free: pack again.
    prune_locked(Clock::now());
    if (queue.empty()) continue;
    const Pack q = pack(queue);
    if (q.count == 0) continue;
    std::deque<WorkItem> items(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(q.count));
    queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(q.count));
    lock.unlock();
    send(*rank, std::move(items), q);
    lock.lock();
  }
  fail_all_locked(stop_error.value_or(unavailable("the server is shutting down")));
}

Batcher::Batcher(const config::Deployment& deployment, const ir::BucketTable& buckets, RankTable& ranks,
                 worker::BlockingQueue<Dispatch>& outbox, Metrics& metrics)
    : impl_(std::make_unique<Impl>(deployment, buckets, ranks, outbox, metrics)) {
  impl_->thread = std::thread([this] { impl_->run(); });
}

Batcher::~Batcher() { stop(unavailable("the server is shutting down")); }

std::optional<ApiError> Batcher::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return impl_->stop_error.value_or(unavailable("the server is shutting down"));
    if (impl_->queue.size() + job->size() > impl_->max_queue) {
      return ApiError{429,
                      fmt::format("the queue is full ({} of {} sequences waiting); retry later", impl_->queue.size(),
                                  impl_->max_queue),
                      "queue_full", std::nullopt};
    }
    if (!impl_->ranks.any_scorer_alive()) {
      return unavailable(fmt::format("no scorer rank is alive: {}", impl_->ranks.problem().value_or("none")));
    }
    for (uint32_t i = 0; i < job->size(); ++i) impl_->queue.push_back(WorkItem{job, i});
  }
  impl_->arrived.notify_one();
  return std::nullopt;
}

size_t Batcher::depth() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->queue.size();
}

void Batcher::stop(const ApiError& error) {
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->stopping) {
      impl_->stopping = true;
      impl_->stop_error = error;
    }
  }
  impl_->arrived.notify_all();
  impl_->ranks.notify();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace tandem::coordinator
