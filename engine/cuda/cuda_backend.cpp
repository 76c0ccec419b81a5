// The CUDA backend (scorer.md §3): ir::Backend over one device context, the NVRTC kernel modules and the
// shared GEMM rankings. Scorer graphs only: decoder ops are refused at lowering, and there are no States.
#include "engine/cuda/cuda_backend.h"

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/log.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/device_impl.h"
#include "engine/cuda/gemm_impl.h"
#include "engine/cuda/modules_impl.h"
#include "engine/cuda/plan_impl.h"
#include "engine/cuda/row_buffer_impl.h"
#include "engine/cuda/weights_impl.h"

namespace tandem::cuda {
namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// A count from the environment variable `name`: nullopt when unset or empty, an error naming `what` a value
// must be when it is not a decimal number from `min` to `max`.
Result<std::optional<uint32_t>> env_count(const char* name, uint32_t max, std::string_view what, uint32_t min = 0) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::optional<uint32_t>();
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || *v == '-' || n > max || n < min) {
    return Error::make(ErrorKind::kInvalidArgument, "{} is '{}': {}", name, v, what);
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(n));
}

// The environment's switches over the options (cuda_backend.h names them); a malformed value is an error.
Status apply_environment(CudaOptions& o) {
  if (env_is("TANDEM_CUDA_GRAPHS", "0")) o.graphs = false;
  if (env_is("TANDEM_CUDA_SYNC_STEPS", "1")) o.sync_steps = true;
  if (env_is("TANDEM_CUDA_GEMM_PROBE", "0")) o.gemm_probe = false;
  if (env_is("TANDEM_CUDA_GEMM_TIMED", "0")) o.gemm_timed = false;
  if (env_is("TANDEM_CUDA_DECODE_GEMM", "1")) o.decode_gemm = true;
  if (env_is("TANDEM_CUDA_FUSE_QKV", "0")) o.fuse_qkv_prep = false;
  if (env_is("TANDEM_CUDA_SPLIT_CHOICE", "0")) o.split_choice = false;
  if (const char* v = std::getenv("TANDEM_CUDA_STREAM_GEMM"); v != nullptr && *v != '\0') {
    const std::string_view s(v);
    if (s != "0" && s != "1" && s != "untimed") {
      return Error::make(ErrorKind::kInvalidArgument, "TANDEM_CUDA_STREAM_GEMM is '{}': 0, 1 or untimed", s);
    }
    o.stream_gemm = s != "0";
    o.stream_gemm_timed = s != "untimed";
  }
  TANDEM_ASSIGN(const auto stream_rows, env_count("TANDEM_CUDA_STREAM_GEMM_ROWS", kernels::kGemmStreamRows,
                                                  "1..16 rows", 1));
  if (stream_rows) o.stream_gemm_rows = *stream_rows;
  TANDEM_ASSIGN(const auto overlap, env_count("TANDEM_CUDA_OVERLAP", 1, "0 or 1"));
  if (overlap) o.overlap_launches = *overlap == 1;
  if (env_is("TANDEM_CUDA_QGEMM_PACKED", "0")) o.qgemm_packed = false;
  TANDEM_ASSIGN(const auto split_ctas, env_count("TANDEM_CUDA_SPLIT_CTAS", 4096, "0..4096 CTAs"));
  if (split_ctas) o.decoder_split_ctas = *split_ctas;
  TANDEM_ASSIGN(const auto split_narrow, env_count("TANDEM_CUDA_SPLIT_NARROW", 8, "1..8 slices", 1));
  if (split_narrow) o.decoder_split_narrow = *split_narrow;
  TANDEM_ASSIGN(const auto whole_k, env_count("TANDEM_CUDA_QGEMM_WHOLE_K_ROWS", UINT32_MAX, "a row count (0: never)"));
  if (whole_k) o.qgemm_whole_k_rows = *whole_k;
  if (const char* v = std::getenv("TANDEM_CUDA_ATTENTION"); v != nullptr && *v != '\0') {
    auto a = parse_cuda_attention(v);
    if (!a.ok()) return std::move(a).error().context("TANDEM_CUDA_ATTENTION");
    o.attention = *a;
  }
  TANDEM_ASSIGN(const auto tiers, env_count("TANDEM_CUDA_GEMM_TIERS", UINT32_MAX, "0, 1 or a token count"));
  if (tiers) {
    o.gemm_tiers = *tiers != 0;
    if (*tiers > 1) o.gemm_tier_min_tokens = *tiers;
  }
  return {};
}

