// cuBLASLt GEMM setup: descriptors, the per-shape ranking at kRankedRows rows, the per-bucket choice.
#include "engine/cuda/gemm_impl.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "engine/core/dtype.h"
#include "engine/core/log.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {
namespace {

cudaDataType_t lt_type(Dt t) {
  switch (t) {
    case Dt::kF32:
    case Dt::kU32: return CUDA_R_32F;  // no GEMM takes ids (lowering checks)
    case Dt::kF16: return CUDA_R_16F;
    case Dt::kBF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

bool has_bias(LtEpilogue e) { return e == LtEpilogue::kBias || e == LtEpilogue::kReluBias; }

cublasLtEpilogue_t lt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case LtEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

template <class T>
Status set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  TANDEM_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
  return {};
}

template <class T>
Status set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  TANDEM_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)));
  return {};
}

}  // namespace

// Row-major out[m, n] = a[m, k] · w[n, k]ᵀ is column-major outᵀ[n, m] = op(W)[n, k] · aᵀ[k, m], with W
// the weight read as a column-major k×n matrix (ld k) and transposed.
Status make_gemm_descs(const GemmShape& s, uint32_t m, const float* bias, GemmDescs& d) {
  TANDEM_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&d.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  TANDEM_TRY(set_desc(d.desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T)));
  TANDEM_TRY(set_desc(d.desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N)));
  TANDEM_TRY(set_desc(d.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(lt_epilogue(s.epilogue))));
  if (has_bias(s.epilogue)) {
    TANDEM_TRY(set_desc(d.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias)));
    TANDEM_TRY(set_desc(d.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_32F)));
  }
  TANDEM_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&d.a, lt_type(s.ab), s.k, s.n, s.k));
  TANDEM_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&d.b, lt_type(s.ab), s.k, m, s.k));
  TANDEM_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&d.c, lt_type(s.out), s.n, m, s.n));
  return {};
}

namespace {

// An algorithm's K split and reduction; nullopt when its configuration cannot be read (not trusted then).
std::optional<std::pair<int32_t, uint32_t>> split_of(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme),
                                           &written) != CUBLAS_STATUS_SUCCESS) {
    return std::nullopt;
  }
  return std::pair{std::max(splits, int32_t{1}), scheme};
}

// Whether an algorithm splits K as the shape says: a shape of one slice takes no split and no reduction (a
// split would sum in an order of its own); a split shape takes exactly its slices, reduced out of place in
// the compute type (FP32: no in-place atomics, no rounding of the partials to the output type).
bool splits_as(const cublasLtMatmulAlgo_t& algo, uint32_t slices) {
  const auto split = split_of(algo);
  if (!split) return false;
  if (slices <= 1) return split->first <= 1 && split->second == CUBLASLT_REDUCTION_SCHEME_NONE;
  return static_cast<uint32_t>(split->first) == slices && split->second == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
}

// A one-pass algorithm made to split K in `slices` and reduce in the compute type; nullopt when cuBLASLt
// refuses the configuration (the emulator always does).
std::optional<cublasLtMatmulAlgo_t> with_split(cublasLtMatmulAlgo_t algo, uint32_t slices) {
  const auto split = split_of(algo);
  if (!split || split->first > 1) return std::nullopt;
  const int32_t n = static_cast<int32_t>(slices);
  const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &n, sizeof(n)) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme)) !=
          CUBLAS_STATUS_SUCCESS) {
    return std::nullopt;
  }
  return algo;
}

// Decoder K split (decoder_gemm_splits): outputs of 16 to 40 tiles of 128 columns over a K of 4,096 or more.
constexpr uint32_t kSplitMinTiles = 16, kSplitMaxTiles = 40, kSplitMinK = 4096;
// With a target CTA count (decoder_gemm_splits' tuning aid).
constexpr uint32_t kTunedMaxTiles = 64, kTunedMaxSplits = 8, kTunedMinSliceK = 1024;

// Timed runs per candidate when a bucket picks the fastest bit-identical algorithm.
constexpr int kTimedRuns = 7;

struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p != nullptr) (void)cublasLtMatmulPreferenceDestroy(p);
  }
};

}  // namespace

std::string GemmShape::describe() const {
  const char* epi = "";
  switch (epilogue) {
    case LtEpilogue::kNone: epi = ""; break;
    case LtEpilogue::kBias: epi = " bias"; break;
    case LtEpilogue::kRelu: epi = " relu"; break;
    case LtEpilogue::kReluBias: epi = " relu+bias"; break;
  }
  return fmt::format("k {} n {} {}->{} {}{}{}", k, n, dt_name(ab), dt_name(out), accumulate ? "add" : "set", epi,
                     splits > 1 ? fmt::format(" split {}", splits) : std::string());
}

