// Tokenizer throughput on the HF fixture tokenizers (tests/fixtures/tokenizer, written by
// tools/make_tokenizer_fixture.py): encode of the golden corpus (warm word cache), encode of words never
// seen before (every word goes through the merge loop), and decode.
#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/io/tokenizer.h"

namespace {

using tandem::io::Tokenizer;

std::string fixture(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + rel;
}

// The golden corpus joined into one document, repeated to about 64 KiB.
std::string corpus() {
  std::ifstream in(fixture("goldens.json"));
  if (!in) return {};
  std::stringstream buffer;
  buffer << in.rdbuf();
  const auto goldens = nlohmann::json::parse(buffer.str(), nullptr, false);
  if (goldens.is_discarded() || !goldens.contains("qwen")) return {};
  std::string one;
  for (const auto& g : goldens["qwen"]) one += g["text"].get<std::string>() + "\n";
  std::string text;
  while (!one.empty() && text.size() < (size_t{64} << 10)) text += one;
  return text;
}

std::unique_ptr<Tokenizer> load(benchmark::State& state, const std::string& name) {
  auto t = Tokenizer::load(fixture(name + "/tokenizer.json"));
  if (!t.ok()) {
    state.SkipWithError(t.error().message().c_str());
    return nullptr;
  }
  return std::move(t).value();
}

void encode_corpus(benchmark::State& state, const std::string& name) {
  const auto t = load(state, name);
  const std::string text = corpus();
  if (!t || text.empty()) {
    if (t) state.SkipWithError("missing tests/fixtures/tokenizer/goldens.json");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = t->encode(text);
    if (!ids.ok()) {
      state.SkipWithError(ids.error().message().c_str());
      return;
    }
    tokens += ids->size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_EncodeCorpusQwen(benchmark::State& state) { encode_corpus(state, "qwen"); }
void BM_EncodeCorpusModernBert(benchmark::State& state) { encode_corpus(state, "modernbert"); }

// Random lowercase words, new on every iteration, so the word cache never hits.
void BM_EncodeUnseenWords(benchmark::State& state) {
  const auto t = load(state, "qwen");
  if (!t) return;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::uniform_int_distribution<int> length(3, 12);
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string text;
    for (int w = 0; w < 512; ++w) {
      text += ' ';
      for (int n = length(rng); n > 0; --n) text += static_cast<char>(letter(rng));
    }
    state.ResumeTiming();
    auto ids = t->encode(text);
    benchmark::DoNotOptimize(ids);
    bytes += text.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

void BM_DecodeCorpusQwen(benchmark::State& state) {
  const auto t = load(state, "qwen");
  const std::string text = corpus();
  if (!t || text.empty()) return;
  const auto ids = t->encode(text);
  if (!ids.ok()) {
    state.SkipWithError(ids.error().message().c_str());
    return;
  }
  for (auto _ : state) {
    auto back = t->decode(*ids);
    benchmark::DoNotOptimize(back);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

BENCHMARK(BM_EncodeCorpusQwen);
BENCHMARK(BM_EncodeCorpusModernBert);
BENCHMARK(BM_EncodeUnseenWords);
BENCHMARK(BM_DecodeCorpusQwen);

}  // namespace
