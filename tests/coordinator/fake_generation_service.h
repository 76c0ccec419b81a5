// FakeGenerationService: a GenerationService for the HTTP side's tests. Each request runs on its own
// thread and commits a scripted token stream in rounds of `block` tokens, `delay` apart, ending at
// max_tokens (kLength) or at a stop id, which it keeps (kStop), as the round scheduler does; it can fail
// after some rounds, refuse submissions, and it records the requests and cancellations it saw.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "coordinator/generation_service.h"

namespace tandem::coordinator::testing {

class FakeGenerationService final : public GenerationService {
 public:
  struct Script {
    std::vector<uint32_t> tokens;  // what the model "generates", repeated if max_tokens asks for more
    uint32_t block = 3;            // tokens committed per round
    std::chrono::milliseconds delay{5};
    int fail_after_rounds = -1;    // >= 0: a kFailed event with 503 after that many rounds
    bool forever = false;          // never finish: only cancel() ends it
  };

  FakeGenerationService(uint32_t vocab, uint32_t max_context) : vocab_(vocab), max_context_(max_context) {}
  ~FakeGenerationService() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& h : handles_) h->cancel();
    for (auto& t : threads) t.join();
  }

  std::variant<std::shared_ptr<GenerationHandle>, ApiError> submit(GenerationRequest request,
                                                                  GenerationCallback callback) override {
    std::lock_guard lock(mutex_);
    if (refuse) return *refuse;
    requests_.push_back(request);
    auto handle = std::make_shared<Handle>(*this);
    handles_.push_back(handle);
    threads_.emplace_back([this, handle, request = std::move(request), callback = std::move(callback), s = script] {
      run(*handle, request, callback, s);
    });
    return handle;
  }
  uint32_t vocab() const override { return vocab_; }
  uint32_t max_context() const override { return max_context_; }

  std::vector<GenerationRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // Waits up to `wait` for `n` cancel() calls.
  bool cancelled(int n, std::chrono::milliseconds wait = std::chrono::milliseconds(3000)) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (cancels_.load() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return cancels_.load() >= n;
  }
  int cancels() const { return cancels_.load(); }

  Script script;                   // for the next submissions
  std::optional<ApiError> refuse;  // answer submissions with this

 private:
  struct Handle final : GenerationHandle {
    explicit Handle(FakeGenerationService& s) : service(s) {}
    void cancel() override {
      if (!cancelled.exchange(true)) service.cancels_.fetch_add(1);
    }
    FakeGenerationService& service;
    std::atomic<bool> cancelled{false};
  };

  static void run(Handle& handle, const GenerationRequest& request, const GenerationCallback& callback,
                  const Script& s) {
    GenerationEvent ev;
    uint32_t produced = 0;
    size_t next = 0;
    for (int round = 0;; ++round) {
      std::this_thread::sleep_for(s.delay);
      if (handle.cancelled.load()) {
        callback(GenerationEvent{{}, GenerationFinish::kCancelled, std::nullopt, ev.stats});
        return;
      }
      if (round == s.fail_after_rounds) {
        callback(GenerationEvent{{}, GenerationFinish::kFailed,
                                 ApiError{503, "rank 2 (target) stopped answering", "unavailable", std::nullopt},
                                 ev.stats});
        return;
      }
      GenerationEvent e;
      e.stats = ev.stats;
      for (uint32_t i = 0; i < s.block && (s.forever || produced < request.max_tokens); ++i) {
        const uint32_t id = s.tokens[next++ % s.tokens.size()];
        e.tokens.push_back(id);
        ++produced;
        if (!s.forever &&
            std::find(request.stop_ids.begin(), request.stop_ids.end(), id) != request.stop_ids.end()) {
          e.finish = GenerationFinish::kStop;
          break;
        }
      }
      if (e.finish == GenerationFinish::kNone && !s.forever && produced >= request.max_tokens) {
        e.finish = GenerationFinish::kLength;
      }
      // A round of `block - 1` drafts, of which all but the last token's were accepted.
      e.stats.rounds += 1;
      e.stats.drafted += request.speculative ? s.block - 1 : 0;
      const uint32_t accepted =
          request.speculative && !e.tokens.empty() ? static_cast<uint32_t>(e.tokens.size()) - 1 : 0;
      e.stats.accepted += accepted;
      if (e.stats.accepted_per_position.size() < s.block - 1) e.stats.accepted_per_position.resize(s.block - 1, 0);
      for (uint32_t p = 0; p < accepted; ++p) e.stats.accepted_per_position[p] += 1;
      ev.stats = e.stats;
      callback(e);
      if (e.finish != GenerationFinish::kNone) return;
    }
  }

  uint32_t vocab_;
  uint32_t max_context_;
  std::mutex mutex_;
  std::vector<GenerationRequest> requests_;
  std::vector<std::shared_ptr<Handle>> handles_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancels_{0};
};

}  // namespace tandem::coordinator::testing
