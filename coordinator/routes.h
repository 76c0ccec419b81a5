// Api: the routes of serving.md's HTTP table: POST /v1/decide and /v1/score, GET /health, /v1/models
// and /metrics, and POST /v1/completions and /v1/chat/completions forwarded to a GenerationApi once
// open_generation() is called, and the admin routes (admin_api.h) once open_admin() is. It checks requests at the edge, lays decide questions out, queues jobs on
// the batcher and answers when they finish; everything else is 404 or 405.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "coordinator/batcher.h"
#include "coordinator/decision_frontend.h"
#include "coordinator/drafter_admin.h"
#include "coordinator/generation_api.h"
#include "coordinator/http_server.h"
#include "coordinator/metrics.h"
#include "coordinator/rank_table.h"

namespace tandem::coordinator {

// It serves from the moment rank 0 binds its port, before the model is open: until open(), /health and
// /v1/models answer 503 naming what is still loading, /metrics answers, and scoring requests get 503.
class Api final : public HttpHandler {
 public:
  Api(const config::Deployment& deployment, const ir::BucketTable& buckets, Batcher& batcher, RankTable& ranks,
      Metrics& metrics);

  // Rank 0 has opened the model and tokenizer: requests are scored from now on. Call once.
  void open(const DecisionFrontend& scorer);
  // The generation routes are served from now on (until then: 503 when the deployment has a target
  // role, else 404). `generation` outlives the Api. Call once.
  void open_generation(GenerationApi& generation);
  // POST /admin/drain and /admin/undrain act on `drafters` from now on (until then: 503 in a deployment
  // with drafter ranks); /health names the drafters out of service. `drafters` outlives the Api.
  void open_admin(DrafterAdmin& drafters);
  void handle(HttpRequest request, std::shared_ptr<Exchange> exchange) override;
  void record(const std::string& target, unsigned status, double seconds) override;
  // From now on every scoring request gets 503 (the job is stopping).
  void refuse_work() { refusing_ = true; }

 private:
  void score(const DecisionFrontend& scorer, const HttpRequest& request, const std::shared_ptr<Exchange>& exchange);
  void decide(const DecisionFrontend& scorer, const HttpRequest& request, const std::shared_ptr<Exchange>& exchange);
  // Queues the sequences as one job, wired to the exchange: `answer` makes the body when all are
  // scored, an error answers with its status, and a client that leaves cancels the job.
  void submit(std::vector<SequenceInput> sequences, const std::shared_ptr<Exchange>& exchange,
              std::function<std::string(const Job&)> answer);
  void generate(HttpRequest request, const std::shared_ptr<Exchange>& exchange);
  std::optional<ApiError> check_model(const DecisionFrontend& scorer, const std::optional<std::string>& model) const;
  std::optional<ApiError> check_fits(const std::vector<SequenceInput>& sequences, const char* field) const;
  // What is still loading, for 503s before open().
  std::string starting() const;
  HttpResponse health() const;
  HttpResponse models(const DecisionFrontend* scorer) const;  // null: a deployment without scorers
  HttpResponse metrics() const;

  const config::Deployment& deployment_;
  // Null until open(); limits_ is complete before it is published (release), read after (acquire).
  std::atomic<const DecisionFrontend*> scorer_{nullptr};
  std::atomic<GenerationApi*> generation_{nullptr};
  std::atomic<DrafterAdmin*> admin_{nullptr};
  const ir::BucketTable& buckets_;
  Batcher& batcher_;
  RankTable& ranks_;
  Metrics& metrics_;
  RequestLimits limits_;
  std::atomic<bool> refusing_{false};
};

}  // namespace tandem::coordinator