class CudaBackend final : public ir::Backend {
 public:
  // `options` with the environment applied (make_cuda_backend).
  static Result<std::unique_ptr<ir::Backend>> create(const CudaOptions& options) {
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    b->options_ = options;
    TANDEM_ASSIGN(b->device_, Device::open(options.device));
    const std::string cache = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
    TANDEM_ASSIGN(b->modules_, KernelModules::load(b->device_->info(), cache));
    // The probes' and timing's outcomes from earlier starts on this kind of device (the GEMM choice cache).
    GemmChoices choices = GemmChoices::open(options.gemm_probe ? cache : "", b->device_->info(), cublasLtGetVersion());
    const std::string remembered =
        choices.path().empty() ? "" : fmt::format("; {} GEMM choices from {}", choices.loaded(), choices.path().string());
    b->algos_ = std::make_unique<GemmAlgos>(*b->device_, options.gemm_probe, options.gemm_timed ? kTimedMaxRows : 0,
                                            std::move(choices));
    // Nsight Compute and Nsight Systems load their injection library through this variable (a tool that
    // does not, compute-sanitizer perhaps, needs TANDEM_CUDA_GEMM_TIMED=0 or a warm choice cache).
    const bool profiled = std::getenv("CUDA_INJECTION64_PATH") != nullptr;
    b->algos_->set_profiled(profiled);
    log::info("CUDA backend on {} ({} precision, graphs {}, GEMM probe {}{}, attention {}, GEMM row tiers {}, "
              "decode GEMM {}, stream GEMM {}{}, q/k/v prep {}, launches {}): {}{}",
              b->device_->info().describe(), ir::to_string(options.precision), options.graphs ? "on" : "off",
              options.gemm_probe ? "on" : "off",
              !options.gemm_probe || !options.gemm_timed ? ""
              : profiled                                 ? " (a profiler is attached: remembered timings only)"
                                                         : " (timed)",
              to_string(options.attention),
              options.gemm_tiers ? fmt::format("from {} tokens", options.gemm_tier_min_tokens) : "off",
              options.decode_gemm ? "on" : "off", options.stream_gemm ? "on" : "off",
              !options.stream_gemm ? ""
                                   : fmt::format(" (up to {} rows{})", options.stream_gemm_rows,
                                                 options.stream_gemm_timed ? "" : ", untimed"),
              options.fuse_qkv_prep ? "fused" : "apart",
              options.overlap_launches && b->device_->info().cc_major >= 9 ? "overlapped" : "plain",
              b->modules_->summary(),
              remembered);
    return std::unique_ptr<ir::Backend>(std::move(b));
  }

  ir::Caps caps() const override {
    return ir::Caps{"cuda", device_->info().describe(), options_.graphs, true};
  }

  Status supports(const ir::Graph& graph, const ir::Op& op) const override {
    return supports_op(graph, op, options_.precision);
  }

  Result<std::unique_ptr<ir::Weights>> upload(const WeightSource& source,
                                              std::span<const ir::Graph* const> graphs) override {
    // Packed codes only where lowering runs the tensor-core kernel (sm_80+, lower.cpp's QGemm).
    const bool pack = options_.qgemm_packed && device_->info().cc_major >= 8;
    TANDEM_ASSIGN(auto w, upload_weights(*device_, source, graphs, options_.precision, pack));
    return std::unique_ptr<ir::Weights>(std::move(w));
  }

