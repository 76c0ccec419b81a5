// Pairing checks between a DFlash drafter and its target, the allowed block sizes, resolution of the v2
// selector's tensor names (the public z-lab layout) and the check that a checkpoint holds nothing else.
#include <algorithm>
#include <cstdint>
#include <set>

#include "engine/core/log.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"

namespace tandem::models::dflash {
namespace {

// Public DFlash 2 checkpoints keep the selector under this prefix (z-lab DFlash2DraftModel's
// `candidate_selector` module; its tests/fixtures/dflash2-safetensors-header.json; vLLM qwen3_dflash2.py).
constexpr std::string_view kSelector = "candidate_selector.";

// Tensors a drafter checkpoint may carry that tandem does not read: the embedding and head are the
// target's (dflash.md §0). z-lab's DFlashDraftModel has no such modules, so its loader drops them too.
constexpr std::string_view kIgnored[] = {"embed_tokens.weight", "model.embed_tokens.weight", "lm_head.weight"};

std::string dims(uint32_t rows, std::string_view rows_name, uint32_t cols) {
  return rows ? shape_string({rows, cols}) : fmt::format("[{}, {}]", rows_name, cols);
}

// The selector tensor `name` under kSelector: "<name>.weight" for a Linear, and for a codebook (an
// nn.Parameter that z-lab maps onto an nn.Embedding at load) the bare name or, from an export that adds
// it, "<name>.weight". The old top-level names are no public layout: refused, naming the tensor wanted.
Result<std::string> selector_tensor(const WeightSource& own, std::string_view name, bool bare, std::string_view shape,
                                    std::string_view origin) {
  const std::string base = std::string(kSelector) + std::string(name);
  const std::string want = bare ? base : base + ".weight";
  for (const std::string& c : {want, base + ".weight"}) {
    if (own.contains(c)) return c;
  }
  // A quantized projection keeps the float name in the graph until quantize_graphs rewrites it.
  if (!bare && own.contains(base + ".qweight")) return want;
  const std::string also = bare ? fmt::format(" (or '{}.weight')", base) : std::string();
  for (const std::string& old : {std::string(name), std::string(name) + ".weight"}) {
    if (!own.contains(old)) continue;
    return Error::make(ErrorKind::kNotFound,
                       "{}: tensor '{}'{} is missing (expected shape {}); the checkpoint has '{}' at the top level, "
                       "which no public DFlash 2 checkpoint does (they keep the selector under '{}')",
                       origin, want, also, shape, old, kSelector);
  }
  return Error::make(ErrorKind::kNotFound, "{}: tensor '{}'{} is missing (expected shape {})", origin, want, also,
                     shape);
}

// selector_rank may be left out of the config: the hidden projection's rows say it.
Result<uint32_t> selector_rank(const io::DFlashConfig& cfg, const WeightSource& own, const std::string& projection,
                               std::string_view origin) {
  if (cfg.selector_rank > 0) return cfg.selector_rank;
  const std::string quantized = projection.substr(0, projection.size() - std::string_view(".weight").size()) +
                                ".qweight";
  TANDEM_ASSIGN(TensorView t, own.tensor(own.contains(projection) ? projection : quantized));
  if (t.shape.size() != 2 || t.shape[0] == 0 || t.shape[0] > UINT32_MAX) {
    return Error::make(ErrorKind::kShape, "{}: tensor '{}' has shape {}, expected [selector_rank, {}]", origin,
                       projection, shape_string(t.shape), cfg.layers.hidden_size);
  }
  return static_cast<uint32_t>(t.shape[0]);
}

Status check_v2(const io::DFlashConfig& cfg, uint32_t draft_vocab, std::string_view origin) {
  const uint32_t h = cfg.layers.hidden_size;
  if (cfg.conv_kernel_size == 0) {
    return Error::make(ErrorKind::kFormat, "{}: dflash_config.conv_kernel_size must be positive", origin);
  }
  if (cfg.conv_group_size == 0 || h % cfg.conv_group_size != 0) {
    return Error::make(ErrorKind::kFormat, "{}: dflash_config.conv_group_size {} does not divide hidden_size {}",
                       origin, cfg.conv_group_size, h);
  }
  if (cfg.selector_rank == 0) {
    return Error::make(ErrorKind::kFormat, "{}: dflash_config.selector_rank must be positive", origin);
  }
  if (cfg.selector_top_k == 0 || cfg.selector_top_k > draft_vocab) {
    return Error::make(ErrorKind::kFormat, "{}: dflash_config.selector_top_k {} is not in 1..{} (the draft vocabulary)",
                       origin, cfg.selector_top_k, draft_vocab);
  }
  return {};
}

Status resolve_v2(const WeightSource& own, DrafterSetup& setup, std::string_view origin) {
  const uint32_t h = setup.cfg.layers.hidden_size;
  TANDEM_ASSIGN(setup.hidden_projection,
                selector_tensor(own, "hidden_projection", false, dims(setup.cfg.selector_rank, "selector_rank", h),
                                origin));
  TANDEM_ASSIGN(setup.cfg.selector_rank, selector_rank(setup.cfg, own, setup.hidden_projection, origin));
  const std::string codebook = shape_string({setup.target.vocab_size, setup.cfg.selector_rank});
  TANDEM_ASSIGN(setup.predecessor, selector_tensor(own, "predecessor_codebook", true, codebook, origin));
  TANDEM_ASSIGN(setup.successor, selector_tensor(own, "successor_codebook", true, codebook, origin));
  return {};
}

}  // namespace

uint32_t max_block_size(const ir::BucketTable& table) {
  uint32_t most = 0;
  for (const ir::Bucket& b : table.stage(kDrafterStage)) {
    if (b.seqs == 0) continue;
    // `seqs` blocks of B rows each, B − 1 of them marker rows (the draft rows with the LM head).
    most = std::max(most, std::min(b.tokens / b.seqs, b.picks / b.seqs + 1));
  }
  return most;
}

Status check_block_size(uint32_t block, uint32_t most, std::string_view what) {
  if (block >= 2 && block <= most) return {};
  return Error::make(ErrorKind::kInvalidArgument,
                     "{} {} is not in 2..{} (a block drafts B − 1 tokens; the '{}' buckets hold blocks of at most {} "
                     "rows per sequence)",
                     what, block, most, kDrafterStage, most);
}

Result<DrafterSetup> make_setup(const io::DFlashConfig& cfg, const io::Qwen3Config& target, const WeightSource& own,
                                const DrafterOptions& options, std::string_view origin) {
  TANDEM_TRY(qwen3::check_config(cfg.layers, origin));
  if (cfg.causal_layer.size() != cfg.layers.num_hidden_layers) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: causality given for {} layers of {}", origin,
                       cfg.causal_layer.size(), cfg.layers.num_hidden_layers);
  }
  DrafterSetup setup{cfg, target, options.block_size ? options.block_size : cfg.block_size, 0, 0, {}, {}, {}};
  setup.fuse_qkv = options.fuse_qkv &&
                   (!cfg.quantization || quantizes_qkv_alike(*cfg.quantization, cfg.layers.num_hidden_layers));
  if (cfg.layers.vocab_size != target.vocab_size) {
    return Error::make(ErrorKind::kShape,
                       "{}: vocab_size {} differs from the target's vocab_size {} in {} (a DFlash drafter drafts over "
                       "its target's vocabulary, with its embedding and LM head)",
                       cfg.layers.origin, cfg.layers.vocab_size, target.vocab_size, target.origin);
  }
  if (cfg.layers.hidden_size != target.hidden_size) {
    return Error::make(ErrorKind::kShape,
                       "{}: drafter hidden_size {} differs from the target's hidden_size {} (the drafter runs the "
                       "target's embedding and LM head)",
                       origin, cfg.layers.hidden_size, target.hidden_size);
  }
  if (cfg.target_hidden_size && *cfg.target_hidden_size != target.hidden_size) {
    return Error::make(ErrorKind::kShape, "{}: target_hidden_size {} differs from the target's hidden_size {}",
                       origin, *cfg.target_hidden_size, target.hidden_size);
  }
  if (cfg.target_layer_ids.empty()) {
    return Error::make(ErrorKind::kFormat, "{}: dflash_config.target_layer_ids is empty", origin);
  }
  for (size_t i = 0; i < cfg.target_layer_ids.size(); ++i) {
    if (cfg.target_layer_ids[i] >= target.num_hidden_layers) {
      return Error::make(ErrorKind::kInvalidArgument,
                         "{}: dflash_config.target_layer_ids[{}] = {} is beyond the target's {} layers", origin, i,
                         cfg.target_layer_ids[i], target.num_hidden_layers);
    }
  }
  if (cfg.mask_token_id >= target.vocab_size) {
    return Error::make(ErrorKind::kInvalidArgument,
                       "{}: dflash_config.mask_token_id {} is outside the target's vocabulary of {} tokens", origin,
                       cfg.mask_token_id, target.vocab_size);
  }
  if (cfg.input_embedding_scale != 1.0f) {
    return Error::make(ErrorKind::kUnsupported, "{}: input_embedding_scale {} (only 1 is supported)", origin,
                       cfg.input_embedding_scale);
  }
  const ir::BucketTable& buckets = options.buckets ? *options.buckets : ir::BucketTable::defaults();
  if (buckets.stage(kDrafterStage).empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "the bucket table has no '{}' stage", kDrafterStage);
  }
  setup.max_block = max_block_size(buckets);
  TANDEM_TRY(check_block_size(setup.block_size, setup.max_block,
                              options.block_size ? "block size" : "the config's block_size")
                 .context(origin));
  setup.draft_vocab = options.draft_vocab.value_or(target.vocab_size);
  if (setup.draft_vocab == 0 || setup.draft_vocab > target.vocab_size) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: draft vocabulary {} is not in 1..{} (the target's)", origin,
                       setup.draft_vocab, target.vocab_size);
  }
  if (cfg.version == 2) {
    TANDEM_TRY(resolve_v2(own, setup, origin));
    TANDEM_TRY(check_v2(setup.cfg, setup.draft_vocab, origin));
  } else if (cfg.version != 1) {
    return Error::make(ErrorKind::kUnsupported, "{}: DFlash version {} (1 and 2 are supported)", origin, cfg.version);
  }
  return setup;
}

