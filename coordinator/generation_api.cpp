// GenerationApi (generation_api.h): the routes, and one Run per submitted request that turns the
// service's events into the answer.
#include "coordinator/generation_api.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "coordinator/completion_answer.h"
#include "coordinator/parse_completion.h"
#include "coordinator/text_stream.h"
#include "engine/ir/sampling.h"

namespace tandem::coordinator {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr std::string_view kCompletions = "/v1/completions";
constexpr std::string_view kChat = "/v1/chat/completions";

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

double seconds_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

// One request from submission to its answer. Events come on the scheduler's thread, the abandon
// callback on the connection's strand; the mutex orders them, and cancel() is called outside it (the
// service may call back from inside cancel()).
class Run : public std::enable_shared_from_this<Run> {
 public:
  Run(std::shared_ptr<Exchange> exchange, const io::Tokenizer& tokenizer, const CompletionRequest& request,
      AnswerIdentity who, std::vector<uint32_t> prompt, std::vector<uint32_t> stop_ids, GenerationMetrics& metrics,
      std::string endpoint, SteadyClock::time_point arrived)
      : exchange_(std::move(exchange)),
        text_(tokenizer, request.stop, stop_ids),
        stop_ids_(std::move(stop_ids)),
        who_(std::move(who)),
        prompt_(std::move(prompt)),
        stream_(request.stream),
        include_usage_(request.include_usage),
        token_ids_(request.return_token_ids),
        metrics_(metrics),
        endpoint_(std::move(endpoint)),
        arrived_(arrived),
        last_(arrived) {}

  // The service took the request: streams send their head and what came meanwhile.
  void started(std::shared_ptr<GenerationHandle> handle) {
    bool cancel = false;
    {
      std::lock_guard lock(mutex_);
      handle_ = handle;
      cancel = cancel_wanted_;
      if (stream_ && !abandoned_) {
        exchange_->start_stream(HttpResponse{200, "", "text/event-stream", {{"Cache-Control", "no-cache"}}});
        if (who_.chat) exchange_->send(chunk_event(who_, "", nullptr, nullptr, /*role=*/true));
        started_ = true;
        if (!pending_.empty()) exchange_->send(std::move(pending_));
        pending_.clear();
        if (ended_) exchange_->end();
      }
    }
    if (cancel) handle->cancel();
  }

  void on_event(const GenerationEvent& ev) {
    std::shared_ptr<GenerationHandle> cancel;
    {
      std::lock_guard lock(mutex_);
      if (done_) return;
      observe(ev);
      const size_t before = text_.tokens().size();
      std::string piece = text_.push(ev.tokens);
      std::vector<uint32_t> ids(text_.tokens().begin() + static_cast<std::ptrdiff_t>(before), text_.tokens().end());
      if (stream_ && (!piece.empty() || (token_ids_ && !ids.empty() && !text_.stopped()))) {
        // The ids of the final piece go with the finishing chunk; ids sent here are not sent again.
        if (!text_.stopped()) {
          send(chunk_event(who_, piece, nullptr, token_ids_ ? &ids : nullptr));
          piece.clear();
          ids.clear();
        }
      }
      if (text_.stopped()) {
        const bool by_id = std::find(stop_ids_.begin(), stop_ids_.end(), text_.tokens().back()) != stop_ids_.end();
        finish(std::move(piece), ids, "stop");
        if (ev.finish == GenerationFinish::kNone) {
          if (!by_id) metrics_.count_cancelled("stop_string");
          cancel = take_handle();
        }
      } else if (ev.finish == GenerationFinish::kLength || ev.finish == GenerationFinish::kStop) {
        finish(std::move(piece), ids, ev.finish == GenerationFinish::kLength ? "length" : "stop");
      } else if (ev.finish == GenerationFinish::kFailed) {
        fail(ev.error.value_or(ApiError{500, "the generation failed", "internal_error", std::nullopt}));
      } else if (ev.finish == GenerationFinish::kCancelled) {
        fail(unavailable("the generation was cancelled by the server"));
      } else if (!stream_) {
        body_ += piece;
      }
    }
    if (cancel) cancel->cancel();
  }

  // The client left, or the deadline passed (HttpServer answers 504 to a whole answer itself).
  void abandoned() {
    std::shared_ptr<GenerationHandle> cancel;
    {
      std::lock_guard lock(mutex_);
      abandoned_ = true;
      if (done_) return;
      done_ = true;
      const bool timeout = exchange_->timed_out();
      metrics_.count_cancelled(timeout ? "timeout" : "client_gone");
      metrics_.count_finish(endpoint_, "cancelled");
      if (stream_ && timeout) {
        send(error_event(ApiError{504, "the request's deadline passed (limits.request_timeout_ms)", "timeout",
                                  std::nullopt}));
        send(kDoneEvent);
        end();
      }
      cancel = take_handle();
    }
    if (cancel) cancel->cancel();
  }

