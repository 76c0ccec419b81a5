// Packing and dispatch (coordinator/pack_batch.h, batcher.h, rank_table.h) with this test as the
// control plane: first come first served under the token budget and a bucket, waiting to fill, the
// least loaded rank, the in-flight limit, 429 on a full queue, 504 for a job past its deadline in the
// queue, 503 with no scorer alive, cancelled jobs never dispatched, a dead rank's batches handed back.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "coordinator/batcher.h"
#include "coordinator/pack_batch.h"

namespace tandem::coordinator {
namespace {

using namespace std::chrono_literals;

config::Deployment deployment() {
  config::Deployment d;
  d.origin = "test.yaml";
  d.ranks = {config::Rank{config::Role::kCoordinator, {}}, config::Rank{config::Role::kScorer, {}},
             config::Rank{config::Role::kScorer, {}}};
  d.batcher.max_batch_tokens = 64;
  d.batcher.max_wait_us = 30000;
  d.batcher.max_inflight_per_rank = 2;
  d.limits.max_queue_sequences = 10;
  return d;
}

ir::BucketTable table() { return ir::BucketTable::parse("compat 16 2 4\ncompat 64 8 16\n", "t").value(); }

// How a job ended, handed from the thread that settled it to the test.
struct Outcome {
  std::promise<std::optional<ApiError>> promise;
  std::future<std::optional<ApiError>> future = promise.get_future();
  std::optional<ApiError> wait() {
    EXPECT_EQ(future.wait_for(2s), std::future_status::ready);
    return future.get();
  }
};

std::shared_ptr<Job> job(std::vector<uint32_t> lengths, std::chrono::milliseconds deadline = 5000ms,
                         std::shared_ptr<Outcome> outcome = nullptr) {
  std::vector<SequenceInput> seqs;
  for (uint32_t n : lengths) seqs.push_back(SequenceInput{std::vector<uint32_t>(n, 7), n ? std::vector<uint32_t>{0} : std::vector<uint32_t>{}, 0});
  return std::make_shared<Job>(std::move(seqs), Clock::now() + deadline, [outcome](Job& j) {
    if (outcome) outcome->promise.set_value(j.error());
  });
}

TEST(PackBatch, FirstComeFirstServedUnderTheBudget) {
  const auto t = table();
  PackBatch pack(PackLimits{64, &t});
  std::deque<WorkItem> q;
  auto j = job({10, 5, 40, 12, 3});
  for (uint32_t i = 0; i < 5; ++i) q.push_back(WorkItem{j, i});
  Pack p = pack(q);
  EXPECT_EQ(p.count, 3u);  // 10 + 5 + 40 = 55; the 3-token one would fit too but waits behind the 12
  EXPECT_EQ(p.tokens, 55u);
  EXPECT_EQ(p.seqs, 3u);
  EXPECT_EQ(p.markers, 3u);
  EXPECT_EQ(p.bucket, (ir::Bucket{64, 8, 16}));
  EXPECT_TRUE(p.full);
  q.erase(q.begin(), q.begin() + 3);
  p = pack(q);
  EXPECT_EQ(p.count, 2u);  // 12 + 3 fit with room to spare: waiting could add more
  EXPECT_FALSE(p.full);
  EXPECT_EQ(p.bucket, (ir::Bucket{16, 2, 4}));  // the smallest that holds 15 tokens in 2 sequences
  std::deque<WorkItem> three{WorkItem{job({4}), 0}, WorkItem{job({4}), 0}, WorkItem{job({4}), 0}};
  EXPECT_EQ(pack(three).bucket, (ir::Bucket{64, 8, 16}));  // three sequences outgrow the 2-sequence bucket
}

class BatcherTest : public ::testing::Test {
 protected:
  BatcherTest()
      : d_(deployment()),
        topo_(worker::Topology::make(d_, 0, 3).value()),
        ranks_(topo_, d_.batcher.max_inflight_per_rank),
        table_(table()) {}
  void SetUp() override {
    ranks_.set_ready(1, {});
    ranks_.set_ready(2, {});
    batcher_ = std::make_unique<Batcher>(d_, table_, ranks_, outbox_, metrics_);
  }
  void TearDown() override { batcher_.reset(); }
  std::optional<Dispatch> next(std::chrono::milliseconds wait = 2000ms) { return outbox_.pop_for(wait); }
  worker::RunBatch decode_batch(const Dispatch& d) {
    auto m = worker::decode(d.frame, worker::Tag::kCommand);
    EXPECT_TRUE(m.ok());
    return std::get<worker::RunBatch>(m.value());
  }

