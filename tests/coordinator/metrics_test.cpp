// Prometheus text of the scoring metrics (coordinator/metrics.h): counters by label, cumulative
// histogram buckets with +Inf, _sum and _count, and the rank gauges.
#include <gtest/gtest.h>

#include "coordinator/metrics.h"

namespace tandem::coordinator {
namespace {

bool has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 4.0, 9.0}) h.observe(v);
  std::string out;
  h.render(out, "x", "k=\"v\"");
  EXPECT_EQ(out,
            "x_bucket{k=\"v\",le=\"1\"} 2\n"
            "x_bucket{k=\"v\",le=\"2\"} 3\n"
            "x_bucket{k=\"v\",le=\"5\"} 4\n"
            "x_bucket{k=\"v\",le=\"+Inf\"} 5\n"
            "x_sum{k=\"v\"} 16\n"
            "x_count{k=\"v\"} 5\n");
  std::string bare;
  Histogram({1}).render(bare, "y", "");
  EXPECT_EQ(bare, "y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n");
}

TEST(Metrics, RendersEveryFamily) {
  Metrics m;
  m.count_request("/v1/decide", 200, 0.003);
  m.count_request("/v1/decide", 200, 0.004);
  m.count_request("/v1/decide", 429, 0.0001);
  m.count_questions("choice", 3);
  m.observe_queue_seconds(0.0007);
  m.observe_batch(ir::Bucket{64, 16, 64}, 3, 50);
  m.observe_run(2, ir::Bucket{64, 16, 64}, 0.02);
  m.count_batch_failure(2);
  const std::string text =
      m.render(7, {RankGauge{1, "scorer", true, 2, 100, 200}, RankGauge{2, "target", false, 0, 100, 0, 3072}});
  EXPECT_TRUE(has(text, "tandem_requests_total{endpoint=\"/v1/decide\",status=\"200\"} 2"));
  EXPECT_TRUE(has(text, "tandem_requests_total{endpoint=\"/v1/decide\",status=\"429\"} 1"));
  EXPECT_TRUE(has(text, "tandem_request_duration_seconds_count{endpoint=\"/v1/decide\"} 3"));
  EXPECT_TRUE(has(text, "tandem_questions_total{qtype=\"choice\"} 3"));
  EXPECT_TRUE(has(text, "tandem_queue_depth 7"));
  EXPECT_TRUE(has(text, "tandem_queue_time_seconds_bucket{le=\"0.001\"} 1"));
  EXPECT_TRUE(has(text, "tandem_batch_sequences_bucket{bucket=\"64/16/64\",le=\"4\"} 1"));
  EXPECT_TRUE(has(text, "tandem_batch_tokens_bucket{bucket=\"64/16/64\",le=\"32\"} 0"));
  EXPECT_TRUE(has(text, "tandem_batch_tokens_bucket{bucket=\"64/16/64\",le=\"64\"} 1"));
  EXPECT_TRUE(has(text, "tandem_plan_run_seconds_count{rank=\"2\",bucket=\"64/16/64\"} 1"));
  EXPECT_TRUE(has(text, "tandem_batch_failures_total{rank=\"2\"} 1"));
  EXPECT_TRUE(has(text, "tandem_rank_up{rank=\"1\",role=\"scorer\"} 1"));
  EXPECT_TRUE(has(text, "tandem_rank_up{rank=\"2\",role=\"target\"} 0"));
  EXPECT_TRUE(has(text, "tandem_rank_inflight_batches{rank=\"1\"} 2"));
  EXPECT_TRUE(has(text, "tandem_rank_memory_bytes{rank=\"1\",kind=\"plans\"} 200"));
  EXPECT_TRUE(has(text, "tandem_rank_memory_bytes{rank=\"1\",kind=\"kv_cache\"} 0"));
  EXPECT_TRUE(has(text, "tandem_rank_memory_bytes{rank=\"2\",kind=\"kv_cache\"} 3072"));
  EXPECT_TRUE(has(text, "# TYPE tandem_request_duration_seconds histogram"));
  EXPECT_TRUE(has(text, "# TYPE tandem_requests_total counter"));
}

}  // namespace
}  // namespace tandem::coordinator
