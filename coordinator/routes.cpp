// Api (routes.h).
#include "coordinator/routes.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "coordinator/admin_api.h"
#include "coordinator/answers.h"
#include "coordinator/json_body_impl.h"
#include "coordinator/parse_request.h"
#include "engine/io/laya_config.h"

namespace tandem::coordinator {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 9> kRoutes = {"/v1/decide",      "/v1/score",           "/health",
                                                     "/v1/models",      "/metrics",            "/v1/completions",
                                                     "/v1/chat/completions", "/admin/drain", "/admin/undrain"};

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

HttpResponse json_response(unsigned status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// Each rank's state; a drafter rank out of service also says so ("drain": "draining" or "drained").
json ranks_json(const std::vector<RankView>& ranks, const std::vector<DrainView>& drains) {
  json out = json::array();
  for (const RankView& v : ranks) {
    json r = {{"rank", v.rank}, {"role", config::to_string(v.role)}, {"state", to_string(v.state)}};
    if (!v.detail.empty()) r["detail"] = v.detail;
    for (const DrainView& d : drains) {
      if (d.rank == v.rank) r["drain"] = to_string(d.state);
    }
    out.push_back(std::move(r));
  }
  return out;
}

// A scoring route of a deployment without scorer ranks.
ApiError not_served_here(std::string_view path) {
  return ApiError{404, fmt::format("{} is not served here: the deployment has no scorer ranks", path), "not_found",
                  std::nullopt};
}

// The field a layout error is about: the options when they do not fit, else the piece the tokenizer
// refused ("question", "options[2]"), which BuildLayout puts before the first colon.
std::string layout_param(size_t index, const Error& error) {
  std::string piece = "options";
  if (error.kind() != ErrorKind::kCapacity) piece = error.message().substr(0, error.message().find(':'));
  return fmt::format("questions[{}].{}", index, piece);
}

}  // namespace

Api::Api(const config::Deployment& deployment, const ir::BucketTable& buckets, Batcher& batcher, RankTable& ranks,
         Metrics& metrics)
    : deployment_(deployment), buckets_(buckets), batcher_(batcher), ranks_(ranks), metrics_(metrics) {
  const auto ceiling = buckets_.ceiling("compat").value_or(ir::Bucket{});
  limits_.max_sequences = deployment.limits.max_sequences;
  limits_.max_questions = deployment.limits.max_questions;
  limits_.max_options = deployment.limits.max_options;
  limits_.max_request_tokens = deployment.limits.max_request_tokens;
  limits_.max_sequence_tokens = std::min(deployment.batcher.max_batch_tokens, ceiling.tokens);
  limits_.max_sequence_markers = ceiling.picks;
}

void Api::open(const DecisionFrontend& scorer) {
  limits_.vocab = scorer.vocab();
  limits_.max_model_tokens = scorer.max_sequence_tokens();
  limits_.model_limit = scorer.max_sequence_source();
  scorer_.store(&scorer, std::memory_order_release);
}

void Api::open_generation(GenerationApi& generation) { generation_.store(&generation, std::memory_order_release); }

void Api::open_admin(DrafterAdmin& drafters) { admin_.store(&drafters, std::memory_order_release); }

void Api::generate(HttpRequest request, const std::shared_ptr<Exchange>& exchange) {
  GenerationApi* generation = generation_.load(std::memory_order_acquire);
  if (generation == nullptr) {
    const std::string path(path_of(request.target));
    if (deployment_.serves_generation()) {
      return exchange->reply(error_response(
          unavailable(fmt::format("the server is starting: the generation service behind {} is not open yet", path))));
    }
    return exchange->reply(error_response(ApiError{
        404, fmt::format("{} is not served here: the deployment has no generation roles (target and drafter)", path),
        "not_found", std::nullopt}));
  }
  if (request.method == "POST" && !is_json_content_type(request.content_type)) {
    return exchange->reply(error_response(ApiError{
        415, fmt::format("Content-Type '{}' is not application/json", request.content_type), "unsupported_media_type",
        "Content-Type"}));
  }
  if (refusing_.load()) return exchange->reply(error_response(unavailable("the server is shutting down")));
  generation->handle(std::move(request), exchange);
}

void Api::handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const std::string_view path = path_of(request.target);
  if (GenerationApi::serves(path)) return generate(std::move(request), exchange);
  if (is_admin_route(path)) return exchange->reply(admin_answer(request, deployment_, admin_.load()));
  const bool known = std::find(kRoutes.begin(), kRoutes.end(), path) != kRoutes.end();
  if (!known) {
    return exchange->reply(error_response(ApiError{404, fmt::format("no route {}", path), "not_found", std::nullopt}));
  }
  const bool post = path == "/v1/decide" || path == "/v1/score";
  // A route this deployment does not serve is 404 whatever the method, as an unknown path is (and the
  // generation and admin routes of a job without them): the method is checked on routes that exist.
  if (post && !deployment_.serves_scoring()) return exchange->reply(error_response(not_served_here(path)));
  // HEAD is GET without the body (load balancers probe /health with it); the server drops the body.
  const bool allowed = post ? request.method == "POST" : (request.method == "GET" || request.method == "HEAD");
  if (!allowed) {
    const char* methods = post ? "POST" : "GET, HEAD";
    HttpResponse r = error_response(ApiError{405, fmt::format("{} takes {}, not {}", path, methods, request.method),
                                             "method_not_allowed", std::nullopt});
    r.headers.emplace_back("Allow", methods);
    return exchange->reply(std::move(r));
  }
  if (path == "/health") return exchange->reply(health());
  if (path == "/metrics") return exchange->reply(metrics());
  if (!deployment_.serves_scoring()) {
    if (path == "/v1/models") {
      if (generation_.load(std::memory_order_acquire) == nullptr) {
        return exchange->reply(error_response(unavailable(fmt::format("the server is starting: {}", starting()))));
      }
      return exchange->reply(models(nullptr));
    }
    return exchange->reply(error_response(not_served_here(path)));
  }
  const DecisionFrontend* scorer = scorer_.load(std::memory_order_acquire);
  if (scorer == nullptr) {
    return exchange->reply(error_response(unavailable(fmt::format("the server is starting: {}", starting()))));
  }
  if (path == "/v1/models") return exchange->reply(models(scorer));
  if (!is_json_content_type(request.content_type)) {
    return exchange->reply(error_response(ApiError{
        415, fmt::format("Content-Type '{}' is not application/json", request.content_type), "unsupported_media_type",
        "Content-Type"}));
  }
  if (refusing_.load()) return exchange->reply(error_response(unavailable("the server is shutting down")));
  if (path == "/v1/score") return score(*scorer, request, exchange);
  decide(*scorer, request, exchange);
}