Status check_own_tensors(const WeightSource& own, const DrafterSetup& setup, const DrafterGraphs& graphs,
                         std::string_view origin) {
  std::set<std::string, std::less<>> used;
  for (const ir::Graph* g : {&graphs.settle, &graphs.block}) {
    for (const ir::WeightRef& ref : g->weights) used.insert(ref.parts.begin(), ref.parts.end());
  }
  if (setup.cfg.version == 2) used.insert({setup.predecessor, setup.successor});
  for (const std::string& name : own.names()) {
    if (used.contains(name)) continue;
    TANDEM_ASSIGN(const TensorView t, own.tensor(name));
    if (std::find(std::begin(kIgnored), std::end(kIgnored), name) != std::end(kIgnored)) {
      log::warn("{}: ignoring the drafter's own '{}' {}: DFlash drafts with the target's embedding and LM head", origin,
                name, shape_string(t.shape));
      continue;
    }
    return Error::make(ErrorKind::kUnsupported,
                       "{}: tensor '{}' {} is not part of the DFlash {} layout that tandem runs (z-lab {}); refusing "
                       "it rather than ignoring what it computes",
                       origin, name, shape_string(t.shape), setup.cfg.version,
                       setup.cfg.version == 2 ? "DFlash2DraftModel" : "DFlashDraftModel");
  }
  return {};
}

}  // namespace tandem::models::dflash