uint32_t decoder_gemm_splits(uint32_t k, uint32_t n, uint32_t target_ctas, uint32_t narrow) {
  const uint32_t tiles = (n + 127) / 128;
  if (tiles < kSplitMinTiles && k >= kSplitMinK) {
    return std::max(1u, std::min({narrow, kTunedMaxSplits, k / kTunedMinSliceK}));
  }
  if (target_ctas == 0) return k >= kSplitMinK && tiles >= kSplitMinTiles && tiles <= kSplitMaxTiles ? 2 : 1;
  if (k < kSplitMinK || tiles < kSplitMinTiles || tiles > kTunedMaxTiles) return 1;
  uint32_t best = 1;
  for (uint32_t s = 2; s <= kTunedMaxSplits && k / s >= kTunedMinSliceK; ++s) {
    const auto gap = [&](uint32_t c) { return c * tiles > target_ctas ? c * tiles - target_ctas : target_ctas - c * tiles; };
    if (gap(s) < gap(best)) best = s;
  }
  return best;
}

Result<const std::vector<cublasLtMatmulAlgo_t>*> GemmAlgos::ranked(const GemmShape& shape, uint32_t rows,
                                                                   const float* bias, int count) {
  const auto key = std::make_tuple(shape, rows, count);
  if (auto it = ranked_.find(key); it != ranked_.end()) return &it->second;
  GemmDescs d;
  TANDEM_TRY(make_gemm_descs(shape, rows, bias, d));
  std::vector<cublasLtMatmulAlgo_t> out;
  // First ask for single-pass reductions only (and, for a split shape, out-of-place ones in the compute
  // type); if that filter leaves nothing, ask for everything and keep the ones that split as the shape says
  // (the filter's reading of a zero mask is not documented). A split shape also takes the one-pass
  // candidates made to split, after cuBLASLt's own: at kRankedRows rows it rarely proposes a split.
  const uint32_t mask = shape.splits > 1 ? CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                         : CUBLASLT_REDUCTION_SCHEME_NONE;
  for (int attempt = 0; attempt < 2 && out.empty(); ++attempt) {
    Preference pref;
    TANDEM_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    TANDEM_TRY(set_pref(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(device_.workspace_bytes())));
    if (attempt == 0 && !set_pref(pref.p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, mask).ok()) {
      continue;  // a mask cuBLASLt refuses: the unfiltered query below, filtered by splits_as
    }
    TANDEM_TRY(set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t{256}));
    TANDEM_TRY(set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, kArenaAlignBytes));
    TANDEM_TRY(set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, kArenaAlignBytes));
    TANDEM_TRY(set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, kArenaAlignBytes));
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(1, count)));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(device_.lt(), d.desc, d.a, d.b, d.c, d.c, pref.p,
                                                             static_cast<int>(results.size()), results.data(), &found);
    // An epilogue cuBLASLt does not take with these types (e.g. an f32 bias on an f16 output) comes back
    // as NOT_SUPPORTED or, on cuBLASLt 13, INVALID_VALUE: no ranking, so the caller runs it unfused.
    if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
        (st == CUBLAS_STATUS_INVALID_VALUE && shape.epilogue != LtEpilogue::kNone)) {
      continue;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      return cublaslt_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__).context(shape.describe());
    }
    std::vector<cublasLtMatmulAlgo_t> made;  // one-pass candidates made to split
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      if (splits_as(results[i].algo, shape.splits)) {
        out.push_back(results[i].algo);
      } else if (shape.splits > 1 && splits_as(results[i].algo, 1)) {
        if (auto split = with_split(results[i].algo, shape.splits)) made.push_back(*split);
      }
    }
    for (const cublasLtMatmulAlgo_t& algo : made) {
      bool listed = false;
      for (const cublasLtMatmulAlgo_t& x : out) listed = listed || std::memcmp(&x, &algo, sizeof(algo)) == 0;
      if (!listed) out.push_back(algo);
    }
  }
  return &ranked_.emplace(key, std::move(out)).first->second;
}

