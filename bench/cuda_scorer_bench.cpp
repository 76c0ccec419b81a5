// The CUDA scorer benchmark on the ModernBERT-large compat shape with random FP16 weights (scorer.md
// §4): W1, W3 (one batch and split by cost), throughput per full bucket, device memory, (--profile)
// per-step device time, (--study) attention kernels and GEMM candidates timed one by one, (--variants)
// every backend variant end to end; a table on stdout and JSON (--json) for tools/gpu-check.sh.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/plan_impl.h"
#include "engine/cuda/study_impl.h"
#include "engine/io/safetensors.h"
#include "engine/models/decision/compat_graph_impl.h"
#include "engine/models/decision/decision_model.h"

// Shape: 28 layers, d 1024, 16 heads, GeGLU 2624, vocab 50,368, 2 head layers. W1: one choice of 4
// options over a 96-token state (136 tokens); W3: ten 512-token questions (5,120 tokens); throughput:
// full buckets of 128-token questions from 512 to 16,384 tokens.
namespace tandem::bench {
namespace {

namespace decision = models::decision;
using Clock = std::chrono::steady_clock;

struct Options {
  ir::Precision precision = ir::Precision::kF16;
  std::string json;
  bool profile = false;
  bool quick = false;
  bool tiny = false;  // a 4-layer d-128 model and a few calls: a smoke run (the emulator's test)
  bool variants = false;  // W1/W3/4096 of each backend variant (kVariants) against the default
  bool study = false;     // attention kernels and GEMM candidates timed one by one (study_impl.h)
  int device = 0;
};

io::ModernBertConfig encoder(bool tiny) {
  io::ModernBertConfig c;
  c.vocab_size = 50368;
  c.hidden_size = tiny ? 128 : 1024;
  c.intermediate_size = tiny ? 192 : 2624;
  c.num_hidden_layers = tiny ? 4 : 28;
  c.num_attention_heads = tiny ? 2 : 16;
  c.head_dim = 64;
  c.local_attention = 128;
  c.global_layer.resize(c.num_hidden_layers);
  for (uint32_t i = 0; i < c.num_hidden_layers; ++i) c.global_layer[i] = i % 3 == 0;
  c.cls_token_id = 50281;
  c.sep_token_id = 50282;
  c.pad_token_id = 50283;
  c.mask_token_id = 50284;
  return c;
}

// How the graph reads each weight decides its random values: GEMM matrices of unit gain (uniform with
// variance 1/fan_in), norm scales near 1, small biases and norm shifts, unit-variance tables. The values
// only need to keep activations ordinary; a timing does not look at them.
struct Fill {
  float center = 0.0f, half_width = 1.0f;
};

std::map<std::string, Fill> fills(const ir::Graph& g) {
  std::map<std::string, Fill> out;
  auto set = [&](ir::WeightId id, Fill f) {
    for (const std::string& part : g.weight(id).parts) out[part] = f;
  };
  for (const ir::Op& op : g.ops) {
    if (const auto* gm = std::get_if<ir::Gemm>(&op)) {
      set(gm->w, {0.0f, std::sqrt(3.0f / static_cast<float>(g.weight(gm->w).shape[1]))});
      if (gm->b) set(*gm->b, {0.0f, 0.05f});
    } else if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
      set(ln->w, {1.0f, 0.1f});
      if (ln->b) set(*ln->b, {0.0f, 0.05f});
    }
  }
  return out;
}

// splitmix64 mapped to [center - half_width, center + half_width).
void fill_uniform(std::vector<float>& v, Fill f, uint64_t& state) {
  for (float& x : v) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = f.center + f.half_width * (static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

Result<std::unique_ptr<decision::DecisionModel>> make_model(bool tiny) {
  const io::ModernBertConfig enc = encoder(tiny);
  const io::LayaAgentConfig laya;
  TANDEM_ASSIGN(const ir::Graph graph, decision::build_compat_graph(enc, laya));
  const std::map<std::string, Fill> how = fills(graph);
  auto tensors = std::make_unique<io::HostTensors>();
  uint64_t state = 42;
  for (const ir::WeightRef& w : graph.weights) {
    for (const std::string& part : w.parts) {
      std::vector<uint64_t> shape = w.shape;
      shape[0] /= w.parts.size();
      uint64_t n = 1;
      for (uint64_t d : shape) n *= d;
      std::vector<float> v(n);
      const auto it = how.find(part);
      fill_uniform(v, it != how.end() ? it->second : Fill{0.0f, 1.7320508f}, state);
      tensors->add(io::HostTensor::from_f32(part, shape, v, DType::kF16));
    }
  }
  tensors->add(io::HostTensor::from_f32("temperature", {3}, {1.6369f, 1.2514f, 1.9834f}, DType::kF32));
  return decision::DecisionModel::from_parts(std::move(tensors), enc, laya);
}

// A compat question: [CLS] question [SEP] ([MASK] option×3)×options [SEP] state [SEP], `len` tokens.
void add_question(ir::Batch& b, uint32_t len, uint32_t options, uint64_t& state) {
  std::vector<uint32_t> ids(len), markers;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<uint32_t>((state >> 33) % 50000);
  }
  ids[0] = 50281;
  for (uint32_t o = 0; o < options && 22 + 4 * o < len; ++o) {
    markers.push_back(22 + 4 * o);
    ids[22 + 4 * o] = 50284;
  }
  b.add_sequence(ids, markers, 0);
}

struct Timing {
  std::vector<double> ms;
  double pct(double p) const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0.0 : s[std::min(s.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(s.size())))];
  }
  nlohmann::json json() const {
    return {{"p50_ms", pct(50)}, {"p95_ms", pct(95)}, {"p99_ms", pct(99)}, {"calls", ms.size()}};
  }
};