  Result<std::unique_ptr<ir::Plan>> lower(const ir::Weights& weights, const ir::Graph& graph,
                                          ir::Bucket bucket) override {
    const auto* w = dynamic_cast<const CudaWeights*>(&weights);
    if (w == nullptr || w->device() != device_.get()) {
      return Error::make(ErrorKind::kInvalidArgument, "lowering on CUDA needs weights uploaded by this backend");
    }
    TANDEM_TRY(ir::check_supported(*this, graph));
    PlanOptions po;
    po.graphs = options_.graphs;
    po.sync_steps = options_.sync_steps;
    po.attention = options_.attention;
    po.tier_min_tokens = options_.gemm_tiers ? options_.gemm_tier_min_tokens : 0;
    po.decode_gemm = options_.decode_gemm;
    po.fuse_qkv_prep = options_.fuse_qkv_prep;
    po.split_choice = options_.split_choice;
    po.split_ctas = options_.decoder_split_ctas;
    po.split_narrow = options_.decoder_split_narrow;
    po.stream_gemm = options_.stream_gemm;
    po.stream_gemm_timed = options_.stream_gemm_timed;
    po.stream_gemm_rows = options_.stream_gemm_rows;
    po.overlap_launches = options_.overlap_launches && device_->info().cc_major >= 9;
    po.qgemm_whole_k_rows = options_.qgemm_whole_k_rows;
    const Device::Lowering lowering(*device_);
    const size_t measured = algos_->measurements();
    const auto start = std::chrono::steady_clock::now();
    TANDEM_ASSIGN(auto plan, lower_plan(*device_, *modules_, *algos_, *w, graph, bucket, po, this));
    algos_->save_choices();
    // A first start on a device model probes and times every new GEMM shape: minutes for a large model, which
    // would otherwise pass without a line. Later starts read the choices back and log nothing here.
    if (const size_t ran = algos_->measurements() - measured; ran > 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string& file = algos_->choices().path().string();
      log::info("lowering {} ops at {} tokens / {} sequences took {:.1f} s: {} GEMM probes and timings ran on the "
                "device ({})", graph.ops.size(), bucket.tokens, bucket.seqs, s, ran,
                file.empty() ? "not remembered: no cache directory" : "remembered in " + file);
    }
    return std::unique_ptr<ir::Plan>(std::move(plan));
  }

  Result<std::unique_ptr<ir::State>> create_state(const ir::Graph& graph, uint32_t slots, uint32_t capacity) override {
    if (graph.caches.empty()) {
      return Error::make(ErrorKind::kInvalidArgument, "the graph has no caches, so it needs no state");
    }
    if (slots == 0 || capacity == 0) {
      return Error::make(ErrorKind::kInvalidArgument, "a State needs at least one slot and one position, got {} x {}",
                         slots, capacity);
    }
    TANDEM_ASSIGN(auto state, CudaState::create(*device_, graph, slots, capacity, half_type(options_.precision)));
    return std::unique_ptr<ir::State>(std::move(state));
  }

  Status run(ir::Plan& plan, const ir::Batch& batch, ir::State* state, ir::Outputs& out) override {
    auto* p = dynamic_cast<CudaPlan*>(&plan);
    if (p == nullptr) return Error::make(ErrorKind::kInvalidArgument, "running a plan lowered by another backend");
    const auto* s = dynamic_cast<const CudaState*>(state);
    if (state != nullptr && s == nullptr) {
      return Error::make(ErrorKind::kInvalidArgument, "running with a State of another backend");
    }
    TANDEM_TRY(p->run(batch, s, out));
    if (profiling_) TANDEM_TRY(profile_replay(*p, batch));
    return {};
  }

  void set_profiling(bool on) {
    profiling_ = on;
    if (on) {
      profiled_.clear();
      profiled_at_.clear();
    }
  }
  const std::vector<ProfiledStep>& profiled() const { return profiled_; }