Result<bool> GemmAlgos::same_bits(const GemmShape& shape, const cublasLtMatmulAlgo_t& reference,
                                  const cublasLtMatmulAlgo_t& candidate, const void* w, const float* bias) {
  std::string key = shape.describe();
  key.append(reinterpret_cast<const char*>(&reference), sizeof(reference));  // INVARIANT: plain bytes
  key.append(reinterpret_cast<const char*>(&candidate), sizeof(candidate));
  if (const std::optional<bool> known = choices_.same_bits(key)) return *known;
  const uint32_t rows = kRankedRows;
  GemmDescs d;
  TANDEM_TRY(make_gemm_descs(shape, rows, bias, d));
  cublasLtMatmulHeuristicResult_t check{};
  for (const cublasLtMatmulAlgo_t* algo : {&reference, &candidate}) {
    if (cublasLtMatmulAlgoCheck(device_.lt(), d.desc, d.a, d.b, d.c, d.c, algo, &check) != CUBLAS_STATUS_SUCCESS) {
      choices_.set_same_bits(key, false);
      return false;
    }
  }
  ++measurements_;
  // Fixed noise for the input and (accumulating shapes) the output's prior contents.
  const size_t a_count = size_t{rows} * shape.k, c_count = size_t{rows} * shape.n;
  std::mt19937 rng(0x5eed);
  const std::vector<unsigned char> a_host = random_host_bytes(a_count, shape.ab, 1.0f, rng);
  const std::vector<unsigned char> c_host = random_host_bytes(c_count, shape.out, 1.0f, rng);
  TANDEM_ASSIGN(DeviceBuffer a, DeviceBuffer::make(a_host.size(), "a GEMM probe"));
  TANDEM_ASSIGN(DeviceBuffer out1, DeviceBuffer::make(c_host.size(), "a GEMM probe"));
  TANDEM_ASSIGN(DeviceBuffer out2, DeviceBuffer::make(c_host.size(), "a GEMM probe"));
  const cudaStream_t s = device_.stream();
  // INVARIANT: each probe buffer holds exactly the host bytes copied into it, sized for `rows` rows of
  // the shape; everything runs in order on the backend's stream and is drained before the host reads.
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(a.data(), a_host.data(), a_host.size(), cudaMemcpyHostToDevice, s));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(out1.data(), c_host.data(), c_host.size(), cudaMemcpyHostToDevice, s));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(out2.data(), c_host.data(), c_host.size(), cudaMemcpyHostToDevice, s));
  const float alpha = 1.0f, beta = shape.accumulate ? 1.0f : 0.0f;
  TANDEM_CUBLASLT_CHECK(cublasLtMatmul(device_.lt(), d.desc, &alpha, w, d.a, a.data(), d.b, &beta, out1.data(), d.c,
                                       out1.data(), d.c, &reference, device_.workspace(), device_.workspace_bytes(), s));
  TANDEM_CUBLASLT_CHECK(cublasLtMatmul(device_.lt(), d.desc, &alpha, w, d.a, a.data(), d.b, &beta, out2.data(), d.c,
                                       out2.data(), d.c, &candidate, device_.workspace(), device_.workspace_bytes(), s));
  std::vector<unsigned char> r1(c_host.size()), r2(c_host.size());
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(r1.data(), out1.data(), r1.size(), cudaMemcpyDeviceToHost, s));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(r2.data(), out2.data(), r2.size(), cudaMemcpyDeviceToHost, s));
  device_.count_d2h(r1.size() + r2.size(), 2);
  TANDEM_TRY(device_.synchronize());
  choices_.set_same_bits(key, r1 == r2);
  return r1 == r2;
}

Result<bool> GemmAlgos::verdict_memo(const std::string& key, const std::function<Result<bool>()>& probe) {
  if (const std::optional<bool> known = choices_.same_bits(key)) return *known;
  ++measurements_;
  TANDEM_ASSIGN(const bool same, probe());
  choices_.set_same_bits(key, same);
  return same;
}