Result<Timing> time_calls(const std::function<Status()>& call, int warmup, int calls) {
  for (int i = 0; i < warmup; ++i) TANDEM_TRY(call());
  Timing t;
  t.ms.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const auto start = Clock::now();
    TANDEM_TRY(call());
    t.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return t;
}

// Per-run overhead in token equivalents when splitting by cost (a run's fixed launch and copy time).
constexpr uint64_t kRunCostTokens = 256;

// The cheapest way to run the questions in order as consecutive batches: bucket tokens plus a fixed cost
// per run, the way the batcher splits work (scorer.md §2).
std::vector<std::pair<size_t, size_t>> split_by_cost(const std::vector<ir::Batch>& qs, const ir::BucketTable& table) {
  const size_t n = qs.size();
  std::vector<uint64_t> best(n + 1, UINT64_MAX);
  std::vector<size_t> from(n + 1, 0);
  best[0] = 0;
  for (size_t end = 1; end <= n; ++end) {
    uint32_t t = 0, m = 0;
    for (size_t begin = end; begin-- > 0;) {
      t += qs[begin].tokens();
      m += qs[begin].num_markers();
      auto bucket = table.smallest("compat", t, static_cast<uint32_t>(end - begin), m);
      if (!bucket.ok() || best[begin] == UINT64_MAX) continue;
      if (best[begin] + bucket->tokens + kRunCostTokens < best[end]) {
        best[end] = best[begin] + bucket->tokens + kRunCostTokens;
        from[end] = begin;
      }
    }
  }
  std::vector<std::pair<size_t, size_t>> parts;
  for (size_t end = n; end > 0; end = from[end]) parts.emplace_back(from[end], end);
  std::reverse(parts.begin(), parts.end());
  return parts;
}

ir::Batch join(const std::vector<ir::Batch>& qs, size_t begin, size_t end) {
  ir::Batch b;
  for (size_t i = begin; i < end; ++i) {
    b.add_sequence(qs[i].ids, qs[i].markers, qs[i].qtype[0]);
  }
  return b;
}

