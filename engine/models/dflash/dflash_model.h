// DFlash v1 and v2 drafters (dflash.md §1.3-1.7, §3.2): settle turns the target's tap rows into context
// K/V per layer (the per-request context cache); a block runs [anchor, MASK × (B−1)] over the context
// (causal or not per layer, as the config says) and returns the draft rows' logits from the target's LM
// head; v2 walks its candidate selector there too (ir::SelectorWalk), engine/spec's host walk being the
// reference.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/io/hf_config.h"
#include "engine/ir/backend.h"
#include "engine/decode/seq_runner.h"
#include "engine/models/dflash/dflash_quant.h"

namespace tandem::models::dflash {

inline constexpr const char* kDrafterStage = "drafter";
// Where the target's embedding and LM head sit in the drafter's combined weight source.
inline constexpr const char* kTargetPrefix = "target.";

struct DrafterOptions {
  uint32_t slots = 1;
  uint32_t capacity = 0;                     // context positions per slot (as the target's)
  uint32_t block_size = 0;                   // 0: the config's block_size
  std::optional<uint32_t> draft_vocab;       // draft over the head's first W rows only
  const ir::BucketTable* buckets = nullptr;  // nullptr: the embedded table; stage "drafter"
  // nullopt: the weights as the checkpoint stores them; kInt8/kInt4 quantize a float checkpoint at load
  // (docs/quantization.md); a quantized checkpoint loads only as what it is.
  std::optional<Quantization> quantization = std::nullopt;
  // A block layer's q, k and v projections stacked into one GEMM, with q and k normed and rotated in place
  // (qwen3::add_attention): the same values in fewer launches. Off only to measure what it gives, and where a
  // quantized checkpoint quantizes part of a layer's q, k and v (they would run as one GEMM).
  bool fuse_qkv = true;
};

// The drafter as it will run: config checked against its target, names of the v2 tensors resolved.
struct DrafterSetup {
  io::DFlashConfig cfg;
  io::Qwen3Config target;
  uint32_t block_size = 0;
  uint32_t draft_vocab = 0;
  uint32_t max_block = 0;   // max_block_size of the bucket table
  std::string predecessor;  // v2 selector tensor names: "candidate_selector.<codebook>", bare or with ".weight"
  std::string successor;
  std::string hidden_projection;
  std::optional<io::QuantConfig> quant = std::nullopt;  // the quantized modules as they run (set by Drafter::create)
  // Block layers stack q, k and v (DrafterOptions::fuse_qkv), the settle graph k and v (it needs no q): the device
  // holds each layer's k and v twice (16 MB a layer at hidden 4,096 with 8 KV heads of 128, BF16).
  bool fuse_qkv = true;
  uint32_t tap_width() const { return static_cast<uint32_t>(cfg.target_layer_ids.size()) * target.hidden_size; }
};

// The largest block size the table's 'drafter' buckets run: a bucket of `seqs` sequences holds that many
// blocks of B rows (B − 1 of them draft rows with the LM head), so B <= tokens / seqs and
// B − 1 <= markers / seqs; the largest B over the buckets (16 for the embedded table).
uint32_t max_block_size(const ir::BucketTable& table);
// A block size in 2..most, or an error naming `what`, the value and the range.
Status check_block_size(uint32_t block, uint32_t most, std::string_view what);

// Rejects a drafter that cannot run with this target: a vocabulary or hidden size other than the
// target's, taps beyond its depth, a mask id outside its vocabulary, bad v2 conv/selector sizes or
// tensor names, a block size outside 2..max_block_size, a bad draft vocabulary.
Result<DrafterSetup> make_setup(const io::DFlashConfig& cfg, const io::Qwen3Config& target, const WeightSource& own,
                                const DrafterOptions& options, std::string_view origin);

struct DrafterGraphs {
  ir::Graph settle;  // tap rows (Input) -> context K/V appended per layer; no outputs
  ir::Graph block;   // block rows -> "logits" (and "selector" for v2) on marker rows
};
// Own tensors are bare ("fc.weight"); the target's carry kTargetPrefix.
Result<DrafterGraphs> build_drafter_graphs(const DrafterSetup& setup);
// Every tensor of the drafter's checkpoint is one the graphs or the codebooks read, or an embedding or LM
// head of its own (ignored with a warning: the target's are used); anything else is refused by name.
Status check_own_tensors(const WeightSource& own, const DrafterSetup& setup, const DrafterGraphs& graphs,
                         std::string_view origin);
// What the drafter's weights run as: the checkpoint's quantization_config (asking for another, or 'none',
// is an error that says so), or for a float checkpoint the quantization asked (every module of
// quantizable_modules at kLoadGroupSize with F16 scales), or nullopt.
Result<std::optional<io::QuantConfig>> resolve_quantization(const io::DFlashConfig& cfg,
                                                            std::optional<Quantization> asked,
                                                            const DrafterGraphs& graphs, std::string_view origin);

// Tap rows of one request at positions context().length(slot)...: on the host, or where the target's run
// left them (read on the device, never through the host, when the drafter runs on that backend).
struct SettleRows {
  uint32_t slot = 0;
  std::span<const float> taps;  // rows × tap width
  ir::DeviceRows device = {};   // used when taps is empty: device.rows rows of tap width
};
// A block whose anchor sits at position context().length(slot). `sampling` is the v2 selector walk's
// (temperature and seed; greedy by default), or v1's draft sample of softmax(logits / T) (top_p 1, the
// kDraft draw of the row's position; greedy by default).
struct BlockRows {
  uint32_t slot = 0;
  uint32_t anchor = 0;
  ir::SamplingParams sampling = {};
};
struct BlockOut {
  ir::Tensor2 logits;         // rows 1..B−1 × draft vocab, when draft() fetches them; else empty
  ir::Tensor2 selector;       // v2, with the logits: rows 1..B−1 × selector rank, S·h of the final-normed rows
  std::vector<uint32_t> ids;  // rows 1..B−1: v1 each row's argmax over the draft vocabulary, v2 the walk's
                              // picks; chosen on the device
  ir::Tensor2 candidates;     // v2, when draft() fetches proposals: rows 1..B−1 × top-k candidate ids
  ir::Tensor2 proposal;       // ... and q over them, softmax(E / T) (rows × top-k)
  // With keep_proposals: the draft rows' proposals where the block run left them (v1 the logits over the
  // draft vocabulary, v2 the candidates and q), valid until the next block run.
  ir::ProposalRows proposals;
};
// The block graph's outputs, in order: logits (device), then v1: ids (host); v2: selector (device), ids
// (host), candidates (device), proposal (device).
inline constexpr size_t kBlockLogitsOutput = 0, kBlockSelectorOutput = 1, kBlockCandidatesOutput = 3,
                        kBlockProposalOutput = 4;
constexpr size_t block_ids_output(uint32_t version) { return version == 2 ? 2 : 1; }

// DFlash 2 selector codebooks, rows read from the checkpoint on the host (dflash.md §3.3).
class Codebooks {
 public:
  Codebooks(TensorView predecessor, TensorView successor);
  uint32_t rank() const { return rank_; }
  uint32_t rows() const { return rows_; }
  // Row `token` (< rows(), checked by the caller) as floats; out has rank() entries.
  void predecessor(uint32_t token, std::span<float> out) const { row(pred_, token, out); }
  void successor(uint32_t token, std::span<float> out) const { row(succ_, token, out); }

