// The CUDA target benchmark (issue 9): random BF16 weights in the Qwen3-8B shape (or --tiny for the
// emulator), timed with the host clock around each synchronous forward (it ends with the copy of the
// picked ids): batch-1 greedy decode, verify steps of 1..16 rows, batch 8 and 32 decode, prefill of 1k
// and 8k tokens, KV bytes per token and how many 4k-token requests fit beside the weights. JSON out.
//   cuda_decoder_bench [--tiny] [--json FILE] [--precision bf16|f16|f32] [--steps N] [--decode-only]
//   cuda_decoder_bench --profile-step SLOTS,ROWS: warms one forward of ROWS new rows for each of SLOTS
//   sequences at 512 tokens of context, then runs one more between cudaProfilerStart/Stop and exits, for
//   `ncu --profile-from-start off` (per-kernel device times of exactly one step). Run the benchmark once
//   without the profiler first: the GEMM choices a profiled run uses are then the timed, cached ones
//   (under a profiler nothing is timed; PERF_NOTES.md "A trap found on the way").
//   (TANDEM_CUDA_DECODE_GEMM=1: the decoder's GEMMs on the decode GEMM instead of cuBLASLt, to compare;
//   TANDEM_CUDA_FUSE_QKV=0 and TANDEM_CUDA_SPLIT_CTAS=N likewise, tools/gpu-decoder-tune.sh)
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli_values.h"
#include "bench/cuda_decoder/random_target.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/models/qwen3/qwen3_model.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;
using models::qwen3::LogitRows;
using models::qwen3::Target;
using models::qwen3::TargetOut;
using models::qwen3::TargetRows;

struct Args {
  bool tiny = false;
  std::string json;
  ir::Precision precision = ir::Precision::kBF16;
  uint32_t steps = 48;
  uint32_t profile_slots = 0, profile_rows = 0;  // --profile-step
  bool decode_only = false;  // --decode-only: no prefill figures (quicker A/B runs of the step)
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_decoder_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(const Status& s, const std::string& what) {
  if (!s.ok()) die(what + ": " + s.error().message());
}

class Bench {
 public:
  Bench(Target& t, uint32_t vocab) : t_(t), vocab_(vocab) {}

  std::vector<uint32_t> tokens(uint32_t n) {
    std::vector<uint32_t> out(n);
    for (uint32_t& x : out) x = static_cast<uint32_t>((seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull) >> 33) % vocab_;
    return out;
  }

  // Fills `slots` slots with `context` positions each.
  void fill(uint32_t slots, uint32_t context) {
    for (uint32_t s = 0; s < slots; ++s) {
      check(t_.cache().crop(s, 0), "crop");
      const std::vector<uint32_t> p = tokens(context);
      const TargetRows r{s, p, LogitRows::kNone, {}};
      check(t_.forward({&r, 1}, out_), "prefill");
    }
  }

  // Host milliseconds of `runs` forwards of `rows` new rows for each of `slots` sequences, each cropped back
  // so every one sees the same context; with `profile_last`, the last one runs between cudaProfilerStart and
  // cudaProfilerStop (for `ncu --profile-from-start off`).
  std::vector<double> step_times(uint32_t slots, uint32_t rows, uint32_t runs, bool profile_last) {
    std::vector<std::vector<uint32_t>> ids(slots);
    std::vector<TargetRows> batch;
    std::vector<uint32_t> lengths;
    for (uint32_t s = 0; s < slots; ++s) {
      ids[s] = tokens(rows);
      batch.push_back({s, ids[s], rows == 1 ? LogitRows::kLast : LogitRows::kAll, {}});
      lengths.push_back(t_.cache().length(s));
    }
    std::vector<double> ms;
    for (uint32_t i = 0; i < runs; ++i) {
      const bool profiled = profile_last && i + 1 == runs;
      if (profiled && cudaProfilerStart() != cudaSuccess) die("cudaProfilerStart failed");
      const auto t0 = Clock::now();
      check(t_.forward(batch, out_), "step");
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (profiled && cudaProfilerStop() != cudaSuccess) die("cudaProfilerStop failed");
      for (uint32_t s = 0; s < slots; ++s) check(t_.cache().crop(s, lengths[s]), "crop");
    }
    return ms;
  }