std::string category(const std::string& label) {
  if (label.find("(bias and activation)") != std::string::npos) return "bias_act";
  if (label.find("(FP16 copy") != std::string::npos) return "cast";
  // "op 12 layer_norm 'enc.3.mlp_in'": the op name is the third word.
  const size_t a = label.find(' ', 3);
  const size_t b = label.find(' ', a + 1);
  return label.substr(a + 1, b - a - 1);
}

// Each step's device time, from a graph replay with event nodes between steps (as a run replays them)
// or, if that fails, from host launches one by one; by category, by GEMM shape, and the slowest steps.
nlohmann::json profile(ir::Backend& backend, const ir::Weights& w, const ir::Graph& g, const ir::Batch& batch,
                       const ir::Bucket& bucket, const char* name) {
  auto plan = backend.lower(w, g, bucket);
  if (!plan.ok()) return {{"error", plan.error().message()}};
  auto* p = dynamic_cast<cuda::CudaPlan*>(plan->get());
  bool in_graph = true;
  auto steps = p->profile(batch, true);
  if (!steps.ok()) {
    std::printf("\nprofile %s: in a graph failed (%s); launching steps one by one\n", name,
                steps.error().message().c_str());
    in_graph = false;
    (void)p->profile(batch, false);  // warm
    steps = p->profile(batch, false);
  }
  if (!steps.ok()) return {{"error", steps.error().message()}};
  std::map<std::string, std::pair<int, double>> by;
  double total = 0;
  for (const cuda::StepTime& s : *steps) {
    auto& e = by[category(s.label)];
    e.first += 1;
    e.second += s.ms;
    total += s.ms;
  }
  const char* how = in_graph ? "graph replay with events between steps" : "steps launched one by one";
  std::printf("\nprofile %s (bucket %s, %zu tokens, %s): %.3f ms of device time\n", name,
              ir::to_string(bucket).c_str(), size_t{batch.tokens()}, how, total);
  nlohmann::json out = {{"bucket", ir::to_string(bucket)}, {"total_ms", total}, {"in_graph", in_graph}};
  for (const auto& [cat, e] : by) {
    std::printf("  %-16s %4d steps %9.3f ms %5.1f%%\n", cat.c_str(), e.first, e.second, 100.0 * e.second / total);
    out["categories"][cat] = {{"steps", e.first}, {"ms", e.second}};
  }
  // GEMM steps by shape, with the algorithm the plan runs for this batch's row tier.
  const size_t tier = p->tier_for(batch.tokens());
  std::map<std::string, std::tuple<int, double, std::string>> shapes;
  int faster = 0;
  for (size_t i = 0; i < p->steps().size(); ++i) {
    const auto* gs = std::get_if<cuda::GemmStep>(&p->steps()[i]);
    if (gs == nullptr) continue;
    const cuda::Gemm& gemm = p->gemms()[gs->at(tier)];
    faster += gemm.faster() >= 0;
    auto& e = shapes[fmt::format("{} m {}", gemm.shape().describe(), gemm.m())];
    std::get<0>(e) += 1;
    std::get<1>(e) += (*steps)[i].ms;
    std::get<2>(e) = fmt::format("{}{}", cuda::describe_algo(gemm.algo()), gemm.faster() >= 0 ? " (faster)" : "");
  }
  std::printf("  GEMMs by shape (row tier %u of %zu; %d on a faster bit-identical algorithm):\n", p->tiers()[tier],
              p->tiers().size(), faster);
  for (const auto& [shape, e] : shapes) {
    const auto& [count, ms, algo] = e;
    std::printf("    %-40s %3d x %8.1f us  %s\n", shape.c_str(), count, 1e3 * ms / count, algo.c_str());
    out["gemm_shapes"].push_back({{"shape", shape}, {"count", count}, {"ms", ms}, {"algo", algo}});
  }
  std::vector<cuda::StepTime> top = *steps;
  std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) { return x.ms > y.ms; });
  for (size_t i = 0; i < std::min<size_t>(6, top.size()); ++i) {
    std::printf("    %8.4f ms  %s\n", top[i].ms, top[i].label.c_str());
    out["slowest"].push_back({{"label", top[i].label}, {"ms", top[i].ms}});
  }
  return out;
}

