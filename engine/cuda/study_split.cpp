// The split-K study (study_impl.h): how a decoder's GEMM shapes run at few rows on cuBLASLt with and without a
// K split, and on the decode GEMM, with each configuration's rows checked for the same bits at every m. The
// weights rotate through copies larger than the L2 together, as a decode step reads each matrix once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/steps_impl.h"
#include "engine/cuda/study_impl.h"
#include "engine/cuda/study_support_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {
namespace {

constexpr size_t kStudyWorkspace = size_t{512} << 20;
constexpr int kSplits[] = {2, 3, 4, 6, 8, 12, 16};

int algo_splits(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                           &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return splits;
}

const char* scheme_name(uint32_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output";
    default: return "?";
  }
}

uint32_t algo_scheme(const cublasLtMatmulAlgo_t& algo) {
  uint32_t scheme = 0;
  size_t written = 0;
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
                                             &written);
  return scheme;
}

// cuBLASLt's candidates for m rows with any reduction but in-place (atomics), best first.
Result<std::vector<cublasLtMatmulAlgo_t>> split_candidates(const Device& device, const GemmShape& shape, uint32_t m,
                                                           const float* bias) {
  GemmDescs d;
  TANDEM_TRY(make_gemm_descs(shape, m, bias, d));
  cublasLtMatmulPreference_t pref = nullptr;
  TANDEM_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kStudyWorkspace;
  const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                        CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  (void)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  (void)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask));
  std::vector<cublasLtMatmulHeuristicResult_t> results(16);
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(device.lt(), d.desc, d.a, d.b, d.c, d.c, pref,
                                                           static_cast<int>(results.size()), results.data(), &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> out;
  if (st != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) out.push_back(results[i].algo);
  }
  return out;
}

// The largest distance in units of the last place between two outputs of `type` (f32, f16 or bf16 values).
uint64_t max_ulps(const std::vector<unsigned char>& x, const std::vector<unsigned char>& y, Dt type) {
  const size_t width = dt_size(type), n = std::min(x.size(), y.size()) / width;
  uint64_t worst = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t a = 0, b = 0;
    std::memcpy(&a, x.data() + i * width, width);
    std::memcpy(&b, y.data() + i * width, width);
    const int64_t sign = int64_t{1} << (8 * width - 1);
    // Sign-magnitude to a monotone integer line.
    const auto line = [sign](int64_t v) { return (v & sign) != 0 ? -(v & (sign - 1)) : v; };
    const int64_t d = line(a) - line(b);
    worst = std::max<uint64_t>(worst, static_cast<uint64_t>(d < 0 ? -d : d));
  }
  return worst;
}

struct Operands {
  std::vector<DeviceBuffer> w;  // copies of one random weight
  DeviceBuffer a, out, bias, workspace;
};

}  // namespace

