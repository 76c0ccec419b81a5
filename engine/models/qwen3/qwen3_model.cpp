// Target: loading, upload and the forward over sequences' rows.
#include "engine/models/qwen3/qwen3_model.h"

#include "engine/io/safetensors.h"
#include "engine/models/qwen3/weight_check.h"

namespace tandem::models::qwen3 {

Target::Target(ir::Backend& backend, io::Qwen3Config cfg, TargetOptions options, ir::Graph graph,
               std::unique_ptr<ir::Weights> weights, decode::CacheSlots cache)
    : backend_(backend),
      cfg_(std::move(cfg)),
      options_(std::move(options)),
      tap_width_(static_cast<uint32_t>(options_.tap_layers.size()) * cfg_.hidden_size),
      graph_(std::move(graph)),
      weights_(std::move(weights)),
      cache_(std::move(cache)),
      runner_(backend, *weights_, graph_, *options_.buckets, kTargetStage, cfg_.vocab_size, /*split=*/true) {}

Result<std::unique_ptr<Target>> Target::open(ir::Backend& backend, const std::string& dir, TargetOptions options) {
  TANDEM_ASSIGN(io::Qwen3Config cfg, io::load_qwen3_config(dir + "/config.json"));
  TANDEM_ASSIGN(auto ckpt, io::Checkpoint::open_dir(dir));
  return create(backend, *ckpt, std::move(cfg), std::move(options), dir);
}

Result<std::unique_ptr<Target>> Target::create(ir::Backend& backend, const WeightSource& source,
                                               io::Qwen3Config cfg, TargetOptions options, std::string_view origin) {
  TANDEM_TRY(check_config(cfg, origin));
  if (!options.buckets) options.buckets = &ir::BucketTable::defaults();
  if (options.buckets->stage(kTargetStage).empty()) {
    return Error::make(ErrorKind::kInvalidArgument, "the bucket table has no '{}' stage", kTargetStage);
  }
  auto graph = build_target_graph(cfg, options.tap_layers, options.host_logits);
  if (!graph.ok()) return std::move(graph).error().context(origin);
  TANDEM_TRY(check_weights(source, *graph, origin));
  const ir::Graph* graphs[] = {&graph.value()};
  auto weights = backend.upload(source, graphs);
  if (!weights.ok()) return std::move(weights).error().context(origin);
  TANDEM_ASSIGN(decode::CacheSlots cache, decode::CacheSlots::create(backend, *graph, options.slots, options.capacity));
  return std::unique_ptr<Target>(new Target(backend, std::move(cfg), std::move(options), std::move(graph).value(),
                                            std::move(weights).value(), std::move(cache)));
}

Status Target::forward(std::span<const TargetRows> rows, std::vector<TargetOut>& out, const TapSink& taps) {
  decode::ChunkSink sink;
  if (taps && tap_width_ > 0) {
    sink = [&](const decode::DeviceChunk& c) { return taps(c.seq, c.first, c.outputs[kTapsOutput]); };
  }
  return run(rows, out, sink);
}

Status Target::run(std::span<const TargetRows> rows, std::vector<TargetOut>& out, const decode::ChunkSink& sink) {
  picks_.resize(rows.size());
  std::vector<decode::SeqRows> seqs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint32_t n = static_cast<uint32_t>(rows[i].ids.size());
    std::vector<uint32_t>& m = picks_[i];
    m.clear();
    switch (rows[i].logits) {
      case LogitRows::kNone: break;
      case LogitRows::kLast:
        if (n > 0) m.push_back(n - 1);
        break;
      case LogitRows::kAll:
        for (uint32_t r = 0; r < n; ++r) m.push_back(r);
        break;
    }
    seqs[i] = decode::SeqRows{rows[i].slot, rows[i].ids, {}, {}, m, true, rows[i].sampling, rows[i].proposals};
  }
  TANDEM_TRY(runner_.run(seqs, cache_, outputs_, sink));
  out.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].ids = std::move(outputs_[i][kIdsOutput]);
    out[i].logits = options_.host_logits ? std::move(outputs_[i][kLogitsOutput]) : ir::Tensor2{};
    out[i].taps = ir::Tensor2{};
    out[i].device_taps = {};
  }
  return {};
}

Status Target::forward_fetching_taps(std::span<const TargetRows> rows, std::vector<TargetOut>& out) {
  std::vector<ir::Tensor2> taps(rows.size());
  for (ir::Tensor2& t : taps) t.width = tap_width_;
  ir::Tensor2 chunk;
  const TapSink keep = [&](size_t seq, uint32_t, const ir::DeviceRows& device) -> Status {
    TANDEM_TRY(backend_.fetch(device, 0, device.rows, chunk));
    taps[seq].rows += chunk.rows;
    taps[seq].data.insert(taps[seq].data.end(), chunk.data.begin(), chunk.data.end());
    return {};
  };
  TANDEM_TRY(forward(rows, out, keep));
  for (size_t i = 0; i < rows.size(); ++i) out[i].taps = std::move(taps[i]);
  return {};
}

Status Target::forward_keeping_taps(std::span<const TargetRows> rows, std::vector<TargetOut>& out,
                                   const TapSink& early) {
  std::vector<ir::Tensor2> taps(rows.size());
  std::vector<ir::DeviceRows> kept(rows.size());
  for (ir::Tensor2& t : taps) t.width = tap_width_;
  ir::Tensor2 chunk;
  decode::ChunkSink sink;
  if (tap_width_ > 0) {
    sink = [&](const decode::DeviceChunk& c) -> Status {
      const ir::DeviceRows& device = c.outputs[kTapsOutput];
      // A sequence appears once per run, so its last run holds one chunk: its final rows.
      if (c.last) {
        kept[c.seq] = device;
        return {};
      }
      if (early) return early(c.seq, c.first, device);
      TANDEM_TRY(backend_.fetch(device, 0, device.rows, chunk));
      taps[c.seq].rows += chunk.rows;
      taps[c.seq].data.insert(taps[c.seq].data.end(), chunk.data.begin(), chunk.data.end());
      return {};
    };
  }
  TANDEM_TRY(run(rows, out, sink));
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].taps = std::move(taps[i]);
    out[i].device_taps = kept[i];
  }
  return {};
}

}  // namespace tandem::models::qwen3