  // Median milliseconds of `reps` such forwards after 3 warm-ups (a bucket's first use lowers its plan).
  double step_ms(uint32_t slots, uint32_t rows, uint32_t reps) {
    const std::vector<double> t = step_times(slots, rows, reps + 3, false);
    return median({t.begin() + 3, t.end()});
  }

  // Greedy decoding at batch `slots`: each step feeds back the picked token (the real loop).
  double decode_tokens_per_s(uint32_t slots, uint32_t steps) {
    std::vector<uint32_t> next(slots, 1);
    std::vector<TargetRows> batch(slots);
    std::vector<double> ms;
    for (uint32_t i = 0; i < steps + 3; ++i) {
      for (uint32_t s = 0; s < slots; ++s) batch[s] = {s, {&next[s], 1}, LogitRows::kLast, {}};
      const auto t0 = Clock::now();
      check(t_.forward(batch, out_), "decode");
      const double e = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (i >= 3) ms.push_back(e);
      for (uint32_t s = 0; s < slots; ++s) next[s] = out_[s].ids.ids.at(0);
    }
    return 1e3 * slots / median(ms);
  }

  // One step of `rows` rows for each of `slots` sequences under the profiler, after three warm-ups.
  void profile_step(uint32_t slots, uint32_t rows) {
    const std::vector<double> t = step_times(slots, rows, 4, true);
    for (size_t i = 0; i < t.size(); ++i) {
      std::fprintf(stderr, "profile step %zu%s: %u x %u rows, %.3f ms host time\n", i,
                   i + 1 == t.size() ? " (profiled)" : "", slots, rows, t[i]);
    }
  }

  double prefill_tokens_per_s(uint32_t n, uint32_t reps) {
    const std::vector<uint32_t> p = tokens(n);
    std::vector<double> ms;
    for (uint32_t i = 0; i < reps + 1; ++i) {
      check(t_.cache().crop(0, 0), "crop");
      const TargetRows r{0, p, LogitRows::kLast, {}};
      const auto t0 = Clock::now();
      check(t_.forward({&r, 1}, out_), "prefill");
      const double e = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (i >= 1) ms.push_back(e);
    }
    return 1e3 * n / median(ms);
  }