Result<size_t> GemmAlgos::fastest(const GemmShape& shape, uint32_t m,
                                  const std::vector<cublasLtMatmulAlgo_t>& candidates, bool bias) {
  const std::string key = fmt::format("{} m {}", shape.describe(), m);
  auto bytes = [](const cublasLtMatmulAlgo_t& a) {
    return std::string(reinterpret_cast<const char*>(&a), sizeof(a));  // INVARIANT: plain bytes
  };
  if (const std::optional<std::string> known = choices_.fastest(key)) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (bytes(candidates[i]) == *known) return i;
    }
  }
  // candidates[0] is the reference, [1] the first bit-identical one cuBLASLt ranks (what untimed runs).
  if (profiled_) return candidates.size() > 1 ? 1 : 0;
  ++measurements_;
  // Random operands of the real sizes: timing on zeros can flatter a kernel (METHOD.md).
  std::mt19937 rng(0x7173);
  TANDEM_ASSIGN(DeviceBuffer w, random_device_buffer(device_, size_t{shape.n} * shape.k, shape.ab, 0.03f, rng));
  TANDEM_ASSIGN(DeviceBuffer a, random_device_buffer(device_, size_t{m} * shape.k, shape.ab, 1.0f, rng));
  TANDEM_ASSIGN(DeviceBuffer c, random_device_buffer(device_, size_t{m} * shape.n, shape.out, 1.0f, rng));
  TANDEM_ASSIGN(DeviceBuffer b, random_device_buffer(device_, shape.n, Dt::kF32, 0.1f, rng));
  const GemmOperands ops{w.data(), a.data(), c.data(), bias ? b.as<const float>() : nullptr};
  size_t best = 0;
  double best_us = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    TANDEM_ASSIGN(const Gemm g, Gemm::with_algo(device_, shape, m, ops, candidates[i]));
    TANDEM_ASSIGN(const double us, median_us(device_, [&] { return g.run(device_); }, kTimedRuns, 2));
    if (i == 0 || us < best_us) {
      best = i;
      best_us = us;
    }
  }
  choices_.set_fastest(key, bytes(candidates[best]));
  return best;
}

