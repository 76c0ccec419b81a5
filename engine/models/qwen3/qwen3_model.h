// The Qwen3 target (dflash.md §1.6, architecture.md "A speculative round"): an HF Qwen3 checkpoint as an
// IR graph with a KV cache per layer, run over rows of several sequences at their own positions (prefill,
// batched verify). The token of each chosen row is picked on the device (Sample); its logits and the tap
// rows (residual stream after chosen layers) stay on the device unless asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/ir/backend.h"
#include "engine/decode/seq_runner.h"

namespace tandem::models::qwen3 {

inline constexpr const char* kTargetStage = "target";
// The target graph's outputs, in order (build_target_graph).
inline constexpr size_t kIdsOutput = 0, kLogitsOutput = 1, kTapsOutput = 2;

// Checks what the graph relies on (nonzero sizes, GQA grouping, even head_dim).
Status check_config(const io::Qwen3Config& cfg, std::string_view origin);

// The decoder as a graph. Outputs "ids" (pick rows, u32 on the host: the Sample of each row's logits, or
// for a sequence given proposals the verdict of rejection sampling on them, RejectSample),
// "logits" (pick rows: final norm, LM head; on the device, or the host with host_logits) and, with tap
// layers, "taps" (token rows on the device: the residual stream after each listed layer, joined in list
// order, n_t · hidden wide). `prefix` is where the tensors sit in the weight source ("" for a checkpoint
// of its own).
Result<ir::Graph> build_target_graph(const io::Qwen3Config& cfg, std::span<const uint32_t> tap_layers,
                                     bool host_logits = false, const std::string& prefix = "");
std::string embed_name(const std::string& prefix = "");
// lm_head.weight, or the embedding when the config ties them.
std::string head_name(const io::Qwen3Config& cfg, const std::string& prefix = "");

struct TargetOptions {
  std::vector<uint32_t> tap_layers;
  uint32_t slots = 1;
  uint32_t capacity = 0;                     // positions per slot (prompt + generated + one block)
  const ir::BucketTable* buckets = nullptr;  // nullptr: the embedded table; stage "target"
  // Copy every logits row to the host: tests, and rejection sampling on the host (a drafter whose
  // proposals are not on the target's device; else RejectSample runs on the device).
  bool host_logits = false;
};

enum class LogitRows : uint8_t { kNone, kLast, kAll };

// Rows of one sequence, continuing its slot at cache().length(slot).
struct TargetRows {
  uint32_t slot = 0;
  std::span<const uint32_t> ids;
  LogitRows logits = LogitRows::kLast;
  ir::SamplingParams sampling;  // picks each chosen row's token (greedy by default)
  // Rejection sampling on the device (graph.h RejectSample): the drafts' proposals, one row per draft
  // (ids are [tok, d_1 .. d_n], logits kAll, sampling at T > 0). ids then holds the verdict.
  ir::ProposalRows proposals = {};
};

struct TargetOut {
  ir::Tensor2 ids;     // the chosen rows × 1: ir::sample_token of each row, for the position after it;
                       // with proposals the committed tokens, then ir::kNoToken (graph.h RejectSample)
  ir::Tensor2 logits;  // the chosen rows × vocab with host_logits; else empty
  ir::Tensor2 taps;    // rows × tap width on the host: every row (forward_fetching_taps), or the rows
                       // before device_taps (forward_keeping_taps); else empty
  // forward_keeping_taps: the sequence's rows after `taps`, where the call's last run left them (valid
  // until the target runs again); empty otherwise.
  ir::DeviceRows device_taps;
};

// A sequence's tap rows of one run, [first, first + count) of its rows (device rows, valid during the
// call): the prompt's arrive in chunks as each chunk's run finishes.
using TapSink = std::function<Status(size_t seq, uint32_t first, const ir::DeviceRows& taps)>;

class Target {
 public:
  // Reads dir/config.json and dir/model.safetensors (or its sharded index), checks and uploads them.
  static Result<std::unique_ptr<Target>> open(ir::Backend& backend, const std::string& dir, TargetOptions options);
  // From any weight source (tests build one in memory); `origin` names it in errors.
  static Result<std::unique_ptr<Target>> create(ir::Backend& backend, const WeightSource& source,
                                                io::Qwen3Config cfg, TargetOptions options, std::string_view origin);

  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  const io::Qwen3Config& config() const { return cfg_; }
  uint32_t vocab() const { return cfg_.vocab_size; }
  uint32_t tap_width() const { return tap_width_; }
  bool host_logits() const { return options_.host_logits; }
  const std::vector<uint32_t>& tap_layers() const { return options_.tap_layers; }
  // Backend bytes of the uploaded weights (the KV cache's are cache().bytes()).
  size_t weight_bytes() const { return weights_->bytes(); }

  // Runs every sequence's rows, appending their K/V; `out` gets one entry per sequence, `taps` (when
  // the target has tap layers and it is set) every run's tap rows. Rows that must not stay (rejected
  // drafts) are dropped afterwards with cache().crop().
  Status forward(std::span<const TargetRows> rows, std::vector<TargetOut>& out, const TapSink& taps = {});
  // forward() with every tap row copied to the host into out[i].taps (explicitly: the host loop of a
  // CPU drafter, tests and tools; a device drafter takes the rows through a TapSink instead).
  Status forward_fetching_taps(std::span<const TargetRows> rows, std::vector<TargetOut>& out);
  // forward() keeping every tap row for a drafter on this backend: the rows of the call's last run stay
  // on the device (out[i].device_taps); a long prompt's earlier chunks, which later runs overwrite, go to
  // `early` as each run ends (a drafter on this backend settles them there), or without it are fetched
  // to the host first (out[i].taps, rows before the device ones).
  Status forward_keeping_taps(std::span<const TargetRows> rows, std::vector<TargetOut>& out,
                              const TapSink& early = {});
  // Lowers every plan a round of up to `seqs` requests of up to `rows` new rows each can use (decode:
  // 1 row, verify: the block); prompts longer than that still lower their bucket on first use.
  // `stopping`: as SeqRunner::prepare's (asked between buckets).
  Result<size_t> prepare_rounds(uint32_t seqs, uint32_t rows, const std::function<bool()>& stopping = {}) {
    return runner_.prepare(seqs, rows, stopping);
  }
  // The most sequences of `rows` rows, every one picked (a verify block), that one run holds.
  uint32_t seqs_per_run(uint32_t rows) const { return runner_.seqs_per_run(rows, rows); }
  size_t plans() const { return runner_.plans(); }
  size_t plan_bytes() const { return runner_.plan_bytes(); }
  ir::Backend& backend() const { return backend_; }
  decode::CacheSlots& cache() { return cache_; }
  const decode::CacheSlots& cache() const { return cache_; }

 private:
  Target(ir::Backend& backend, io::Qwen3Config cfg, TargetOptions options, ir::Graph graph,
         std::unique_ptr<ir::Weights> weights, decode::CacheSlots cache);
  Status run(std::span<const TargetRows> rows, std::vector<TargetOut>& out, const decode::ChunkSink& sink);

  ir::Backend& backend_;
  io::Qwen3Config cfg_;
  TargetOptions options_;
  uint32_t tap_width_ = 0;
  ir::Graph graph_;
  std::unique_ptr<ir::Weights> weights_;
  decode::CacheSlots cache_;
  decode::SeqRunner runner_;
  std::vector<decode::SeqOutputs> outputs_;
  std::vector<std::vector<uint32_t>> picks_;
};

}  // namespace tandem::models::qwen3