size_t device_used() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total - free;
}

// The benchmark's batches: W1, W3 (one batch and its split by cost) and full buckets of 128-token
// questions for throughput.
struct Workloads {
  ir::Batch w1, w3;
  std::vector<ir::Batch> w3_parts;
  std::string w3_split;  // its buckets
  uint32_t w3_len = 0;
  std::vector<ir::Batch> full;  // 512 .. 16384 tokens
};

Workloads make_workloads(bool tiny, const ir::BucketTable& table, const ir::Executor& exec) {
  Workloads w;
  uint64_t state = 7;
  add_question(w.w1, 136, 4, state);
  std::vector<ir::Batch> w3q(10);
  w.w3_len = tiny ? 48 : 512;
  for (ir::Batch& q : w3q) add_question(q, w.w3_len, 4, state);
  w.w3 = join(w3q, 0, w3q.size());
  for (const auto& [b, e] : split_by_cost(w3q, table)) {
    w.w3_parts.push_back(join(w3q, b, e));
    auto bucket = exec.bucket_for(w.w3_parts.back());
    w.w3_split += (w.w3_split.empty() ? "" : " + ") + (bucket.ok() ? ir::to_string(*bucket) : std::string("?"));
  }
  for (uint32_t tokens : {512u, 1024u, 2048u, 4096u, 8192u, 16384u}) {
    if (tiny && tokens > 512) break;
    ir::Batch b;
    for (uint32_t s = 0; s < tokens / 128; ++s) add_question(b, 128, 4, state);
    w.full.push_back(std::move(b));
  }
  return w;
}

Status run_parts(ir::Executor& exec, const std::vector<ir::Batch>& parts, ir::Outputs& out) {
  for (const ir::Batch& b : parts) TANDEM_TRY(exec.run(b, nullptr, out));
  return {};
}

// One backend configuration against the default one (TANDEM_CUDA_* switches, set as options here).
struct Variant {
  const char* name;
  void (*apply)(cuda::CudaOptions&);
};
constexpr Variant kVariants[] = {
    {"default (tc2, tiers, timed probe)", [](cuda::CudaOptions&) {}},
    {"attention tc2split", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kTc2Split; }},
    {"attention tc", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kTc; }},
    {"attention simt", [](cuda::CudaOptions& c) { c.attention = cuda::CudaAttention::kSimt; }},
    {"GEMM row tiers off", [](cuda::CudaOptions& c) { c.gemm_tiers = false; }},
    {"GEMM timing off", [](cuda::CudaOptions& c) { c.gemm_timed = false; }},
    {"GEMM probe off", [](cuda::CudaOptions& c) { c.gemm_probe = false; }},
};

// Largest |a − b| over two output vectors; infinity when their sizes differ or a value is NaN.
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = std::fabs(static_cast<double>(a[i]) - b[i]);
    d = std::isnan(x) ? INFINITY : std::max(d, x);
  }
  return d;
}