 private:
  void row(const TensorView& t, uint32_t token, std::span<float> out) const;
  TensorView pred_, succ_;
  uint32_t rank_ = 0;
  uint32_t rows_ = 0;
};

class Drafter {
 public:
  // dir/config.json and its safetensors; the target's embedding and LM head from target_dir.
  static Result<std::unique_ptr<Drafter>> open(ir::Backend& backend, const std::string& dir,
                                               const std::string& target_dir, DrafterOptions options);
  // `own` stays alive with the drafter (codebook rows are read from it); `target` is only read here.
  static Result<std::unique_ptr<Drafter>> create(ir::Backend& backend, std::shared_ptr<const WeightSource> own,
                                                 const io::DFlashConfig& cfg, const WeightSource& target,
                                                 const io::Qwen3Config& target_cfg, DrafterOptions options,
                                                 std::string_view origin);
  Drafter(const Drafter&) = delete;
  Drafter& operator=(const Drafter&) = delete;

  const DrafterSetup& setup() const { return setup_; }
  // The drafter's weights as its backend holds them (bytes(): what they take there).
  const ir::Weights& weights() const { return *weights_; }
  uint32_t version() const { return setup_.cfg.version; }
  uint32_t block_size() const { return setup_.block_size; }
  uint32_t draft_vocab() const { return setup_.draft_vocab; }
  uint32_t tap_width() const { return setup_.tap_width(); }
  const std::vector<uint32_t>& target_layer_ids() const { return setup_.cfg.target_layer_ids; }
  const Codebooks* codebooks() const { return codebooks_ ? &*codebooks_ : nullptr; }
  ir::Backend& backend() const { return backend_; }
  // Backend bytes of the uploaded weights (the target's embedding and head included; the context
  // cache's are context().bytes()).
  size_t weight_bytes() const { return weights_->bytes(); }