  Device& device() const { return *device_; }

  CudaTransfers transfers() const {
    const D2hCount& c = device_->d2h();
    return CudaTransfers{c.bytes, c.copies, device_->last_run_d2h(), c.lowering_bytes};
  }

  Status fetch(const ir::DeviceRows& rows, uint32_t first, uint32_t count, ir::Tensor2& out) override {
    if (rows.owner != this) return Error(ErrorKind::kInvalidArgument, "fetching rows another backend holds");
    if (uint64_t{first} + count > rows.rows) {
      return Error::make(ErrorKind::kInvalidArgument, "fetching rows {}..{} of {} device rows", first, first + count,
                         rows.rows);
    }
    TANDEM_TRY(device_->activate());
    const size_t elem = ir::storage_bytes(rows.storage);
    std::vector<unsigned char> raw(size_t{count} * rows.width * elem);
    // INVARIANT: `rows` was made by a run of this backend (owner checked) and stays valid until the plan
    // runs again, which cannot happen before this synchronous copy returns (one stream, this thread).
    const auto* src = static_cast<const unsigned char*>(rows.data) + size_t{first} * rows.stride * elem;
    if (count > 0) {
      TANDEM_CUDA_CHECK(cudaMemcpy2DAsync(raw.data(), rows.width * elem, src, size_t{rows.stride} * elem,
                                          rows.width * elem, count, cudaMemcpyDeviceToHost, device_->stream()));
      device_->count_d2h(raw.size());
      TANDEM_TRY(device_->synchronize());
    }
    out.rows = count;
    out.width = rows.width;
    out.device = {};
    out.data.clear();
    out.ids.clear();
    const size_t n = size_t{count} * rows.width;
    switch (rows.storage) {
      case ir::Storage::kU32:
        out.ids.resize(n);
        std::memcpy(out.ids.data(), raw.data(), n * 4);
        break;
      case ir::Storage::kF32:
        out.data.resize(n);
        std::memcpy(out.data.data(), raw.data(), n * 4);
        break;
      case ir::Storage::kF16:
        out.data.resize(n);
        convert_to_f32(DType::kF16, raw.data(), n, out.data.data());
        break;
      case ir::Storage::kBF16:
        out.data.resize(n);
        convert_to_f32(DType::kBF16, raw.data(), n, out.data.data());
        break;
    }
    return {};
  }

 private:
  CudaBackend() = default;
  CudaOptions options_;
  // Declared in teardown order reversed: the device outlives the modules and rankings built on it.
  std::unique_ptr<Device> device_;
  std::unique_ptr<KernelModules> modules_;
  std::unique_ptr<GemmAlgos> algos_;
  bool profiling_ = false;  // set_step_profiling
  std::vector<ProfiledStep> profiled_;
  std::unordered_map<std::string, size_t> profiled_at_;  // label -> index in profiled_

  Status profile_replay(CudaPlan& plan, const ir::Batch& batch) {
    const size_t tier = plan.tier_for(batch.tokens());
    auto steps = plan.replay_timed(tier, plan.captured());
    if (!steps.ok() && plan.captured()) steps = plan.replay_timed(tier, false);
    if (!steps.ok()) return std::move(steps).error().context("profiling a plan's steps");
    for (const StepTime& t : *steps) {
      auto [it, added] = profiled_at_.try_emplace(t.label, profiled_.size());
      if (added) profiled_.push_back({t.label, step_category(t.label), 0.0, 0});
      ProfiledStep& p = profiled_[it->second];
      p.ms += t.ms;
      ++p.launches;
    }
    return {};
  }
};

class CudaStreamMarks final : public StreamMarks {
 public:
  explicit CudaStreamMarks(Device& device) : device_(device) {}
  ~CudaStreamMarks() override {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }

  Status mark() override {
    TANDEM_TRY(device_.activate());
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      TANDEM_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    // INVARIANT: the backend's one stream, so the event lands between the steps the caller launched.
    TANDEM_CUDA_CHECK(cudaEventRecord(events_[used_], device_.stream()));
    ++used_;
    return {};
  }

  Result<std::vector<double>> read_ms() override {
    std::vector<double> out;
    if (used_ == 0) return out;
    TANDEM_TRY(device_.activate());
    TANDEM_CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
    for (size_t i = 1; i < used_; ++i) {
      float ms = 0.0f;
      TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[i]));
      out.push_back(ms);
    }
    used_ = 0;
    return out;
  }

 private:
  Device& device_;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

}  // namespace

const char* to_string(CudaAttention a) {
  switch (a) {
    case CudaAttention::kTc2: return "tc2";
    case CudaAttention::kTc2Split: return "tc2split";
    case CudaAttention::kTc: return "tc";
    case CudaAttention::kSimt: return "simt";
  }
  return "?";
}

Result<CudaAttention> parse_cuda_attention(std::string_view text) {
  std::string names;
  for (CudaAttention a : kCudaAttentions) {
    if (text == to_string(a)) return a;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(a));
  }
  return Error::make(ErrorKind::kInvalidArgument, "attention kernel '{}' is none of {}", text, names);
}

// The CUDA backend behind `backend` (const as it is), or an error saying what needed one: "<what>, not '<name>'".
template <class Base>
auto as_cuda(Base& backend, const char* what)
    -> Result<std::conditional_t<std::is_const_v<Base>, const CudaBackend*, CudaBackend*>> {
  auto* b = dynamic_cast<std::conditional_t<std::is_const_v<Base>, const CudaBackend*, CudaBackend*>>(&backend);
  if (b == nullptr) return Error::make(ErrorKind::kInvalidArgument, "{}, not '{}'", what, backend.caps().name);
  return b;
}

Result<CudaTransfers> cuda_transfers(const ir::Backend& backend) {
  TANDEM_ASSIGN(const CudaBackend* b, as_cuda(backend, "device-to-host counts are kept by the CUDA backend"));
  return b->transfers();
}

Status set_step_profiling(ir::Backend& backend, bool on) {
  TANDEM_ASSIGN(CudaBackend* b, as_cuda(backend, "step profiles time a CUDA backend's plans"));
  b->set_profiling(on);
  return {};
}

Result<std::vector<ProfiledStep>> profiled_steps(const ir::Backend& backend) {
  TANDEM_ASSIGN(const CudaBackend* b, as_cuda(backend, "step profiles time a CUDA backend's plans"));
  return b->profiled();
}

Result<std::unique_ptr<StreamMarks>> make_stream_marks(ir::Backend& backend) {
  TANDEM_ASSIGN(CudaBackend* b, as_cuda(backend, "stream marks time a CUDA backend's stream"));
  return std::unique_ptr<StreamMarks>(new CudaStreamMarks(b->device()));
}

Result<std::unique_ptr<ir::RowBuffer>> make_cuda_row_buffer(ir::Backend& backend, uint32_t rows, uint32_t width,
                                                            ir::Storage storage) {
  TANDEM_ASSIGN(CudaBackend* b, as_cuda(backend, "CUDA row buffers are kept for a CUDA backend"));
  return make_row_buffer(b->device(), backend, rows, width, storage);
}

Result<std::unique_ptr<ir::Backend>> make_cuda_backend(const CudaOptions& given) {
  CudaOptions options = given;
  TANDEM_TRY(apply_environment(options));  // a malformed switch is refused on any machine, before the device
  if (device_count() == 0) {
    return Error::make(ErrorKind::kUnavailable, "no CUDA device: cudaGetDeviceCount found none (no driver or GPU)");
  }
  auto b = CudaBackend::create(options);
  if (!b.ok()) return std::move(b).error().context(fmt::format("CUDA backend on device {}", options.device));
  return b;
}

}  // namespace tandem::cuda
