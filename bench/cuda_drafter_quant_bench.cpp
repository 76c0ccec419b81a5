// The quantized drafter benchmark (issue 14): one DFlash drafter on the CUDA backend as its float weights
// (the plan's precision) and quantized at load to int8 and int4: the device bytes of its weights and the
// draft time per round (one block per request, logits left on the device), median over rounds, host
// clock around each synchronous draft, at batch 1, 8 and 32. With --kernels instead: the quantized GEMM's two
// kernels (CUDA cores, tensor cores) and the dense BF16 decode GEMM on a Qwen3-8B-shaped drafter's matrices at
// 1, 16, 128 and 512 rows (a 16-row block at batch 1, 8, 32), device time per launch; --kernel-shape K,COLS
// (one matrix instead, e.g. to profile one launch under ncu), --kernel-rows LIST and --reps N narrow it. JSON on
// stdout; exit status 2 when some entry failed (its "error" says why).
//   cuda_drafter_quant_bench [--drafter DIR] [--target DIR] [--block B] [--rounds N] [--context N]
//                            [--precision bf16|f16|f32] [--batch N]
//   cuda_drafter_quant_bench --kernels [--kernel-shape K,COLS] [--kernel-rows 1,16,128,512] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cli_values.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/study_impl.h"
#include "engine/models/dflash/dflash_model.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;
using models::dflash::BlockOut;
using models::dflash::BlockRows;
using models::dflash::Drafter;
using models::dflash::DrafterOptions;
using models::dflash::Quantization;
using models::dflash::SettleRows;

