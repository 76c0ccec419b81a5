// Speculative decoding with DFlash drafters (dflash.md §1.6-1.8, architecture.md "A speculative round"):
// per-request round state and the steps of a round, each a function taking what it touches, so the
// service can run them on different ranks: prefill (target), settle and draft (drafter), verify (target).
// generate() strings them together on one process; without a drafter it is plain target decoding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/sampling.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"

namespace tandem::spec {

using ir::SamplingParams;

// How drafts are verified at temperature > 0; at temperature 0 both are the greedy exact match.
// kMatch (sample-and-match, the default): the target samples each verify row with the draw keyed to the
//   position it fills and a draft is accepted iff it equals that sample. Every committed token is the
//   target's own sample, so the output is token for token the output of plain sampling with the same
//   seed, whatever the drafter, block size or batch: reproducible and trivially lossless. Drafts are
//   the drafter's greedy picks; its acceptance equals rejection sampling with one-hot proposals, which
//   dflash.md §1.8 reports works better than sampled proposals for v1 heads.
// kReject (rejection sampling): drafts are sampled from the drafter's proposal q (v1: softmax of its
//   logits / T; v2: the selector's softmax over its candidates along a Gumbel walk), accepted with
//   probability min(1, p/q), and the first rejected row resamples from norm(max(p − q, 0)). Lossless in
//   distribution, but not token-identical to plain sampling.
enum class VerifyMode : uint8_t { kMatch, kReject };

// Where the target's tap rows wait for the drafter between a target run and the next settle.
// kHost: fetched to the host (a drafter on the CPU backend or on another backend than the target's).
// kDevice: left where the target's run wrote them and read there by the settle (both on one CUDA
//   backend), or sent from there to drafter ranks (worker/remote_drafting.cpp): valid until the target
//   runs again, so the settle (or send) must come before the next target run, as in generate(). Rows a later run of the same call would overwrite (a long prompt's early chunks) are
//   fetched to the host first. Rejection sampling's proposals stay on the device too (draft()).
enum class TapRoute : uint8_t { kHost, kDevice };
// kDevice when the drafter runs on the target's backend and that is not the CPU reference; else kHost.
TapRoute tap_route(const models::qwen3::Target& target, const models::dflash::Drafter* drafter);

// A draft token's proposal distribution (kReject).
using Proposal = ir::Distribution;

struct RequestParams {
  std::vector<uint32_t> prompt;
  uint32_t max_tokens = 16;
  std::vector<uint32_t> stop_ids;  // EOS and any other id that ends the request (it is kept in the output)
  SamplingParams sampling;
};

enum class Finish : uint8_t { kNone, kLength, kStop };
const char* to_string(Finish f);

struct RoundTrace {
  uint32_t start = 0;             // position of the round's anchor (the bonus token before it)
  std::vector<uint32_t> drafted;  // d_1 .. d_{B−1}
  uint32_t accepted = 0;          // leading drafts the target accepted
};

// One request's round state. Invariant while active: tokens.size() == start + 1; the target's KV cache
// holds positions [0, start), the drafter's context [0, settled), and `taps` then `device_taps` the tap
// rows of [settled, start); the last token (the bonus) is known but not yet run through either model.
struct Request {
  uint32_t slot = 0;
  RequestParams params;
  std::vector<uint32_t> tokens;
  uint32_t prompt_len = 0;
  uint32_t start = 0;
  uint32_t settled = 0;
  std::vector<float> taps;
  ir::DeviceRows device_taps;  // TapRoute::kDevice: the pending rows after `taps`, in the target's last run
  // False for plain decoding (no drafter reads its tap rows): prefill and verify keep none, so none is
  // fetched to the host either.
  bool keeps_taps = true;
  Finish finish = Finish::kNone;
  // Statistics: rounds, drafts proposed and accepted, and per round the committed length (accepted + 1).
  uint32_t rounds = 0;
  uint32_t drafted = 0;
  uint32_t accepted = 0;
  std::vector<uint32_t> accept_lengths;
  std::vector<RoundTrace> trace;  // filled when verify() traces

  bool active() const { return finish == Finish::kNone; }
  std::span<const uint32_t> generated() const {
    return std::span<const uint32_t>(tokens).subspan(prompt_len);
  }
};

// Checks the parameters (a non-empty prompt and stop ids inside the vocabulary, max_tokens >= 1,
// temperature >= 0, 0 < top_p <= 1) and makes a request that has not been prefilled.
Result<Request> make_request(RequestParams params, uint32_t slot, uint32_t vocab);

// One request's drafts for a round: d_1 .. d_{B−1}, and their proposals under kReject.
// The proposals are on the host (proposals), or under TapRoute::kDevice left on the drafter's device
// (device; v1 drafts then sampled there too), for rejection sampling on the target's device.
struct Draft {
  std::vector<uint32_t> tokens;
  std::vector<Proposal> proposals;
  ir::ProposalRows device;
};

// Runs each prompt through the target from position 0 (the slot is reset), samples the first token and
// keeps the prompt's tap rows for the drafter. Under TapRoute::kDevice the rows of the call's last target
// run stay on the device (Request::device_taps); a long prompt's earlier chunks, which later runs of the
// call overwrite, settle into `drafter` (on the target's backend) from the device as each run ends
// (Request::settled moves on), or without one are fetched to the host (Request::taps).
Status prefill(models::qwen3::Target& target, std::span<Request* const> requests,
               TapRoute route = TapRoute::kHost, models::dflash::Drafter* drafter = nullptr);
// Appends each request's pending tap rows (host ones, then device ones) to its drafter context (the
// context is cut back to `settled` first, dropping the previous block's transient rows).
Status settle(models::dflash::Drafter& drafter, std::span<Request* const> requests);
// Drafts a block of `block` rows per request (its settled context must reach `start`). Under kReject at
// T > 0 the proposals come to the host (TapRoute::kHost) or stay on the drafter's device (kDevice: at most
// drafter.block_seqs(block) requests a call).
Status draft(models::dflash::Drafter& drafter, std::span<Request* const> requests, uint32_t block, VerifyMode mode,
             std::vector<Draft>& drafts, TapRoute route = TapRoute::kHost);
// Verifies each request's drafts (none: one plain decoding step) in one target forward, commits the
// accepted drafts and the bonus token, crops the KV cache, stops on max tokens or stop ids. Rejection
// sampling runs on the target's device where the drafts' proposals are there (Draft::device: only ids
// come back), else on the host (the target needs host_logits).
Status verify(models::qwen3::Target& target, std::span<Request* const> requests, std::span<const Draft> drafts,
              VerifyMode mode, bool trace, TapRoute route = TapRoute::kHost);

struct GenerateOptions {
  uint32_t block = 0;  // 0: the drafter's block size
  VerifyMode mode = VerifyMode::kMatch;
  bool trace = false;
};

// Runs every request to completion in shared rounds; `drafter` null means plain target decoding.
Status generate(models::qwen3::Target& target, models::dflash::Drafter* drafter, std::span<Request> requests,
                const GenerateOptions& options);

}  // namespace tandem::spec