  // Appends the requests' committed rows to their context caches.
  Status settle(std::span<const SettleRows> rows);
  // One block per request (`block` rows, 2 <= block <= setup().max_block and the capacity left); the
  // context is left as it was. The logits rows (and v2's selector rows) are copied to the host only with
  // fetch_logits (a host step that needs them: v1 proposals for rejection sampling, tests); v2's
  // candidates and q only with fetch_proposals.
  // keep_proposals leaves them on the device instead (BlockOut::proposals, for the target's RejectSample):
  // every block must then run in the call's last run (at most block_seqs(block) requests).
  Status draft(std::span<const BlockRows> rows, uint32_t block, std::vector<BlockOut>& out, bool fetch_logits = true,
               bool fetch_proposals = false, bool keep_proposals = false);
  // The most requests whose blocks of `block` rows run together (one block run).
  uint32_t block_seqs(uint32_t block) const { return block_runner_.seqs_per_run(block, block - 1); }
  decode::CacheSlots& context() { return context_; }
  const decode::CacheSlots& context() const { return context_; }
  // Lowers every settle and block plan a round of up to `seqs` requests can use (blocks of up to
  // `block` rows, settles of 1..block accepted rows each). `stopping`: as SeqRunner::prepare's.
  Result<size_t> prepare_rounds(uint32_t seqs, uint32_t block, const std::function<bool()>& stopping = {});
  size_t plans() const { return settle_runner_.plans() + block_runner_.plans(); }
  size_t plan_bytes() const { return settle_runner_.plan_bytes() + block_runner_.plan_bytes(); }

 private:
  Drafter(ir::Backend& backend, DrafterSetup setup, DrafterGraphs graphs, std::unique_ptr<ir::Weights> weights,
          decode::CacheSlots context, std::shared_ptr<const WeightSource> own, DrafterOptions options);

  ir::Backend& backend_;
  DrafterSetup setup_;
  DrafterGraphs graphs_;
  std::unique_ptr<ir::Weights> weights_;
  decode::CacheSlots context_;
  std::shared_ptr<const WeightSource> own_;
  std::optional<Codebooks> codebooks_;
  decode::SeqRunner settle_runner_;
  decode::SeqRunner block_runner_;
  std::vector<decode::SeqOutputs> outputs_;
  std::vector<std::vector<uint32_t>> ids_;
  std::vector<uint32_t> picks_;
};

}  // namespace tandem::models::dflash