 private:
  void observe(const GenerationEvent& ev) {
    if (!ev.tokens.empty()) {
      const auto now = SteadyClock::now();
      if (!seen_token_) {
        metrics_.observe_first_token(seconds_between(arrived_, now));
        if (ev.tokens.size() > 1) metrics_.observe_inter_token(0, ev.tokens.size() - 1);
      } else {
        metrics_.observe_inter_token(seconds_between(last_, now), ev.tokens.size());
      }
      seen_token_ = true;
      last_ = now;
      metrics_.count_tokens(endpoint_, ev.tokens.size());
    }
    metrics_.count_speculative(stats_, ev.stats);
    stats_ = ev.stats;
  }

  AnswerUsage usage() const {
    return AnswerUsage{static_cast<uint32_t>(prompt_.size()), static_cast<uint32_t>(text_.tokens().size()), stats_};
  }

  void finish(std::string piece, const std::vector<uint32_t>& ids, const char* reason) {
    done_ = true;
    piece += text_.finish();
    metrics_.count_finish(endpoint_, reason);
    if (!stream_) {
      body_ += piece;
      HttpResponse r;
      r.body = completion_body(who_, body_, reason, token_ids_ ? &text_.tokens() : nullptr,
                               token_ids_ ? &prompt_ : nullptr, usage());
      exchange_->reply(std::move(r));
      return;
    }
    if (who_.chat && !piece.empty()) {  // chat ends on an empty delta, as OpenAI's streams do
      send(chunk_event(who_, piece, nullptr, token_ids_ ? &ids : nullptr));
      send(chunk_event(who_, "", reason, nullptr));
    } else {
      send(chunk_event(who_, piece, reason, token_ids_ ? &ids : nullptr));
    }
    if (include_usage_) send(usage_event(who_, usage()));
    send(kDoneEvent);
    end();
  }

  void fail(const ApiError& error) {
    done_ = true;
    metrics_.count_finish(endpoint_, "failed");
    if (!stream_) return exchange_->reply(error_response(error));
    send(error_event(error));
    send(kDoneEvent);
    end();
  }

  // Before the stream's head is sent (events may come before submit() returns), chunks wait here.
  void send(std::string chunk) {
    if (started_) return exchange_->send(std::move(chunk));
    pending_ += chunk;
  }
  void end() {
    if (started_) return exchange_->end();
    ended_ = true;
  }

  // The handle to cancel once the mutex is released, or a note to cancel when it comes.
  std::shared_ptr<GenerationHandle> take_handle() {
    if (!handle_) cancel_wanted_ = true;
    return std::exchange(handle_, nullptr);
  }

  std::mutex mutex_;
  std::shared_ptr<Exchange> exchange_;
  TextStream text_;
  std::vector<uint32_t> stop_ids_;
  AnswerIdentity who_;
  std::vector<uint32_t> prompt_;
  bool stream_;
  bool include_usage_;
  bool token_ids_;
  GenerationMetrics& metrics_;
  std::string endpoint_;
  SteadyClock::time_point arrived_;
  SteadyClock::time_point last_;
  std::shared_ptr<GenerationHandle> handle_;
  SpeculativeStats stats_;
  std::string body_;     // whole answers: the text so far
  std::string pending_;  // streams: events before the head
  bool started_ = false;
  bool ended_ = false;
  bool seen_token_ = false;
  bool cancel_wanted_ = false;
  bool abandoned_ = false;
  bool done_ = false;
};

}  // namespace

GenerationApi::GenerationApi(const GenerationFrontend& frontend, GenerationService* service, Metrics& metrics)
    : frontend_(frontend), service_(service), metrics_(metrics), id_salt_(random_u64()) {}

bool GenerationApi::serves(std::string_view path) {
  const std::string_view p = path_of(path);
  return p == kCompletions || p == kChat;
}

void GenerationApi::handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const std::string_view path = path_of(request.target);
  if (!serves(path)) {
    return exchange->reply(error_response(ApiError{404, fmt::format("no route {}", path), "not_found", std::nullopt}));
  }
  if (request.method != "POST") {
    HttpResponse r = error_response(ApiError{405, fmt::format("{} takes POST, not {}", path, request.method),
                                             "method_not_allowed", std::nullopt});
    r.headers.emplace_back("Allow", "POST");
    return exchange->reply(std::move(r));
  }
  if (service_ == nullptr) {
    return exchange->reply(error_response(ApiError{
        404, fmt::format("{} is not served here: the deployment has no generation roles (target and drafter)", path),
        "not_found", std::nullopt}));
  }
  complete(path == kChat, request, exchange);
}

