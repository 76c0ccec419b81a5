// Pairing checks between a DFlash drafter and its target, and resolution of the v2 tensor names.
#include <cstdint>

#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/models/qwen3/weight_check.h"

namespace tandem::models::dflash {
namespace {

// selector_rank may be left out of the config: the hidden projection's rows say it.
Result<uint32_t> selector_rank(const io::DFlashConfig& cfg, const WeightSource& own, const std::string& projection,
                               std::string_view origin) {
  if (cfg.selector_rank > 0) return cfg.selector_rank;
  TANDEM_ASSIGN(TensorView t, own.tensor(projection));
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

}  // namespace

Result<DrafterSetup> make_setup(const io::DFlashConfig& cfg, const io::Qwen3Config& target, const WeightSource& own,
                                const DrafterOptions& options, std::string_view origin) {
  TANDEM_TRY(qwen3::check_config(cfg.layers, origin));
  DrafterSetup setup{cfg, target, options.block_size ? options.block_size : cfg.block_size, 0, {}, {}, {}};
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
  if (setup.block_size < 2) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: block size {} leaves no row to draft (at least 2)", origin,
                       setup.block_size);
  }
  setup.draft_vocab = options.draft_vocab.value_or(target.vocab_size);
  if (setup.draft_vocab == 0 || setup.draft_vocab > target.vocab_size) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: draft vocabulary {} is not in 1..{} (the target's)", origin,
                       setup.draft_vocab, target.vocab_size);
  }
  if (cfg.version == 2) {
    TANDEM_ASSIGN(setup.hidden_projection,
                  qwen3::resolve_name(own, {"hidden_projection.weight", "hidden_projection"}, origin));
    TANDEM_ASSIGN(setup.cfg.selector_rank, selector_rank(cfg, own, setup.hidden_projection, origin));
    TANDEM_TRY(check_v2(setup.cfg, setup.draft_vocab, origin));
    TANDEM_ASSIGN(setup.predecessor,
                  qwen3::resolve_name(own, {"predecessor_codebook", "predecessor_codebook.weight"}, origin));
    TANDEM_ASSIGN(setup.successor,
                  qwen3::resolve_name(own, {"successor_codebook", "successor_codebook.weight"}, origin));
  } else if (cfg.version != 1) {
    return Error::make(ErrorKind::kUnsupported, "{}: DFlash version {} (1 and 2 are supported)", origin, cfg.version);
  }
  return setup;
}

}  // namespace tandem::models::dflash
