// GenerationApi: POST /v1/completions and /v1/chat/completions in front of a GenerationService. It
// checks bodies at the edge (parse_completion.h), renders chat templates and tokenizes, checks the
// prompt against the service's context, submits token ids, and answers as OpenAI does: whole JSON or a
// server-sent-event stream, the text detokenized as it comes (text_stream.h) and cut at stop strings.
// A client that leaves, a request past its deadline and a matched stop string cancel the request.
// Api forwards these routes to it (Api::open_generation); it is an HttpHandler of its own for tests.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "coordinator/generation_frontend.h"
#include "coordinator/generation_service.h"
#include "coordinator/http_server.h"
#include "coordinator/metrics.h"

namespace tandem::coordinator {

class GenerationApi final : public HttpHandler {
 public:
  // `service` null: the deployment runs no generation roles, and both routes answer 404 saying so.
  // `frontend`, `service` and `metrics` outlive it.
  GenerationApi(const GenerationFrontend& frontend, GenerationService* service, Metrics& metrics);

  static bool serves(std::string_view path);  // "/v1/completions", "/v1/chat/completions"
  void handle(HttpRequest request, std::shared_ptr<Exchange> exchange) override;
  void record(const std::string& target, unsigned status, double seconds) override;
  // This model's entry of GET /v1/models.
  nlohmann::json model_entry() const;
  const GenerationService* service() const { return service_; }

 private:
  void complete(bool chat, const HttpRequest& request, const std::shared_ptr<Exchange>& exchange);

  const GenerationFrontend& frontend_;
  GenerationService* service_;
  Metrics& metrics_;
  std::atomic<uint64_t> answers_{0};  // numbers answer ids
  uint64_t id_salt_ = 0;              // per process, so ids differ across restarts
};

}  // namespace tandem::coordinator
