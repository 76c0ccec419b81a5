// CPU scorer throughput on the real compat shape (scorer.md §1: ModernBERT-large, 28 layers, d 1024,
// 16 heads, GeGLU 2624, vocab 50,368, 2 head layers) with random BF16 weights built in memory, through
// DecisionModel + Scorer on the CPU backend. Reports tokens/s per batch shape for BENCHMARKS.md.
// TANDEM_CPU_THREADS sets the thread count (default: one per hardware thread). Wall time gives tokens/s;
// the CPU column is process CPU time (all threads), so tokens ÷ CPU time is the per-core rate. Setup
// (about 1.7 GB of f32 weights, plus the BF16 source) takes some seconds before the first benchmark.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/decision/compat_graph_impl.h"  // the tensor list of the shape under test
#include "engine/models/decision/decision_model.h"

namespace tandem::models::decision {
namespace {

io::ModernBertConfig large_encoder() {
  io::ModernBertConfig c;
  c.vocab_size = 50368;
  c.hidden_size = 1024;
  c.intermediate_size = 2624;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.head_dim = 64;
  c.local_attention = 128;
  c.global_layer.resize(28);
  for (uint32_t i = 0; i < 28; ++i) c.global_layer[i] = i % 3 == 0;
  c.cls_token_id = 50281;
  c.sep_token_id = 50282;
  c.pad_token_id = 50283;
  return c;
}

// Uniform values of unit-variance scale for matrices (1/sqrt(fan_in)), near 1 for norm weights, small
// for biases; a cheap generator, since the values only need to keep activations ordinary.
std::vector<float> values(const std::string& name, const std::vector<uint64_t>& shape, uint64_t& state) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  std::vector<float> v(n);
  const bool norm = name.find("norm") != std::string::npos || name == "scorer.0.weight";
  const float scale = shape.size() == 2 && name.find("emb") == std::string::npos
                          ? 1.7320508f / std::sqrt(static_cast<float>(shape[1]))
                          : (name.ends_with("bias") ? 0.05f : (norm ? 0.1f : 1.0f));
  const float center = norm && name.ends_with("weight") ? 1.0f : (name == "temperature" ? 1.5f : 0.0f);
  for (float& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(state >> 40) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
    x = center + scale * u;
  }
  return v;
}

struct Setup {
  std::unique_ptr<DecisionModel> model;
  std::unique_ptr<ir::Backend> backend;
  std::unique_ptr<Scorer> scorer;
};

size_t threads_from_env() {
  const char* t = std::getenv("TANDEM_CPU_THREADS");
  return t == nullptr ? 0 : static_cast<size_t>(std::strtoul(t, nullptr, 10));
}

// Built once: the checkpoint's tensors are the compat graph's weights plus the temperature buffer.
Setup& setup() {
  static Setup s = [] {
    Setup out;
    const io::ModernBertConfig enc = large_encoder();
    const io::LayaAgentConfig laya;
    auto graph = build_compat_graph(enc, laya);
    if (!graph.ok()) {
      std::fprintf(stderr, "%s\n", graph.error().message().c_str());
      std::exit(1);
    }
    auto tensors = std::make_unique<io::HostTensors>();
    uint64_t state = 42;
    for (const ir::WeightRef& w : graph->weights) {
      tensors->add(io::HostTensor::from_f32(w.name(), w.shape, values(w.name(), w.shape, state), DType::kBF16));
    }
    tensors->add(io::HostTensor::from_f32("temperature", {3}, {1.6369f, 1.2514f, 1.9834f}));
    auto model = DecisionModel::from_parts(std::move(tensors), enc, laya);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", model.error().message().c_str());
      std::exit(1);
    }
    out.model = std::move(model).value();
    out.backend = cpu::make_cpu_backend(threads_from_env());
    auto scorer = Scorer::create(*out.model, *out.backend, ir::BucketTable::defaults());
    if (!scorer.ok()) {
      std::fprintf(stderr, "%s\n", scorer.error().message().c_str());
      std::exit(1);
    }
    out.scorer = std::move(scorer).value();
    std::fprintf(stderr, "cpu scorer bench: %s, weights %.1f GB\n", out.backend->caps().device.c_str(),
                 static_cast<double>(out.scorer->weight_bytes()) / 1e9);
    return out;
  }();
  return s;
}

// `seqs` questions of `tokens` tokens with 4 markers each, as compat sequences look (CLS first).
void BM_Score(benchmark::State& state) {
  const auto seqs = static_cast<uint32_t>(state.range(0));
  const auto tokens = static_cast<uint32_t>(state.range(1));
  Setup& s = setup();
  ir::Batch batch;
  for (uint32_t q = 0; q < seqs; ++q) {
    std::vector<uint32_t> ids(tokens);
    for (uint32_t t = 0; t < tokens; ++t) ids[t] = 1000 + (q * 131 + t * 17) % 40000;
    ids[0] = 50281;
    std::vector<uint32_t> markers;
    for (uint32_t m = 0; m < 4 && 2 + 3 * m < tokens; ++m) {
      markers.push_back(2 + 3 * m);
      ids[2 + 3 * m] = 50284;
    }
    batch.add_sequence(ids, markers, static_cast<uint8_t>(q % 3));
  }
  if (!s.scorer->score(batch).ok()) state.SkipWithError("score failed");  // lowers the bucket
  for (auto _ : state) {
    auto out = s.scorer->score(batch);
    benchmark::DoNotOptimize(out);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(seqs) * tokens * iterations, benchmark::Counter::kIsRate);
  state.counters["questions/s"] = benchmark::Counter(seqs * iterations, benchmark::Counter::kIsRate);
}
// (questions, tokens each): W1-like single questions, a batch of short ones, 512-token states.
BENCHMARK(BM_Score)
    ->Args({1, 136})
    ->Args({8, 128})
    ->Args({1, 512})
    ->Args({4, 512})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()  // the CPU column counts every pool thread: tokens per CPU-second survive load
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace tandem::models::decision