struct Args {
  std::string drafter = TANDEM_SOURCE_DIR "/models/pylm-dflash2";
  std::string target = TANDEM_SOURCE_DIR "/models/pylm";
  uint32_t block = 16;
  uint32_t rounds = 50;
  uint32_t context = 64;
  ir::Precision precision = ir::Precision::kBF16;
  std::vector<uint32_t> batches = {1, 8, 32};
  bool kernels = false;
  uint32_t kernel_k = 0, kernel_cols = 0;  // 0: the drafter's four matrices
  std::vector<uint32_t> kernel_rows = {1, 16, 128, 512};
  int reps = 50;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_drafter_quant_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T value_or_die(Result<T> r) {
  return value_or_exit("cuda_drafter_quant_bench", std::move(r));
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// One format at one batch: settle `context` random tap rows per request, then time `rounds` drafts.
nlohmann::json run(ir::Backend& backend, const Args& a, std::optional<Quantization> q, uint32_t batch) {
  nlohmann::json out{{"batch", batch}};
  const auto fail = [&](const Error& e) {
    out["error"] = e.message();
    return out;
  };
  auto d = Drafter::open(backend, a.drafter, a.target, DrafterOptions{batch, a.context + a.block, 0, std::nullopt,
                                                                      nullptr, q});
  if (!d.ok()) return fail(d.error());
  Drafter& drafter = **d;
  out["weight_bytes"] = drafter.weights().bytes();
  const uint32_t width = drafter.setup().tap_width();
  std::vector<float> taps(size_t{a.context} * width);
  uint64_t seed = 12345;
  for (float& x : taps) x = static_cast<float>((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 40) /
                            static_cast<float>(1u << 24) - 0.5f;
  std::vector<SettleRows> settle;
  std::vector<BlockRows> rows;
  for (uint32_t s = 0; s < batch; ++s) {
    settle.push_back({s, taps, {}});
    rows.push_back({s, 7 + s});
  }
  if (auto st = drafter.settle(settle); !st.ok()) return fail(st.error());
  std::vector<BlockOut> blocks;
  std::vector<double> ms;
  for (uint32_t r = 0; r < a.rounds + 3; ++r) {
    const auto t0 = Clock::now();
    if (auto st = drafter.draft(rows, a.block, blocks, false); !st.ok()) return fail(st.error());
    const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r >= 3) ms.push_back(t);  // the first rounds warm the plans
  }
  out["draft_ms_median"] = median(ms);
  out["draft_ms_min"] = *std::min_element(ms.begin(), ms.end());
  return out;
}

// Each qgemm kernel and the dense decode GEMM at each shape and row count; prints one line per shape.
nlohmann::json run_kernels(const Args& a, bool& failed) {
  nlohmann::json out = nlohmann::json::array();
  auto device = cuda::Device::open(0);
  if (!device.ok()) die(device.error().message());
  auto modules = cuda::KernelModules::load((*device)->info(), cuda::default_cache_dir());
  if (!modules.ok()) die(modules.error().message());
  struct Shape {
    const char* name;
    uint32_t k, cols;
  };
  std::vector<Shape> shapes = {{"q/o 4096x4096", 4096, 4096}, {"k/v 1024x4096", 4096, 1024},
                               {"gate_up 24576x4096", 4096, 24576}, {"down 4096x12288", 12288, 4096}};
  const std::string custom = fmt::format("{}x{}", a.kernel_cols, a.kernel_k);
  if (a.kernel_k != 0) shapes = {{custom.c_str(), a.kernel_k, a.kernel_cols}};
  for (const Shape& sh : shapes) {
    for (uint32_t rows : a.kernel_rows) {
      nlohmann::json e{{"shape", sh.name}, {"k", sh.k}, {"cols", sh.cols}, {"rows", rows}};
      auto r = cuda::study_qgemm(**device, **modules, sh.k, sh.cols, rows, a.reps);
      if (!r.ok()) {
        e["error"] = r.error().message();
        failed = true;
      } else {
        std::string line = fmt::format("{:20} {:4} rows:", sh.name, rows);
        for (const cuda::QGemmStudy& q : *r) {
          e["kernels"].push_back({{"kernel", q.kernel}, {"median_us", q.median_us}, {"weight_bytes", q.weight_bytes},
                                  {"weight_gb_per_s", q.weight_bytes / q.median_us / 1e3},
                                  {"max_rel_diff", q.max_rel_diff}});
          line += fmt::format("  {} {:.1f} us", q.kernel, q.median_us);
        }
        std::fprintf(stderr, "%s\n", line.c_str());
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem;
  bench::Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool more = i + 1 < argc;
    if (s == "--drafter" && more) {
      a.drafter = argv[++i];
    } else if (s == "--target" && more) {
      a.target = argv[++i];
    } else if (s == "--block" && more) {
      a.block = bench::value_or_die(bench::count(s, argv[++i], 16));
    } else if (s == "--rounds" && more) {
      a.rounds = bench::value_or_die(bench::count(s, argv[++i]));
    } else if (s == "--context" && more) {
      a.context = bench::value_or_die(bench::count(s, argv[++i]));
    } else if (s == "--batch" && more) {  // one batch instead of 1, 8 and 32
      a.batches = {bench::value_or_die(bench::count(s, argv[++i]))};
    } else if (s == "--kernels") {
      a.kernels = true;
    } else if (s == "--kernel-shape" && more) {  // K,COLS
      const std::vector<uint32_t> kc = bench::value_or_die(bench::counts_of(s, argv[++i], 2));
      a.kernel_k = kc[0];
      a.kernel_cols = kc[1];
    } else if (s == "--kernel-rows" && more) {
      a.kernel_rows = bench::value_or_die(bench::count_list(s, argv[++i]));
    } else if (s == "--reps" && more) {
      a.reps = static_cast<int>(bench::value_or_die(bench::count(s, argv[++i], 100000)));
    } else if (s == "--precision" && more) {
      a.precision = bench::value_or_die(ir::parse_precision(argv[++i]));
    } else {
      bench::die("unknown argument " + s + " (--drafter DIR, --target DIR, --block B, --rounds N, --context N, "
                 "--precision P, --batch N, --kernels, --kernel-shape K,COLS, --kernel-rows LIST, --reps N)");
    }
  }
  if (a.kernels) {
    bool failed = false;
    const nlohmann::json k{{"kernels", bench::run_kernels(a, failed)}};
    std::printf("%s\n", k.dump(2).c_str());
    return failed ? 2 : 0;
  }
  cuda::CudaOptions o;
  o.precision = a.precision;
  auto backend = cuda::make_cuda_backend(o);
  if (!backend.ok()) bench::die(backend.error().message());
  nlohmann::json out{{"drafter", a.drafter}, {"block", a.block}, {"rounds", a.rounds}, {"context", a.context},
                     {"precision", ir::to_string(a.precision)}};
  const std::pair<const char*, std::optional<models::dflash::Quantization>> formats[] = {
      {"float", std::nullopt}, {"int8", models::dflash::Quantization::kInt8},
      {"int4", models::dflash::Quantization::kInt4}};
  bool failed = false;
  for (const auto& [name, q] : formats) {
    for (uint32_t batch : a.batches) {
      out["formats"][name].push_back(bench::run(**backend, a, q, batch));
      failed = failed || out["formats"][name].back().contains("error");
      std::fprintf(stderr, "%s batch %u done\n", name, batch);
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return failed ? 2 : 0;
}
