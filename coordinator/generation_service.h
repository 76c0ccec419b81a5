// The seam between the HTTP side of generation (/v1/completions, /v1/chat/completions: parsing,
// templates, tokenization, streaming) and the round scheduler that runs requests on target and drafter
// ranks (architecture.md "A speculative round"). The HTTP side submits token-id requests and receives
// each round's committed tokens; the scheduler never sees text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "coordinator/api_types.h"
#include "engine/ir/sampling.h"

namespace tandem::coordinator {

struct GenerationRequest {
  std::vector<uint32_t> prompt;       // checked by the HTTP side: non-empty, ids inside the vocabulary
  uint32_t max_tokens = 16;           // >= 1; prompt + max_tokens fits the target's context (HTTP side checks)
  ir::SamplingParams sampling;        // temperature 0: greedy
  std::vector<uint32_t> stop_ids;     // ids that end the request (EOS included by the HTTP side); kept in output
  bool speculative = true;            // false: plain decoding for this request
};

// Why a request ended.
enum class GenerationFinish : uint8_t { kNone, kLength, kStop, kCancelled, kFailed };
const char* to_string(GenerationFinish f);  // "", "length", "stop", "cancelled", "failed"

// The speculative figures of one request so far (OpenAI usage extension).
struct SpeculativeStats {
  uint32_t rounds = 0;
  uint32_t drafted = 0;
  uint32_t accepted = 0;
  std::vector<uint32_t> accepted_per_position;  // accepted drafts at block position 1, 2, ... (vLLM's per-pos)
};

// One callback per round that committed tokens for the request, then one with finish != kNone.
struct GenerationEvent {
  std::vector<uint32_t> tokens;       // newly committed ids, in order (may be empty on the final event)
  GenerationFinish finish = GenerationFinish::kNone;
  std::optional<ApiError> error;      // with kFailed: the status and message to answer (503 a rank died)
  SpeculativeStats stats;             // totals so far
};

using GenerationCallback = std::function<void(const GenerationEvent&)>;

// A submitted request's handle: cancel() frees it on every rank (KV slots, drafter context, transfers in
// flight); the callback then gets a final event with kCancelled (unless it had already finished).
class GenerationHandle {
 public:
  virtual ~GenerationHandle() = default;
  virtual void cancel() = 0;
};

class GenerationService {
 public:
  virtual ~GenerationService() = default;
  // Queues a request for the next rounds, or answers why not (429 queue full, 503 no target alive).
  // The callback runs on the scheduler's thread and must not block; it may call cancel().
  virtual std::variant<std::shared_ptr<GenerationHandle>, ApiError> submit(GenerationRequest request,
                                                                          GenerationCallback callback) = 0;
  // What the HTTP side checks requests against.
  virtual uint32_t vocab() const = 0;
  virtual uint32_t max_context() const = 0;  // prompt + max_tokens (+ one block) must fit
  // Why generation is degraded or down, for /health ("" when healthy), and the service's own
  // Prometheus families for /metrics (the rank-level ones: rounds, phases, bytes, KV slots).
  virtual std::string problem() const { return {}; }
  virtual void render_metrics(std::string& out) const { (void)out; }
};

}  // namespace tandem::coordinator