Result<std::vector<SplitStudy>> study_gemm_splits(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                                  const GemmShape& shape, const std::vector<uint32_t>& ms, int reps,
                                                  SplitStudyParts parts) {
  if (ms.empty()) return std::vector<SplitStudy>{};
  TANDEM_TRY(device.activate());
  const uint32_t top = ms.back();
  const size_t w_bytes = size_t{shape.n} * shape.k * dt_size(shape.ab);
  const size_t out_bytes = size_t{top} * shape.n * dt_size(shape.out);
  std::mt19937 rng(31);
  Operands o;
  TANDEM_ASSIGN(DeviceBuffer first, random_device_buffer(device, size_t{shape.n} * shape.k, shape.ab,
                                                         1.0f / std::sqrt(static_cast<float>(shape.k)), rng));
  TANDEM_ASSIGN(o.w, rotation(device, std::move(first), w_bytes, rotation_copies(w_bytes)));
  TANDEM_ASSIGN(o.a, random_device_buffer(device, size_t{top} * shape.k, shape.ab, 1.0f, rng));
  TANDEM_ASSIGN(o.out, DeviceBuffer::make(out_bytes, "a study output"));
  TANDEM_ASSIGN(o.bias, random_device_buffer(device, shape.n, Dt::kF32, 0.1f, rng));
  TANDEM_ASSIGN(o.workspace, DeviceBuffer::make(kStudyWorkspace, "a study workspace"));
  TANDEM_CUDA_CHECK(cudaMemsetAsync(o.out.data(), 0, out_bytes, device.stream()));
  TANDEM_TRY(device.synchronize());
  const float* bias = nullptr;  // the decoders' GEMMs have none
  auto ops_for = [&](size_t copy) { return GemmOperands{o.w[copy].data(), o.a.data(), o.out.data(), bias}; };
  // Accumulating shapes read the output: zero it before each bit check so runs start from the same bytes.
  auto zero_out = [&]() -> Status {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(o.out.data(), 0, out_bytes, device.stream()));
    return {};
  };

  std::vector<SplitStudy> out;
  // The production configuration's bits at each m (studied first), for every other configuration to match.
  std::map<uint32_t, std::vector<unsigned char>> production_bits;
  // Runs `make(m, copy)`'s launcher at every m: a bit check on copy 0 against the largest m it takes and
  // against production at the same m, then the timing.
  using Launcher = std::function<Status()>;
  auto study = [&](const std::string& config, const std::string& algo, int splits,
                   const std::function<Result<Launcher>(uint32_t m, size_t copy)>& make) -> Status {
    const bool is_production = production_bits.empty();
    std::vector<unsigned char> reference;
    std::vector<SplitStudy> rows;
    for (auto it = ms.rbegin(); it != ms.rend(); ++it) {  // the largest first: its bits are the reference
      const uint32_t m = *it;
      std::vector<Launcher> launchers;
      for (size_t c = 0; c < o.w.size(); ++c) {
        Result<Launcher> l = make(m, c);
        if (!l.ok()) {
          launchers.clear();  // a configuration that cannot take this m (the streaming GEMM past 16 rows)
          break;
        }
        launchers.push_back(std::move(*l));
      }
      if (launchers.empty()) continue;
      TANDEM_TRY(zero_out());
      TANDEM_TRY(launchers[0]());
      const size_t bytes = size_t{m} * shape.n * dt_size(shape.out);
      TANDEM_ASSIGN(std::vector<unsigned char> got, download_bytes(device, o.out, bytes));
      SplitStudy s;
      s.config = config;
      s.algo = algo;
      s.m = m;
      s.splits = splits;
      if (reference.empty()) reference = got;
      s.rows_invariant = std::memcmp(got.data(), reference.data(), bytes) == 0;
      if (is_production) production_bits[m] = got;
      if (auto p = production_bits.find(m); p != production_bits.end() && p->second.size() == got.size()) {
        s.matches_production = std::memcmp(got.data(), p->second.data(), bytes) == 0;
        if (!s.matches_production) s.production_ulps = max_ulps(got, p->second, shape.out);
      }
      size_t next = 0;
      TANDEM_ASSIGN(s.median_us, median_us(device, [&] { return launchers[next++ % launchers.size()](); }, reps,
                                           static_cast<int>(launchers.size())));
      s.weight_tb_per_s = static_cast<double>(w_bytes) / s.median_us / 1e6;
      rows.push_back(s);
    }
    out.insert(out.end(), rows.rbegin(), rows.rend());
    return {};
  };

  // What tandem runs today (the reference and its timed bit-identical candidates).
  // As a decoder plan lowers it (the K split of gemm_impl.h's rule), and in one pass (the rule before it).
  GemmShape decoder = shape;
  decoder.splits = decoder_gemm_splits(shape.k, shape.n);
  std::string chosen;
  const auto production = [&](const GemmShape& as) {
    return [&, as](uint32_t m, size_t copy) -> Result<Launcher> {
      TANDEM_ASSIGN(Gemm g, Gemm::make(device, algos, as, m, ops_for(copy)));
      if (copy == 0) chosen += fmt::format("{}m {}: {}{}", chosen.empty() ? "" : "; ", m, describe_algo(g.algo()),
                                           g.faster() >= 0 ? " (faster)" : "");
      auto shared = std::make_shared<Gemm>(std::move(g));
      return Launcher([&device, shared] { return shared->run(device); });
    };
  };
  TANDEM_TRY(study(fmt::format("production (decoder, split {})", decoder.splits), "", 1, production(decoder)));
  if (!out.empty()) out.back().algo = chosen;  // every m's choice, on the last row of the configuration
  chosen.clear();
  if (decoder.splits > 1) {
    TANDEM_TRY(study("one pass (the rule before)", "", 1, production(shape)));
    if (!out.empty()) out.back().algo = chosen;
  }
  if (parts == SplitStudyParts::kProduction) return out;
  // The streaming GEMM (kernels/gemm_stream.cu) at up to 16 rows on production's K split.
  if (gemm_stream_supported(shape.k, decoder.splits, shape.ab, shape.out, shape.accumulate).ok()) {
    const auto stream = [&](uint32_t m, size_t copy) -> Result<Launcher> {
      if (m > gemm_stream_max_rows(shape.k, decoder.splits)) {
        return Error::make(ErrorKind::kUnsupported, "past the streaming rows");
      }
      TANDEM_ASSIGN(StudyBatch sb, one_sequence(device, m));
      auto keep = std::make_shared<DeviceBuffer>(std::move(sb.index));
      const Loc a = token_loc(o.a, shape.k, shape.ab, "a"), y = token_loc(o.out, shape.n, shape.out, "out");
      TANDEM_ASSIGN(KernelStep step, gemm_stream_step(sb.ctx, a, y, o.w[copy].data(), decoder.splits, shape.accumulate));
      return Launcher([&device, &modules, step, keep] { return launch(modules, step, device.stream()); });
    };
    TANDEM_TRY(study("stream GEMM", "gemm_stream.cu", static_cast<int>(decoder.splits), stream));
  }
  if (parts == SplitStudyParts::kStream) return out;
  // The decode GEMM (kernels/gemm_decode.cu).
  if (gemm_decode_supported(shape.k, shape.ab, shape.out, shape.accumulate).ok()) {
    const GemmDecodeSplit split = gemm_decode_split(shape.k, shape.n);
    const auto decode = [&](uint32_t m, size_t copy) -> Result<Launcher> {
      TANDEM_ASSIGN(StudyBatch sb, one_sequence(device, m));
      auto keep = std::make_shared<DeviceBuffer>(std::move(sb.index));  // the launcher keeps the index alive
      const Loc a = token_loc(o.a, shape.k, shape.ab, "a"), y = token_loc(o.out, shape.n, shape.out, "out");
      TANDEM_ASSIGN(KernelStep step, gemm_decode_step(sb.ctx, a, y, o.w[copy].data(), nullptr, shape.accumulate));
      return Launcher([&device, &modules, step, keep] { return launch(modules, step, device.stream()); });
    };
    TANDEM_TRY(study("decode GEMM", "gemm_decode.cu", static_cast<int>(split.splits), decode));
  }
  // A given cuBLASLt configuration on the study's own (larger) workspace.
  const auto on_algo = [&](const cublasLtMatmulAlgo_t& algo) {
    return [&, algo](uint32_t m, size_t copy) -> Result<Launcher> {
      TANDEM_ASSIGN(Gemm g, Gemm::with_algo(device, shape, m, ops_for(copy), algo, kStudyWorkspace));
      auto shared = std::make_shared<Gemm>(std::move(g));
      void* ws = o.workspace.data();
      return Launcher([&device, shared, ws] { return shared->run(device, ws, kStudyWorkspace); });
    };
  };
  // The reference with a K split of s slices, reduced in the compute or the output type.
  TANDEM_ASSIGN(const Gemm made, Gemm::make(device, algos, shape, top, ops_for(0)));
  for (const uint32_t scheme : {uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE},
                                uint32_t{CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}}) {
    for (const int s : kSplits) {
      cublasLtMatmulAlgo_t algo = made.reference();
      const int32_t splits = s;
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits)) !=
              CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                               sizeof(scheme)) != CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      TANDEM_TRY(study(fmt::format("reference split {} {}", s, scheme_name(scheme)), describe_algo(algo), s,
                       on_algo(algo)));
    }
  }
  // cuBLASLt's own split-K picks for each m (each then also run at the other m to check its bits).
  std::vector<cublasLtMatmulAlgo_t> seen;
  for (const uint32_t m : ms) {
    TANDEM_ASSIGN(const std::vector<cublasLtMatmulAlgo_t> cands, split_candidates(device, shape, m, bias));
    int taken = 0;
    for (const cublasLtMatmulAlgo_t& algo : cands) {
      if (algo_splits(algo) <= 1 || taken == 3) continue;
      bool dup = false;
      for (const auto& x : seen) dup = dup || std::memcmp(&x, &algo, sizeof(algo)) == 0;
      if (dup) continue;
      seen.push_back(algo);
      ++taken;
      TANDEM_TRY(study(fmt::format("heuristic at m {} split {} {}", m, algo_splits(algo), scheme_name(algo_scheme(algo))),
                       describe_algo(algo), algo_splits(algo), on_algo(algo)));
    }
  }
  return out;
}

}  // namespace tandem::cuda