std::string Api::starting() const {
  std::string loading = ranks_.problem().value_or("");
  if (deployment_.serves_scoring() && scorer_.load(std::memory_order_acquire) == nullptr) {
    const config::Model* m = deployment_.model(config::Role::kScorer);
    loading += fmt::format("{}rank 0 is opening {}", loading.empty() ? "" : "; ", m ? m->dir : "the model");
  }
  if (deployment_.serves_generation() && generation_.load(std::memory_order_acquire) == nullptr) {
    const config::Model* m = deployment_.model(config::Role::kTarget);
    loading += fmt::format("{}rank 0 is opening {}", loading.empty() ? "" : "; ", m ? m->dir : "the target");
  }
  return loading;
}

void Api::record(const std::string& target, unsigned status, double seconds) {
  const std::string_view path = path_of(target);
  const bool known = std::find(kRoutes.begin(), kRoutes.end(), path) != kRoutes.end();
  metrics_.count_request(known ? path : "other", status, seconds);
}

std::optional<ApiError> Api::check_model(const DecisionFrontend& scorer, const std::optional<std::string>& model) const {
  if (!model || *model == scorer.name()) return std::nullopt;
  return ApiError{404, fmt::format("model '{}' is not served here; available: {}", *model, scorer.name()),
                  "model_not_found", "model"};
}