 private:
  Target& t_;
  uint32_t vocab_;
  uint64_t seed_ = 7;
  std::vector<TargetOut> out_;
};

int run(const Args& a) {
  const DecoderShape shape = a.tiny ? DecoderShape::tiny() : DecoderShape{};
  const io::Qwen3Config cfg = qwen3_config(shape);
  const auto g0 = Clock::now();
  auto weights = random_target(shape, 1);
  const double gen_s = std::chrono::duration<double>(Clock::now() - g0).count();
  cuda::CudaOptions o;
  o.precision = a.precision;
  auto backend = cuda::make_cuda_backend(o);
  if (!backend.ok()) die(backend.error().message());
  size_t free0 = 0, total = 0;
  (void)cudaMemGetInfo(&free0, &total);
  const uint32_t slots = a.tiny ? 8 : 32, capacity = a.tiny ? 1200 : 8448;
  const auto u0 = Clock::now();
  auto target = Target::create(**backend, *weights, cfg, models::qwen3::TargetOptions{{}, slots, capacity, nullptr},
                               "random Qwen3");
  if (!target.ok()) die(target.error().message());
  const double upload_s = std::chrono::duration<double>(Clock::now() - u0).count();
  weights.reset();
  Target& t = **target;
  size_t free1 = 0;
  (void)cudaMemGetInfo(&free1, &total);
  nlohmann::ordered_json j;
  j["shape"] = {{"layers", shape.layers}, {"hidden", shape.hidden}, {"heads", shape.heads}, {"kv_heads", shape.kv_heads},
                {"head_dim", shape.head_dim}, {"ffn", shape.ffn}, {"vocab", shape.vocab}};
  j["precision"] = ir::to_string(a.precision);
  j["device"] = (*backend)->caps().device;
  // Decoder GEMMs on cuBLASLt, or (TANDEM_CUDA_DECODE_GEMM=1) those of up to 1,024 rows on the decode GEMM.
  const char* decode_gemm = std::getenv("TANDEM_CUDA_DECODE_GEMM");
  j["decode_gemm"] = decode_gemm != nullptr && std::strcmp(decode_gemm, "1") == 0;
  const char* fuse = std::getenv("TANDEM_CUDA_FUSE_QKV");
  j["fuse_qkv_prep"] = fuse == nullptr || std::strcmp(fuse, "0") != 0;
  const char* split = std::getenv("TANDEM_CUDA_SPLIT_CTAS");
  j["split_ctas"] = split == nullptr ? std::string("rule") : std::string(split);
  const char* narrow = std::getenv("TANDEM_CUDA_SPLIT_NARROW");
  j["split_narrow"] = narrow == nullptr ? std::string("rule") : std::string(narrow);
  j["weights_seconds"] = {{"generate", gen_s}, {"upload", upload_s}};
  j["kv_bytes_per_token"] = t.cache().bytes_per_position();
  j["state_bytes"] = t.cache().bytes();
  j["device_free_after_load"] = free1;
  // Requests of 4k tokens that fit in what the weights and this state leave (plus the state itself).
  j["requests_4k_fit"] = (free1 + t.cache().bytes()) / (size_t{4096} * t.cache().bytes_per_position());
  Bench b(t, shape.vocab);
  const uint32_t ctx = a.tiny ? 64 : 512;
  if (a.profile_slots > 0) {
    if (a.profile_slots > slots) die("--profile-step: at most " + std::to_string(slots) + " sequences");
    b.fill(a.profile_slots, ctx);
    b.profile_step(a.profile_slots, a.profile_rows);
    return 0;
  }
  b.fill(1, ctx);
  j["decode_batch1_tokens_per_s"] = b.decode_tokens_per_s(1, a.steps);
  nlohmann::ordered_json verify;
  for (uint32_t rows : {1u, 2u, 4u, 8u, 16u}) verify[std::to_string(rows)] = b.step_ms(1, rows, a.tiny ? 2 : 10);
  j["verify_ms_batch1_context"] = ctx;
  j["verify_ms_batch1"] = verify;
  j["verify16_over_verify1"] = verify["16"].get<double>() / verify["1"].get<double>();
  for (uint32_t batch : {8u, 32u}) {
    if (batch > slots) continue;
    b.fill(batch, ctx);
    j["decode_batch" + std::to_string(batch) + "_tokens_per_s"] = b.decode_tokens_per_s(batch, a.tiny ? 4 : 24);
  }
  for (uint32_t n : {1024u, 8192u}) {
    if (n + 1 > capacity || a.decode_only) continue;
    j["prefill_" + std::to_string(n) + "_tokens_per_s"] = b.prefill_tokens_per_s(n, a.tiny ? 1 : 3);
  }
  const std::string text = j.dump(2);
  std::printf("%s\n", text.c_str());
  if (!a.json.empty()) std::ofstream(a.json) << text << "\n";
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--tiny") {
      a.tiny = true;
    } else if (s == "--json" && i + 1 < argc) {
      a.json = argv[++i];
    } else if (s == "--steps" && i + 1 < argc) {
      a.steps = tandem::bench::value_or_exit("cuda_decoder_bench", tandem::bench::count(s, argv[++i], 100000));
    } else if (s == "--profile-step" && i + 1 < argc) {
      const std::vector<uint32_t> sr =
          tandem::bench::value_or_exit("cuda_decoder_bench", tandem::bench::counts_of(s, argv[++i], 2));
      if (sr[1] > 16) tandem::bench::die("--profile-step: ROWS in 1..16");
      a.profile_slots = sr[0];
      a.profile_rows = sr[1];
    } else if (s == "--decode-only") {
      a.decode_only = true;
    } else if (s == "--precision" && i + 1 < argc) {
      auto p = tandem::ir::parse_precision(argv[++i]);
      if (!p.ok()) tandem::bench::die(p.error().message());
      a.precision = *p;
    } else {
      tandem::bench::die("unknown argument " + s +
                              " (--tiny, --json FILE, --steps N, --precision P, --decode-only, --profile-step S,R)");
    }
  }
  return tandem::bench::run(a);
}
