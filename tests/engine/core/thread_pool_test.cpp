// ThreadPool: every index runs exactly once, for any size, grain and pool width.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "engine/core/thread_pool.h"

namespace tandem {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (size_t threads : {1u, 2u, 5u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {0u, 1u, 7u, 1000u}) {
      for (size_t grain : {1u, 3u, 64u}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, grain, [&](size_t b, size_t e) {
          ASSERT_LE(b, e);
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain << " " << i;
      }
    }
  }
}

TEST(ThreadPool, RunsManyJobsInARow) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int job = 0; job < 500; ++job) {
    pool.parallel_for(100, 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) sum += static_cast<long>(i);
    });
  }
  EXPECT_EQ(sum.load(), 500L * 4950);
}

}  // namespace
}  // namespace tandem