Result<Gemm> Gemm::make(const Device& device, GemmAlgos& algos, const GemmShape& wanted, uint32_t m,
                        const GemmOperands& ops) {
  GemmShape shape = wanted;
  TANDEM_ASSIGN(const std::vector<cublasLtMatmulAlgo_t>* ranking, algos.ranked(shape, kRankedRows, ops.bias));
  if (ranking->empty() && shape.splits > 1) {
    // No candidate splits K so (cuBLASLt refuses, or the emulator): the shape runs in one pass at every m,
    // as this depends on the shape alone.
    if (algos.note_unsplit(shape)) log::info("cuBLASLt: no K split of {}; it runs in one pass", shape.describe());
    shape.splits = 1;
    TANDEM_ASSIGN(ranking, algos.ranked(shape, kRankedRows, ops.bias));
  }
  GemmDescs descs;
  TANDEM_TRY(make_gemm_descs(shape, m, ops.bias, descs));
  Gemm g(shape, m, ops, std::move(descs));
  const GemmDescs& d = g.descs_;
  auto takes = [&](const cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulHeuristicResult_t check{};
    return cublasLtMatmulAlgoCheck(device.lt(), d.desc, d.a, d.b, d.c, d.c, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
           check.workspaceSize <= device.workspace_bytes();
  };
  for (size_t i = 0; i < ranking->size() && g.rank_ < 0; ++i) {
    if (!takes((*ranking)[i])) continue;
    g.algo_ = (*ranking)[i];
    g.rank_ = static_cast<int>(i);
  }
  if (g.rank_ < 0) {
    return Error::make(ErrorKind::kUnsupported,
                       "no split-K-free cuBLASLt algorithm ranked for {} takes {} rows ({} ranked)", shape.describe(),
                       m, ranking->size());
  }
  if (g.rank_ > 0) {
    log::info("cuBLASLt: {} at {} rows takes rank {} of the {}-row ranking", shape.describe(), m, g.rank_, kRankedRows);
  }
  if (algos.probe() && m != kRankedRows) {
    // Candidates cuBLASLt ranks for this m that compute the reference's bits (the probe), best first.
    // Timed buckets keep them all and run the fastest; the others stop at the first, or at the reference.
    TANDEM_ASSIGN(const std::vector<cublasLtMatmulAlgo_t>* mine,
                  algos.ranked(shape, m, ops.bias, kSearchCandidates));
    const bool timed = algos.timed(m);
    std::vector<cublasLtMatmulAlgo_t> same{g.algo_};
    std::vector<int> place{-1};
    for (size_t j = 0; j < mine->size(); ++j) {
      const cublasLtMatmulAlgo_t& cand = (*mine)[j];
      if (std::memcmp(&cand, &g.algo_, sizeof(cand)) == 0) {
        if (timed) continue;
        break;
      }
      if (!takes(cand)) continue;
      TANDEM_ASSIGN(const bool bits, algos.same_bits(shape, g.algo_, cand, ops.w, ops.bias));
      if (!bits) continue;
      same.push_back(cand);
      place.push_back(static_cast<int>(j));
      if (!timed) break;
    }
    size_t pick = same.size() - 1;  // untimed: the first bit-identical one, else the reference
    if (timed && same.size() > 1) {
      TANDEM_ASSIGN(pick, algos.fastest(shape, m, same, ops.bias != nullptr));
    }
    g.algo_ = same[pick];
    g.faster_ = place[pick];
  }
  g.reference_ = (*ranking)[static_cast<size_t>(g.rank_)];
  return g;
}

Result<Gemm> Gemm::with_algo(const Device& device, const GemmShape& shape, uint32_t m, const GemmOperands& ops,
                             const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes) {
  GemmDescs d;
  TANDEM_TRY(make_gemm_descs(shape, m, ops.bias, d));
  cublasLtMatmulHeuristicResult_t check{};
  TANDEM_CUBLASLT_CHECK(cublasLtMatmulAlgoCheck(device.lt(), d.desc, d.a, d.b, d.c, d.c, &algo, &check));
  if (check.workspaceSize > (workspace_bytes != 0 ? workspace_bytes : device.workspace_bytes())) {
    return Error::make(ErrorKind::kUnsupported, "{}: the algorithm needs {} B of workspace", shape.describe(),
                       check.workspaceSize);
  }
  Gemm g(shape, m, ops, std::move(d));
  g.algo_ = g.reference_ = algo;
  return g;
}

GemmDescs::GemmDescs(GemmDescs&& o) noexcept
    : desc(std::exchange(o.desc, nullptr)),
      a(std::exchange(o.a, nullptr)),
      b(std::exchange(o.b, nullptr)),
      c(std::exchange(o.c, nullptr)) {}

GemmDescs& GemmDescs::operator=(GemmDescs&& o) noexcept {
  if (this != &o) {
    release();
    desc = std::exchange(o.desc, nullptr);
    a = std::exchange(o.a, nullptr);
    b = std::exchange(o.b, nullptr);
    c = std::exchange(o.c, nullptr);
  }
  return *this;
}

GemmDescs::~GemmDescs() { release(); }

void GemmDescs::release() {
  if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
  if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
  if (c != nullptr) (void)cublasLtMatrixLayoutDestroy(c);
  desc = nullptr;
  a = b = c = nullptr;
}

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, size_t bytes) -> std::string {
    uint32_t v = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, bytes, &written) != CUBLAS_STATUS_SUCCESS) return "?";
    return std::to_string(bytes == 2 ? (v & 0xffffu) : v);
  };
  // Names of the cublasLtMatmulTile_t values up to 35 (cublasLt.h): the rest print as numbers.
  static const char* const kTiles[] = {"?",       "8x8",     "8x16",    "16x8",    "8x32",    "16x16",   "32x8",
                                       "8x64",    "16x32",   "32x16",   "64x8",    "32x32",   "32x64",   "64x32",
                                       "32x128",  "64x64",   "128x32",  "64x128",  "128x64",  "64x256",  "128x128",
                                       "256x64",  "64x512",  "128x256", "256x128", "512x64",  "64x96",   "96x64",
                                       "96x128",  "128x160", "160x128", "192x128", "128x192", "128x96",  "32x256",
                                       "256x32"};
  std::string tile = get(CUBLASLT_ALGO_CONFIG_TILE_ID, 4);
  if (tile != "?" && std::stoul(tile) < std::size(kTiles)) tile = kTiles[std::stoul(tile)];
  return fmt::format("id {} tile {} stages {} swizzle {} option {} cluster {} split {}", get(CUBLASLT_ALGO_CONFIG_ID, 4),
                     tile, get(CUBLASLT_ALGO_CONFIG_STAGES_ID, 4), get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 4),
                     get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, 4), get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, 2),
                     get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 4));
}

Status Gemm::run(const Device& device) const { return run(device, device.workspace(), device.workspace_bytes()); }

Status Gemm::run(const Device& device, void* workspace, size_t workspace_bytes) const {
  const float alpha = 1.0f, beta = shape_.accumulate ? 1.0f : 0.0f;
  // INVARIANT: lowering sized every operand for m_ rows of this shape (w [n,k], a [m,k], out [m,n]) and
  // the workspace is used by nothing else: every GEMM of the backend runs in order on its one stream.
  const GemmDescs& d = descs_;
  TANDEM_CUBLASLT_CHECK(cublasLtMatmul(device.lt(), d.desc, &alpha, ops_.w, d.a, ops_.a, d.b, &beta, ops_.out, d.c,
                                       ops_.out, d.c, &algo_, workspace, workspace_bytes, device.stream()));
  return {};
}

}  // namespace tandem::cuda
