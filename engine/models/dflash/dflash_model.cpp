// Drafter: loading (own tensors plus the target's embedding and head), settle and block runs, codebooks.
#include "engine/models/dflash/dflash_model.h"

#include "engine/io/safetensors.h"
#include "engine/ir/executor.h"
#include "engine/models/qwen3/weight_check.h"

namespace tandem::models::dflash {

Codebooks::Codebooks(TensorView predecessor, TensorView successor)
    : pred_(std::move(predecessor)), succ_(std::move(successor)) {
  rank_ = static_cast<uint32_t>(pred_.shape[1]);
  rows_ = static_cast<uint32_t>(pred_.shape[0]);
}

void Codebooks::row(const TensorView& t, uint32_t token, std::span<float> out) const {
  // INVARIANT: token < rows_ (callers check) and both tensors are [rows_, rank_] (checked at create).
  const auto* base = static_cast<const unsigned char*>(t.data);
  convert_to_f32(t.dtype, base + size_t{token} * rank_ * dtype_size(t.dtype), rank_, out.data());
}

namespace {

Status check_codebook(const TensorView& t, const DrafterSetup& setup, std::string_view origin) {
  const std::vector<uint64_t> want{setup.target.vocab_size, setup.cfg.selector_rank};
  if (t.shape != want) {
    return Error::make(ErrorKind::kShape, "{}: tensor '{}' has shape {}, expected {}", origin, t.name,
                       shape_string(t.shape), shape_string(want));
  }
  return {};
}

}  // namespace

Drafter::Drafter(ir::Backend& backend, DrafterSetup setup, DrafterGraphs graphs, std::unique_ptr<ir::Weights> weights,
                 decode::CacheSlots context, std::shared_ptr<const WeightSource> own, DrafterOptions options)
    : backend_(backend),
      setup_(std::move(setup)),
      graphs_(std::move(graphs)),
      weights_(std::move(weights)),
      context_(std::move(context)),
      own_(std::move(own)),
      settle_runner_(backend, *weights_, graphs_.settle, *options.buckets, kDrafterStage, setup_.target.vocab_size,
                     /*split=*/true),
      block_runner_(backend, *weights_, graphs_.block, *options.buckets, kDrafterStage, setup_.target.vocab_size,
                    /*split=*/false) {}

Result<std::unique_ptr<Drafter>> Drafter::open(ir::Backend& backend, const std::string& dir,
                                               const std::string& target_dir, DrafterOptions options) {
  TANDEM_ASSIGN(io::DFlashConfig cfg, io::load_dflash_config(dir + "/config.json"));
  TANDEM_ASSIGN(io::Qwen3Config target_cfg, io::load_qwen3_config(target_dir + "/config.json"));
  TANDEM_ASSIGN(auto own, io::Checkpoint::open_dir(dir));
  TANDEM_ASSIGN(auto target, io::Checkpoint::open_dir(target_dir));
  return create(backend, std::shared_ptr<const WeightSource>(std::move(own)), cfg, *target, target_cfg,
                std::move(options), dir);
}

Result<std::unique_ptr<Drafter>> Drafter::create(ir::Backend& backend, std::shared_ptr<const WeightSource> own,
                                                 const io::DFlashConfig& cfg, const WeightSource& target,
                                                 const io::Qwen3Config& target_cfg, DrafterOptions options,
                                                 std::string_view origin) {
  if (!options.buckets) options.buckets = &ir::BucketTable::defaults();
  TANDEM_ASSIGN(DrafterSetup setup, make_setup(cfg, target_cfg, *own, options, origin));
  auto graphs = build_drafter_graphs(setup);
  if (!graphs.ok()) return std::move(graphs).error().context(origin);
  TANDEM_ASSIGN(setup.quant, resolve_quantization(cfg, options.quantization, *graphs, origin));
  if (setup.quant) {
    if (!cfg.quantization) {
      TANDEM_ASSIGN(own, quantize_source(std::move(own), *setup.quant, origin));
    }
    TANDEM_TRY(check_quantized_dtypes(*own, *setup.quant, origin));
    TANDEM_TRY(quantize_graphs({&graphs->settle, &graphs->block}, *setup.quant, origin));
    TANDEM_TRY(ir::validate(graphs->settle).context("quantized drafter settle graph"));
    TANDEM_TRY(ir::validate(graphs->block).context("quantized drafter block graph"));
  }
  io::CombinedSource combined;
  combined.add(own.get(), "");
  combined.add(&target, kTargetPrefix);
  TANDEM_TRY(qwen3::check_weights(combined, graphs->settle, origin));
  TANDEM_TRY(qwen3::check_weights(combined, graphs->block, origin));
  TANDEM_TRY(check_own_tensors(*own, setup, *graphs, origin));
  std::optional<Codebooks> codebooks;
  if (setup.cfg.version == 2) {
    TANDEM_ASSIGN(TensorView pred, own->tensor(setup.predecessor));
    TANDEM_ASSIGN(TensorView succ, own->tensor(setup.successor));
    TANDEM_TRY(check_codebook(pred, setup, origin));
    TANDEM_TRY(check_codebook(succ, setup, origin));
    codebooks.emplace(std::move(pred), std::move(succ));
  }
  const ir::Graph* list[] = {&graphs->settle, &graphs->block};
  auto weights = backend.upload(combined, list);
  if (!weights.ok()) return std::move(weights).error().context(origin);
  TANDEM_ASSIGN(decode::CacheSlots context,
                decode::CacheSlots::create(backend, graphs->block, options.slots, options.capacity));
  auto d = std::unique_ptr<Drafter>(new Drafter(backend, std::move(setup), std::move(graphs).value(),
                                                std::move(weights).value(), std::move(context), std::move(own),
                                                options));
  d->codebooks_ = std::move(codebooks);
  return d;
}

Result<size_t> Drafter::prepare_rounds(uint32_t seqs, uint32_t block, const std::function<bool()>& stopping) {
  TANDEM_ASSIGN(const size_t settles, settle_runner_.prepare(seqs, block, stopping));
  TANDEM_ASSIGN(const size_t blocks, block_runner_.prepare(seqs, block, stopping));
  return settles + blocks;
}

Status Drafter::settle(std::span<const SettleRows> rows) {
  std::vector<decode::SeqRows> seqs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].taps.size() % tap_width() != 0) {
      return Error::make(ErrorKind::kInvalidArgument, "settle of slot {}: {} tap values are not rows of {}",
                         rows[i].slot, rows[i].taps.size(), tap_width());
    }
    seqs[i] = decode::SeqRows{rows[i].slot, {}, rows[i].taps, {}, {}, true, {}};
    if (rows[i].taps.empty()) seqs[i].device_features = rows[i].device;
  }
  return settle_runner_.run(seqs, context_, outputs_);
}