std::optional<ApiError> Api::check_fits(const std::vector<SequenceInput>& sequences, const char* field) const {
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceInput& s = sequences[i];
    auto bucket = buckets_.smallest("compat", static_cast<uint32_t>(s.ids.size()), 1,
                                    static_cast<uint32_t>(s.markers.size()));
    if (!bucket.ok() || s.ids.size() > limits_.max_sequence_tokens) {
      return unprocessable(fmt::format("{}[{}] has {} tokens and {} markers, more than one batch holds ({} tokens, "
                                       "batcher.max_batch_tokens and the serving buckets)",
                                       field, i, s.ids.size(), s.markers.size(), limits_.max_sequence_tokens),
                           fmt::format("{}[{}]", field, i));
    }
  }
  return std::nullopt;
}

void Api::score(const DecisionFrontend& scorer, const HttpRequest& request, const std::shared_ptr<Exchange>& exchange) {
  auto parsed = parse_score_request(request.body, limits_);
  if (!parsed.ok()) return exchange->reply(error_response(parsed.error()));
  ScoreRequest& r = parsed.value();
  if (auto e = check_model(scorer, r.model)) return exchange->reply(error_response(*e));
  if (auto e = check_fits(r.sequences, "sequences")) return exchange->reply(error_response(*e));
  submit(std::move(r.sequences), exchange, [&scorer](const Job& job) { return score_answer(scorer, job); });
}

void Api::decide(const DecisionFrontend& scorer, const HttpRequest& request,
                 const std::shared_ptr<Exchange>& exchange) {
  auto parsed = parse_decide_request(request.body, limits_);
  if (!parsed.ok()) return exchange->reply(error_response(parsed.error()));
  DecideRequest& r = parsed.value();
  if (auto e = check_model(scorer, r.model)) return exchange->reply(error_response(*e));
  const BuildLayout& layout = scorer.layout();
  auto state = layout.encode_state(r.state);
  if (!state.ok()) return exchange->reply(error_response(unprocessable(state.error().message(), "state")));
  std::vector<SequenceInput> sequences;
  std::vector<QuestionMeta> metas;
  uint64_t tokens = 0;
  for (size_t i = 0; i < r.questions.size(); ++i) {
    Question& q = r.questions[i];
    auto laid = layout(io::kQuestionTypes[q.qtype], q.question, q.options, state.value());
    if (!laid.ok()) {
      return exchange->reply(error_response(unprocessable(
          fmt::format("question '{}': {}", q.id, laid.error().message()), layout_param(i, laid.error()))));
    }
    tokens += laid.value().ids.size();
    LaidOut& l = laid.value();
    metas.push_back(QuestionMeta{q.id, std::move(q.options), l.state_tokens, l.state_tokens_used, l.question_tokens,
                                 l.question_tokens_used, std::move(l.option_tokens), std::move(l.option_tokens_used)});
    sequences.push_back(SequenceInput{std::move(l.ids), std::move(l.markers), q.qtype});
  }
  if (tokens > limits_.max_request_tokens) {
    return exchange->reply(error_response(too_large(
        fmt::format("the questions lay out to {} tokens; a request may have at most {} (limits.max_request_tokens)",
                    tokens, limits_.max_request_tokens),
        "questions")));
  }
  if (auto e = check_fits(sequences, "questions")) return exchange->reply(error_response(*e));
  submit(std::move(sequences), exchange,
         [&scorer, metas = std::move(metas)](const Job& job) { return decide_answer(scorer, job, metas); });
}