void GenerationApi::record(const std::string& target, unsigned status, double seconds) {
  const std::string_view path = path_of(target);
  metrics_.count_request(serves(path) ? path : "other", status, seconds);
}

nlohmann::json GenerationApi::model_entry() const {
  nlohmann::json m = {{"id", frontend_.name()}, {"object", "model"}, {"owned_by", "tandem"}, {"role", "target"},
                      {"vocab", frontend_.tokenizer().vocab_size()}, {"chat_template", frontend_.has_chat_template()}};
  if (service_) m["max_context"] = service_->max_context();
  return m;
}

void GenerationApi::complete(bool chat, const HttpRequest& http, const std::shared_ptr<Exchange>& exchange) {
  const auto arrived = SteadyClock::now();
  const std::string endpoint(chat ? kChat : kCompletions);
  const CompletionLimits limits{service_->vocab(), service_->max_context()};
  auto parsed = chat ? parse_chat_request(http.body, limits) : parse_completion_request(http.body, limits);
  if (!parsed.ok()) return exchange->reply(error_response(parsed.error()));
  CompletionRequest& r = parsed.value();
  if (r.model && *r.model != frontend_.name()) {
    return exchange->reply(error_response(ApiError{
        404, fmt::format("model '{}' is not served here; available: {}", *r.model, frontend_.name()),
        "model_not_found", "model"}));
  }
  const char* prompt_field = chat ? "messages" : "prompt";
  std::vector<uint32_t> prompt;
  if (r.prompt_ids) {
    prompt = std::move(*r.prompt_ids);
  } else {
    std::string text = r.prompt_text;
    if (chat) {
      if (!frontend_.has_chat_template()) {
        return exchange->reply(error_response(bad_request(
            fmt::format("model '{}' has no chat template (tokenizer_config.json); use /v1/completions",
                        frontend_.name()),
            "messages")));
      }
      auto rendered = frontend_.render_chat(r.messages, r.template_kwargs);
      if (!rendered.ok()) {
        const Error& e = rendered.error();
        if (e.kind() == ErrorKind::kInvalidArgument) {
          return exchange->reply(error_response(bad_request(e.message(), "messages")));
        }
        return exchange->reply(error_response(unprocessable(e.message(), "messages")));
      }
      text = std::move(rendered.value());
    }
    auto ids = frontend_.tokenizer().encode(text);
    if (!ids.ok()) return exchange->reply(error_response(bad_request(ids.error().message(), prompt_field)));
    prompt = std::move(ids.value());
  }
  const uint32_t context = limits.max_context;
  if (prompt.size() >= context) {
    return exchange->reply(error_response(unprocessable(
        fmt::format("the prompt has {} tokens; the model's context holds {} (max_context), with at least one to "
                    "generate",
                    prompt.size(), context),
        prompt_field)));
  }
  const auto room = static_cast<uint32_t>(context - prompt.size());
  uint32_t max_tokens = r.max_tokens.value_or(chat ? room : std::min<uint32_t>(16, room));
  if (max_tokens > room) {
    const std::string& field = r.max_tokens_field;
    return exchange->reply(error_response(unprocessable(
        fmt::format("the prompt ({} tokens) and {} ({}) exceed the model's context of {} tokens (max_context)",
                    prompt.size(), field, max_tokens, context),
        field)));
  }
  GenerationRequest g;
  g.prompt = prompt;
  g.max_tokens = max_tokens;
  g.sampling = ir::SamplingParams{r.temperature, r.top_p, r.seed.value_or(random_u64())};
  if (!r.ignore_eos) g.stop_ids = frontend_.eos_ids();
  for (uint32_t id : r.stop_token_ids) {
    if (std::find(g.stop_ids.begin(), g.stop_ids.end(), id) == g.stop_ids.end()) g.stop_ids.push_back(id);
  }
  g.speculative = r.speculative;

  const uint64_t n = answers_.fetch_add(1);
  AnswerIdentity who{fmt::format("{}-{:016x}", chat ? "chatcmpl" : "cmpl", ir::mix64(id_salt_ + n)),
                     std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count(),
                     frontend_.name(), chat};
  auto run = std::make_shared<Run>(exchange, frontend_.tokenizer(), r, std::move(who), std::move(prompt), g.stop_ids,
                                   metrics_.generation(), endpoint, arrived);
  exchange->on_abandon([weak = std::weak_ptr<Run>(run)] {
    if (auto live = weak.lock()) live->abandoned();
  });
  auto submitted = service_->submit(std::move(g), [run](const GenerationEvent& ev) { run->on_event(ev); });
  if (auto* error = std::get_if<ApiError>(&submitted)) {
    metrics_.generation().count_finish(endpoint, "refused");
    return exchange->reply(error_response(*error));
  }
  run->started(std::get<std::shared_ptr<GenerationHandle>>(submitted));
}

}  // namespace tandem::coordinator