Status Drafter::draft(std::span<const BlockRows> rows, uint32_t block, std::vector<BlockOut>& out,
                      bool fetch_logits, bool fetch_proposals, bool keep_proposals) {
  TANDEM_TRY(check_block_size(block, setup_.max_block, "block size"));
  ids_.resize(rows.size());
  picks_.resize(block - 1);
  for (uint32_t r = 1; r < block; ++r) picks_[r - 1] = r;
  std::vector<decode::SeqRows> seqs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].anchor >= setup_.target.vocab_size) {
      return Error::make(ErrorKind::kInvalidArgument, "block of slot {}: anchor {} is outside the vocabulary of {}",
                         rows[i].slot, rows[i].anchor, setup_.target.vocab_size);
    }
    ids_[i].assign(block, setup_.cfg.mask_token_id);
    ids_[i][0] = rows[i].anchor;
    // The block's K/V land at positions past the context and are never committed: the next settle
    // overwrites them (dflash.md §1.7).
    seqs[i] = decode::SeqRows{rows[i].slot, ids_[i], {}, {}, picks_, false, rows[i].sampling};
  }
  out.assign(rows.size(), BlockOut{});
  // A block runs whole in one batch, so each sequence's logits rows arrive in one chunk; only the draft
  // vocabulary's columns are copied (the head's first W rows).
  decode::ChunkSink sink;
  const bool v2 = version() == 2;
  fetch_proposals = fetch_proposals && v2;
  const auto fetch_all = [&](const ir::DeviceRows& d, ir::Tensor2& t) { return backend_.fetch(d, 0, d.rows, t); };
  if (fetch_logits || fetch_proposals || keep_proposals) {
    sink = [&, v2, fetch_logits, fetch_proposals, keep_proposals](const decode::DeviceChunk& c) -> Status {
      BlockOut& o = out[c.seq];
      if (keep_proposals) {
        // A later run of the same plan would overwrite these rows before the verify reads them.
        if (!c.last) {
          return Error::make(ErrorKind::kInvalidArgument, "{} blocks of {} rows need more than one block run, so "
                             "their proposals cannot stay on the device: draft at most {} at a time",
                             rows.size(), block, block_seqs(block));
        }
        if (v2) {
          o.proposals = {c.outputs[kBlockProposalOutput], c.outputs[kBlockCandidatesOutput]};
        } else {
          o.proposals.values = c.outputs[kBlockLogitsOutput];  // draft_vocab wide (block_graph)
        }
      }
      if (fetch_logits) {
        TANDEM_TRY(fetch_all(c.outputs[kBlockLogitsOutput], o.logits));
        if (v2) TANDEM_TRY(fetch_all(c.outputs[kBlockSelectorOutput], o.selector));
      }
      if (fetch_proposals) {
        TANDEM_TRY(fetch_all(c.outputs[kBlockCandidatesOutput], o.candidates));
        TANDEM_TRY(fetch_all(c.outputs[kBlockProposalOutput], o.proposal));
      }
      return {};
    };
  }
  TANDEM_TRY(block_runner_.run(seqs, context_, outputs_, sink));
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].ids = std::move(outputs_[i][block_ids_output(version())].ids);
  }
  return {};
}

}  // namespace tandem::models::dflash