// Every variant on its own backend: W1, W3 (one batch, split) and 4,096-token p50s, and its W1 and W3
// logits against the first variant's (bit-identical or the largest difference).
nlohmann::json run_variants(const Options& o, const decision::DecisionModel& model, const Workloads& w) {
  for (const char* v :
       {"TANDEM_CUDA_ATTENTION", "TANDEM_CUDA_GEMM_TIERS", "TANDEM_CUDA_GEMM_PROBE", "TANDEM_CUDA_GEMM_TIMED"}) {
    if (std::getenv(v) != nullptr) std::printf("variants: %s is set; each variant sets its own value\n", v);
    unsetenv(v);
  }
  const int w1_calls = o.tiny ? 2 : 300, w3_calls = o.tiny ? 1 : 30, warm = o.tiny ? 1 : 5;
  nlohmann::json out = nlohmann::json::array();
  std::vector<float> base_w1, base_w3;
  std::printf("\nvariants (p50 ms; logits against the first variant):\n");
  for (const Variant& v : kVariants) {
    if (o.tiny && out.size() == 2) break;  // the emulator's smoke run: two variants show the code works
    const auto t0 = Clock::now();
    cuda::CudaOptions co;
    co.precision = o.precision;
    co.device = o.device;
    v.apply(co);
    nlohmann::json row = {{"variant", v.name}};
    auto result = [&]() -> Status {
      TANDEM_ASSIGN(auto backend, cuda::make_cuda_backend(co));
      const ir::Graph* graphs[] = {&model.graph()};
      TANDEM_ASSIGN(auto weights, backend->upload(model.weights(), graphs));
      ir::Executor exec(*backend, *weights, model.graph(), ir::BucketTable::defaults(), "compat");
      ir::Outputs out1;
      for (const ir::Batch* b : {&w.w1, &w.w3}) TANDEM_TRY(exec.run(*b, nullptr, out1));  // lowers
      for (const ir::Batch& b : w.w3_parts) TANDEM_TRY(exec.run(b, nullptr, out1));
      const ir::Batch& t4096 = w.full[std::min<size_t>(3, w.full.size() - 1)];
      TANDEM_TRY(exec.run(t4096, nullptr, out1));
      row["setup_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
      TANDEM_ASSIGN(Timing t1, time_calls([&] { return exec.run(w.w1, nullptr, out1); }, warm, w1_calls));
      const std::vector<float> logits1 = out1.values[0].data;
      TANDEM_ASSIGN(Timing t3, time_calls([&] { return exec.run(w.w3, nullptr, out1); }, warm, w3_calls));
      const std::vector<float> logits3 = out1.values[0].data;
      TANDEM_ASSIGN(Timing ts, time_calls([&] { return run_parts(exec, w.w3_parts, out1); }, warm, w3_calls));
      TANDEM_ASSIGN(Timing tt, time_calls([&] { return exec.run(t4096, nullptr, out1); }, warm, w3_calls));
      row["w1_p50_ms"] = t1.pct(50);
      row["w3_p50_ms"] = t3.pct(50);
      row["w3_split_p50_ms"] = ts.pct(50);
      row["tokens_per_s_4096"] = t4096.tokens() / tt.pct(50) * 1e3;
      if (base_w1.empty()) {
        base_w1 = logits1;
        base_w3 = logits3;
      }
      row["w1_logits_max_diff"] = max_diff(logits1, base_w1);
      row["w3_logits_max_diff"] = max_diff(logits3, base_w3);
      row["bit_identical"] = logits1 == base_w1 && logits3 == base_w3;
      return {};
    }();
    if (!result.ok()) {
      row["error"] = result.error().message();
      std::printf("  %-36s error: %s\n", v.name, result.error().message().c_str());
    } else {
      std::printf("  %-36s W1 %7.3f  W3 %7.3f  W3 split %7.3f  4096: %8.0f tok/s  logits vs first: %s %.2e/%.2e"
                  "  (setup %.1f s)\n",
                  v.name, row["w1_p50_ms"].get<double>(), row["w3_p50_ms"].get<double>(),
                  row["w3_split_p50_ms"].get<double>(), row["tokens_per_s_4096"].get<double>(),
                  row["bit_identical"].get<bool>() ? "same bits" : "differ", row["w1_logits_max_diff"].get<double>(),
                  row["w3_logits_max_diff"].get<double>(), row["setup_s"].get<double>());
    }
    out.push_back(row);
  }
  return out;
}

// The attention kernels on the workloads' shapes, and every cuBLASLt candidate of the W1 plan's and the
// 4,096-token plan's GEMM shapes (study_impl.h).
nlohmann::json run_study(const Options& o, ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph,
                         const Workloads& w, const ir::Executor& exec) {
  nlohmann::json out;
  auto device = cuda::Device::open(o.device);
  if (!device.ok()) return {{"error", device.error().message()}};
  auto modules = cuda::KernelModules::load((*device)->info(), cuda::default_cache_dir());
  if (!modules.ok()) return {{"error", modules.error().message()}};
  std::printf("\nattention kernels (median us per launch; max |diff| of the FP16 output against simt):\n");
  const ir::Batch& t4096 = w.full[std::min<size_t>(3, w.full.size() - 1)];
  const std::pair<const char*, const ir::Batch*> batches[] = {{"W1", &w.w1}, {"W3", &w.w3}, {"4096", &t4096}};
  for (const auto& [name, batch] : batches) {
    if (o.tiny && batch != &w.w1) break;  // the emulator's smoke run: one shape shows the code works
    for (int window : {-1, 64}) {
      cuda::AttentionShape shape;
      shape.batch = *batch;
      shape.bucket = exec.bucket_for(*batch).value();
      shape.heads = o.tiny ? 2 : 16;
      shape.window = window;
      shape.theta = window < 0 ? 160000.0f : 10000.0f;
      const std::string label = fmt::format("{} {}", name, window < 0 ? "global" : "local 64");
      auto r = cuda::study_attention(**device, **modules, shape, o.tiny ? 2 : 50);
      if (!r.ok()) {
        std::printf("  %-16s error: %s\n", label.c_str(), r.error().message().c_str());
        out["attention"].push_back({{"shape", label}, {"error", r.error().message()}});
        continue;
      }
      std::string line;
      for (const cuda::AttentionStudy& a : *r) {
        line += fmt::format("  {} {:8.1f} ({:.1e})", cuda::to_string(a.kernel), a.median_us, a.max_abs_diff);
        out["attention"].push_back({{"shape", label},
                                    {"kernel", cuda::to_string(a.kernel)},
                                    {"us", a.median_us},
                                    {"max_abs_diff", a.max_abs_diff},
                                    {"max_abs_ref", a.max_abs_ref}});
      }
      std::printf("  %-16s%s\n", label.c_str(), line.c_str());
    }
  }
  cuda::GemmAlgos algos(**device, true, cuda::kTimedMaxRows);  // picks as the backend does (timing aside)
  std::printf("\nGEMM candidates (median us; * = the plan's choice, R = the reference, = same bits as R):\n");
  std::set<std::pair<cuda::GemmShape, uint32_t>> seen;
  for (const ir::Batch* batch : {&w.w1, &t4096}) {
    if (o.tiny && batch != &w.w1) break;
    auto plan = backend.lower(weights, graph, exec.bucket_for(*batch).value());
    if (!plan.ok()) continue;
    const auto* p = dynamic_cast<const cuda::CudaPlan*>(plan->get());
    const size_t tier = p->tier_for(batch->tokens());
    for (const cuda::Step& step : p->steps()) {
      const auto* gs = std::get_if<cuda::GemmStep>(&step);
      if (gs == nullptr) continue;
      const cuda::Gemm& g = p->gemms()[gs->at(tier)];
      if (!seen.insert({g.shape(), g.m()}).second) continue;
      auto r = cuda::study_gemm(**device, algos, g.shape(), g.m(), o.tiny ? 2 : 20);
      const std::string label = fmt::format("{} m {}", g.shape().describe(), g.m());
      if (!r.ok()) {
        std::printf("  %s: error: %s\n", label.c_str(), r.error().message().c_str());
        continue;
      }
      std::string line;
      for (const cuda::GemmCandidate& c : *r) {
        line += fmt::format("  {:.1f}{}{}{}", c.median_us, c.chosen ? "*" : "", c.reference ? "R" : "",
                            c.same_bits && !c.reference ? "=" : "");
        out["gemm"].push_back({{"shape", label},
                               {"rank", c.rank},
                               {"algo", c.algo},
                               {"us", c.median_us},
                               {"same_bits", c.same_bits},
                               {"reference", c.reference},
                               {"chosen", c.chosen}});
      }
      std::printf("  %-40s%s\n", label.c_str(), line.c_str());
      if (!r->empty()) std::printf("  %-40s  fastest: %s\n", "", r->front().algo.c_str());
    }
  }
  return out;
}

int run(const Options& o) {
  auto fail = [](const std::string& what, const Error& e) {
    std::fprintf(stderr, "cuda_scorer_bench: %s: %s\n", what.c_str(), e.message().c_str());
    return 1;
  };
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "cuda_scorer_bench: no CUDA device\n");
    return 2;
  }
  const auto t0 = Clock::now();
  auto model = make_model(o.tiny);
  if (!model.ok()) return fail("building the model", model.error());
  const ir::Graph& graph = (*model)->graph();
  cuda::CudaOptions co;
  co.precision = o.precision;
  co.device = o.device;
  auto backend = cuda::make_cuda_backend(co);
  if (!backend.ok()) return fail("starting the CUDA backend", backend.error());
  const size_t used_before = device_used();
  const ir::Graph* graphs[] = {&graph};
  auto weights = (*backend)->upload((*model)->weights(), graphs);
  if (!weights.ok()) return fail("uploading weights", weights.error());
  const size_t used_weights = device_used() - used_before;
  const double setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const ir::BucketTable& table = ir::BucketTable::defaults();
  ir::Executor exec(**backend, **weights, graph, table, "compat");
  ir::Outputs out;
  nlohmann::json j = {{"engine", "tandem"},
                      {"precision", ir::to_string(o.precision)},
                      {"device", (*backend)->caps().device},
                      {"setup_s", setup_s}};
  std::printf("tandem CUDA scorer, ModernBERT-large compat shape, %s, on %s (setup %.1f s)\n",
              ir::to_string(o.precision), (*backend)->caps().device.c_str(), setup_s);
  const Workloads w = make_workloads(o.tiny, table, exec);

  // A workload that fails is reported and recorded; the others still run (exit status 1 at the end).
  int rc = 0;
  auto latency = [&](const char* key, const std::string& label, const std::function<Status()>& call, int warm,
                     int calls) {
    auto t = time_calls(call, warm, calls);
    if (!t.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: %s: %s\n", label.c_str(), t.error().message().c_str());
      j[key] = {{"error", t.error().message()}};
      rc = 1;
      return false;
    }
    j[key] = t->json();
    std::printf("%s: p50 %.3f ms, p95 %.3f ms, p99 %.3f ms\n", label.c_str(), t->pct(50), t->pct(95), t->pct(99));
    return true;
  };
  auto bucket_of = [&](const ir::Batch& b) {
    auto bucket = exec.bucket_for(b);
    return bucket.ok() ? ir::to_string(*bucket) : bucket.error().message();
  };

  const int w1_calls = o.tiny ? 2 : (o.quick ? 200 : 2000), w1_warm = o.tiny ? 1 : (o.quick ? 20 : 200);
  if (latency("w1", "W1 (1 question, 4 options, 136 tokens, bucket " + bucket_of(w.w1) + ")",
              [&] { return exec.run(w.w1, nullptr, out); }, w1_warm, w1_calls)) {
    j["w1"]["bucket"] = bucket_of(w.w1);
  }
  const int w3_calls = o.tiny ? 1 : (o.quick ? 50 : 500), w3_warm = o.tiny ? 1 : (o.quick ? 5 : 50);
  if (latency("w3", fmt::format("W3 (10 questions x {} tokens, one batch, bucket {})", w.w3_len, bucket_of(w.w3)),
              [&] { return exec.run(w.w3, nullptr, out); }, w3_warm, w3_calls)) {
    j["w3"]["bucket"] = bucket_of(w.w3);
  }
  if (latency("w3_split", "W3 split by bucket cost (" + w.w3_split + ")",
              [&] { return run_parts(exec, w.w3_parts, out); }, w3_warm, w3_calls)) {
    j["w3_split"]["buckets"] = w.w3_split;
  }

  j["throughput"] = nlohmann::json::array();
  for (const ir::Batch& b : w.full) {
    const uint32_t tokens = b.tokens();
    auto t = time_calls([&] { return exec.run(b, nullptr, out); }, o.tiny ? 1 : (o.quick ? 3 : 10),
                        o.tiny ? 1 : (o.quick ? 10 : 50));
    if (!t.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: throughput at %u tokens: %s\n", tokens, t.error().message().c_str());
      j["throughput"].push_back({{"tokens", tokens}, {"error", t.error().message()}});
      rc = 1;
      continue;
    }
    const double ms = t->pct(50);
    j["throughput"].push_back({{"tokens", tokens},
                               {"questions", b.seqs()},
                               {"p50_ms", ms},
                               {"tokens_per_s", tokens / ms * 1e3},
                               {"questions_per_s", b.seqs() / ms * 1e3}});
    std::printf("throughput %5u tokens (%3u x 128): %8.3f ms  %9.0f tokens/s  %7.0f questions/s\n", tokens, b.seqs(), ms,
                tokens / ms * 1e3, b.seqs() / ms * 1e3);
  }

  j["memory"] = {{"weights_bytes", (*weights)->bytes()},
                 {"weights_device_bytes", used_weights},
                 {"plans_bytes", exec.plan_bytes()},
                 {"plans", exec.plans()},
                 {"device_used_bytes", device_used()}};
  std::printf("memory: weights %.1f MiB, %zu plans %.1f MiB, device in use %.1f MiB\n",
              static_cast<double>((*weights)->bytes()) / (1 << 20), exec.plans(),
              static_cast<double>(exec.plan_bytes()) / (1 << 20), static_cast<double>(device_used()) / (1 << 20));
  for (const ir::Bucket& b : table.stage("compat")) {
    if ((b.tokens > 512 && b.tokens != 4096) || (o.tiny && b.tokens > 64)) continue;  // latency plans and 4096
    auto plan = (*backend)->lower(**weights, graph, b);
    if (!plan.ok()) {
      std::fprintf(stderr, "cuda_scorer_bench: lowering %s: %s\n", ir::to_string(b).c_str(),
                   plan.error().message().c_str());
      rc = 1;
      continue;
    }
    j["memory"]["plan_by_bucket"][ir::to_string(b)] = (*plan)->bytes();
  }

  if (o.profile) {
    std::fflush(stdout);
    for (const auto& [name, batch] : {std::pair<const char*, const ir::Batch*>{"w1", &w.w1}, {"w3", &w.w3}}) {
      auto bucket = exec.bucket_for(*batch);
      if (bucket.ok()) j["profile"][name] = profile(**backend, **weights, graph, *batch, *bucket, name);
    }
  }
  // The JSON is written after each part, so a part that takes the process down leaves the others'.
  auto save = [&] {
    if (o.json.empty()) return;
    std::ofstream f(o.json);
    f << j.dump(2) << "\n";
    if (!f) std::fprintf(stderr, "cuda_scorer_bench: cannot write %s\n", o.json.c_str());
  };
  save();
  if (o.study) {
    std::fflush(stdout);
    j["study"] = run_study(o, **backend, **weights, graph, w, exec);
    save();
  }
  if (o.variants) {
    std::fflush(stdout);
    j["variants"] = run_variants(o, **model, w);  // each on its own backend, one at a time
    save();
  }
  return rc;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--precision" && i + 1 < argc) {
      auto p = tandem::ir::parse_precision(argv[++i]);
      if (!p.ok()) {
        std::fprintf(stderr, "%s\n", p.error().message().c_str());
        return 2;
      }
      o.precision = *p;
    } else if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else if (a == "--device" && i + 1 < argc) {
      o.device = std::atoi(argv[++i]);
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--tiny") {
      o.tiny = true;
    } else if (a == "--variants") {
      o.variants = true;
    } else if (a == "--study") {
      o.study = true;
    } else {
      std::fprintf(stderr,
                   "usage: cuda_scorer_bench [--precision f16|f32] [--json FILE] [--profile] [--study] [--variants] "
                   "[--quick] [--tiny] [--device N]\n");
      return 2;
    }
  }
  try {
    return tandem::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_scorer_bench: %s\n", e.what());
    return 1;
  }
}