void Api::submit(std::vector<SequenceInput> sequences, const std::shared_ptr<Exchange>& exchange,
                 std::function<std::string(const Job&)> answer) {
  auto job = std::make_shared<Job>(
      std::move(sequences), Clock::now() + std::chrono::milliseconds(deployment_.limits.request_timeout_ms),
      [exchange, answer = std::move(answer)](Job& j) {
        if (j.error()) return exchange->reply(error_response(*j.error()));
        // The body is built on the connection's thread, not on the control plane's.
        exchange->reply([job = j.shared_from_this(), answer] {
          HttpResponse out;
          out.body = answer(*job);
          return out;
        });
      });
  // Weak: the job's own callback holds the exchange, and the exchange must not hold the job back.
  exchange->on_abandon([weak = std::weak_ptr<Job>(job)] {
    if (auto j = weak.lock()) j->cancel();
  });
  if (auto e = batcher_.submit(job)) {
    job->cancel();
    return exchange->reply(error_response(*e));
  }
  for (size_t i = 0; i < job->size(); ++i) metrics_.count_questions(io::kQuestionTypes[job->sequence(i).qtype], 1);
}

HttpResponse Api::health() const {
  std::optional<std::string> problem = ranks_.problem();
  const bool scorer_missing = deployment_.serves_scoring() && scorer_.load(std::memory_order_acquire) == nullptr;
  const GenerationApi* generation = generation_.load(std::memory_order_acquire);
  if (scorer_missing || (deployment_.serves_generation() && generation == nullptr)) {
    problem = "the server is starting: " + starting();
  }
  auto degraded = metrics_.generation().degraded();
  if (generation != nullptr && generation->service() != nullptr) {
    if (std::string why = generation->service()->problem(); !why.empty()) degraded.emplace_back("generation", why);
  }
  const DrafterAdmin* admin = admin_.load(std::memory_order_acquire);
  json body = {{"status", problem ? "unavailable" : (degraded.empty() ? "ok" : "degraded")},
               {"ranks", ranks_json(ranks_.view(), admin ? admin->out_of_service() : std::vector<DrainView>{})}};
  if (!degraded.empty()) {
    // Still serving, without drafts on these pairings.
    json list = json::array();
    for (const auto& [pairing, why] : degraded) list.push_back({{"pairing", pairing}, {"detail", why}});
    body["degraded"] = std::move(list);
  }
  if (!problem) return json_response(200, body);
  body["error"] = {{"message", *problem}, {"type", "unavailable"}, {"param", nullptr}};
  return json_response(503, body);
}

HttpResponse Api::models(const DecisionFrontend* scorer) const {
  json data = json::array();
  if (const GenerationApi* generation = generation_.load(std::memory_order_acquire)) {
    data.push_back(generation->model_entry());
  }
  if (scorer == nullptr) return json_response(200, {{"object", "list"}, {"data", std::move(data)}});
  json ranks = json::array();
  for (const RankView& v : ranks_.view()) {
    if (v.role != config::Role::kScorer) continue;
    ranks.push_back({{"rank", v.rank},
                     {"state", to_string(v.state)},
                     {"backend", v.info.backend},
                     {"device", v.info.device},
                     {"weight_bytes", v.info.weight_bytes},
                     {"plan_bytes", v.info.plan_bytes}});
  }
  const config::Model* m = deployment_.model(config::Role::kScorer);
  json model = {{"id", scorer->name()},
                {"object", "model"},
                {"owned_by", "tandem"},
                {"role", "scorer"},
                {"dir", m ? m->dir : ""},
                {"vocab", scorer->vocab()},
                {"max_len", scorer->laya().max_len},
                {"head_max_len", scorer->laya().head_max_len},
                {"ranks", std::move(ranks)}};
  data.insert(data.begin(), std::move(model));
  return json_response(200, {{"object", "list"}, {"data", std::move(data)}});
}

HttpResponse Api::metrics() const {
  std::vector<RankGauge> gauges;
  for (const RankView& v : ranks_.view()) {
    if (v.role == config::Role::kCoordinator) continue;
    gauges.push_back(RankGauge{v.rank, config::to_string(v.role), v.state == RankState::kReady, v.inflight_batches,
                               v.info.weight_bytes, v.info.plan_bytes, v.info.state_bytes});
  }
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.render(batcher_.depth(), gauges);
  if (const GenerationApi* generation = generation_.load(std::memory_order_acquire)) {
    if (generation->service() != nullptr) generation->service()->render_metrics(r.body);
  }
  return r;
}

}  // namespace tandem::coordinator