  config::Deployment d_;
  worker::Topology topo_;
  RankTable ranks_;
  ir::BucketTable table_;
  Metrics metrics_;
  worker::BlockingQueue<Dispatch> outbox_;
  std::unique_ptr<Batcher> batcher_;
};

TEST_F(BatcherTest, WaitsToFillThenSendsOneBatch) {
  const auto start = Clock::now();
  ASSERT_FALSE(batcher_->submit(job({3, 4})).has_value());
  std::this_thread::sleep_for(5ms);
  ASSERT_FALSE(batcher_->submit(job({5})).has_value());
  auto d = next();
  ASSERT_TRUE(d);
  EXPECT_GE(Clock::now() - start, 25ms);  // held for batcher.max_wait_us while under budget
  const auto rb = decode_batch(*d);
  EXPECT_EQ(rb.batch.cu, (std::vector<uint32_t>{0, 3, 7, 12}));
  EXPECT_EQ(ranks_.inflight_batches(), 1u);
  EXPECT_FALSE(next(100ms).has_value());
}

TEST_F(BatcherTest, FullBatchesGoAtOnceToTheLeastLoadedRank) {
  ASSERT_FALSE(batcher_->submit(job({60, 60, 60, 60, 60})).has_value());
  std::vector<int> ranks;
  uint64_t on_rank_2 = 0;
  for (int i = 0; i < 4; ++i) {
    auto d = next(500ms);
    ASSERT_TRUE(d) << i;
    ranks.push_back(d->rank);
    if (d->rank == 2) on_rank_2 = decode_batch(*d).batch_id;
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{1, 1, 2, 2}));  // two per rank: max_inflight_per_rank
  EXPECT_FALSE(next(150ms).has_value());             // the fifth waits for room
  EXPECT_EQ(batcher_->depth(), 1u);
  // A result frees a slot on rank 2: the fifth goes there.
  ASSERT_TRUE(ranks_.finish(2, on_rank_2).has_value());
  auto d = next(500ms);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 2);
}

TEST_F(BatcherTest, FullQueueIs429) {
  // Every in-flight slot taken first, so what follows stays queued.
  ASSERT_FALSE(batcher_->submit(job({60, 60, 60, 60})).has_value());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(next(500ms));
  ASSERT_FALSE(batcher_->submit(job({60, 60, 60, 60, 60, 60, 60, 60})).has_value());
  EXPECT_EQ(batcher_->depth(), 8u);
  auto e = batcher_->submit(job({1, 1, 1}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 429u);
  EXPECT_EQ(e->type, "queue_full");
}

TEST_F(BatcherTest, ExpiredJobsFailWith504) {
  // Fill both ranks so the next job stays queued past its deadline.
  ASSERT_FALSE(batcher_->submit(job({60, 60, 60, 60})).has_value());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(next(500ms));
  auto outcome = std::make_shared<Outcome>();
  ASSERT_FALSE(batcher_->submit(job({2}, 100ms, outcome)).has_value());
  const auto error = outcome->wait();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 504u);
  EXPECT_NE(error->message.find("waiting in the queue"), std::string::npos);
}

TEST_F(BatcherTest, CancelledJobsAreNeverSent) {
  auto j = job({3});
  ASSERT_FALSE(batcher_->submit(j).has_value());
  j->cancel();
  EXPECT_FALSE(next(150ms).has_value());
  EXPECT_EQ(batcher_->depth(), 0u);
}

TEST_F(BatcherTest, NoScorerAliveIs503AndDeadRanksHandBackTheirBatches) {
  ASSERT_FALSE(batcher_->submit(job({60})).has_value());
  auto d = next(500ms);
  ASSERT_TRUE(d);
  auto lost = ranks_.set_dead(d->rank, "killed");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].items.size(), 1u);
  ranks_.set_dead(d->rank == 1 ? 2 : 1, "killed too");
  auto e = batcher_->submit(job({1}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 503u);
  EXPECT_NE(e->message.find("no scorer rank is alive: rank 1 (scorer, cpu) is dead"), std::string::npos) << e->message;
}

TEST_F(BatcherTest, StopFailsWhatIsQueued) {
  ASSERT_FALSE(batcher_->submit(job({60, 60, 60, 60})).has_value());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(next(500ms));
  auto outcome = std::make_shared<Outcome>();
  ASSERT_FALSE(batcher_->submit(job({2}, 5000ms, outcome)).has_value());
  batcher_->stop(unavailable("going away"));
  const auto error = outcome->wait();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 503u);
  EXPECT_EQ(error->message, "going away");
  EXPECT_EQ(batcher_->submit(job({1}))->message, "going away");
}

TEST(JobTest, FirstOutcomeWins) {
  int calls = 0;
  auto j = std::make_shared<Job>(std::vector<SequenceInput>(2), Clock::now() + 1s, [&](Job&) { ++calls; });
  j->complete(0, SequenceResult{{1.0f}, {2.0f, 3.0f}});
  j->fail(unavailable("x"));
  j->complete(1, SequenceResult{{4.0f}, {5.0f, 6.0f}});
  j->cancel();
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(j->error().has_value());
  EXPECT_EQ(j->error()->message, "x");
  int done = 0;
  auto k = std::make_shared<Job>(std::vector<SequenceInput>(2), Clock::now() + 1s, [&](Job&) { ++done; });
  k->complete(1, SequenceResult{{4.0f}, {5.0f, 6.0f}});
  EXPECT_FALSE(k->finished());
  k->complete(0, SequenceResult{{1.0f}, {2.0f, 3.0f}});
  k->fail(unavailable("late"));
  EXPECT_EQ(done, 1);
  EXPECT_FALSE(k->error().has_value());
  EXPECT_EQ(k->results()[1].logits, std::vector<float>{4.0f});
}

}  // namespace
}  // namespace tandem::coordinator
