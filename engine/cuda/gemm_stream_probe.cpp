// The streaming GEMM's probes (gemm_stream_probe_impl.h): the kernel and cuBLASLt's reference algorithm run the
// same noise against the real weight, and the verdict is remembered per shape, layout and reference; where the
// bits agree, both are timed at a bucket's rows.
#include "engine/cuda/gemm_stream_probe_impl.h"

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/core/log.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/study_support_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {

Result<bool> gemm_stream_same_bits(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                   const GemmShape& shape, const cublasLtMatmulAlgo_t& reference, const void* w) {
  const uint32_t rows = gemm_stream_max_rows(shape.k, shape.splits);
  if (!gemm_stream_supported(shape.k, shape.splits, shape.ab, shape.out, shape.accumulate).ok() ||
      (shape.epilogue != LtEpilogue::kNone) || rows == 0) {
    return false;
  }
  // The verdict holds for this source of the kernel: an edit of gemm_stream.cu (or the headers) probes again.
  std::string key = shape.describe() + " stream " + modules.source_key("gemm_stream.cu");
  key.append(reinterpret_cast<const char*>(&reference), sizeof(reference));  // INVARIANT: plain bytes
  return algos.verdict_memo(key, [&]() -> Result<bool> {
    // As many rows as its shared memory stages (16 where it can): a row's bits do not depend on the others.
    // Fixed noise for the input and (accumulating shapes) the output's prior contents, as same_bits uses.
    std::mt19937 rng(0x5eed);
    const std::vector<unsigned char> a_host = random_host_bytes(size_t{rows} * shape.k, shape.ab, 1.0f, rng);
    const std::vector<unsigned char> c_host = random_host_bytes(size_t{rows} * shape.n, shape.out, 1.0f, rng);
    TANDEM_ASSIGN(DeviceBuffer a, upload_bytes(device, a_host.data(), a_host.size(), "a stream GEMM probe"));
    TANDEM_ASSIGN(DeviceBuffer out1, upload_bytes(device, c_host.data(), c_host.size(), "a stream GEMM probe"));
    TANDEM_ASSIGN(DeviceBuffer out2, upload_bytes(device, c_host.data(), c_host.size(), "a stream GEMM probe"));
    TANDEM_ASSIGN(const Gemm g, Gemm::with_algo(device, shape, rows, GemmOperands{w, a.data(), out1.data(), nullptr},
                                                reference));
    TANDEM_TRY(g.run(device));
    TANDEM_ASSIGN(StudyBatch sb, one_sequence(device, rows));
    TANDEM_ASSIGN(const KernelStep step,
                  gemm_stream_step(sb.ctx, token_loc(a, shape.k, shape.ab, "probe input"),
                                   token_loc(out2, shape.n, shape.out, "probe output"), w, shape.splits,
                                   shape.accumulate));
    TANDEM_TRY(launch(modules, step, device.stream()));
    TANDEM_ASSIGN(const std::vector<unsigned char> r1, download_bytes(device, out1, c_host.size()));
    TANDEM_ASSIGN(const std::vector<unsigned char> r2, download_bytes(device, out2, c_host.size()));
    return r1 == r2;
  });
}

Result<bool> gemm_stream_faster(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                const GemmShape& shape, uint32_t rows, const cublasLtMatmulAlgo_t& algo,
                                const void* w) {
  std::string key =
      fmt::format("{} m {} stream faster {}", shape.describe(), rows, modules.source_key("gemm_stream.cu"));
  key.append(reinterpret_cast<const char*>(&algo), sizeof(algo));  // INVARIANT: plain bytes
  if (algos.profiled()) return algos.choices().same_bits(key).value_or(true);
  return algos.verdict_memo(key, [&]() -> Result<bool> {
    constexpr int kRuns = 15;
    const size_t w_bytes = size_t{shape.n} * shape.k * dt_size(shape.ab);
    // The real weight first, then copies of it (their bits do not matter, their bytes do). A device too full for
    // every copy times on fewer (the L2 then flatters both alike) rather than failing a plan.
    TANDEM_ASSIGN(const std::vector<DeviceBuffer> extra,
                  device_copies(device, w, w_bytes, rotation_copies(w_bytes) - 1, true));
    std::vector<const void*> ws{w};
    for (const DeviceBuffer& b : extra) ws.push_back(b.data());
    std::mt19937 rng(0x7173);  // random operands: timing on zeros can flatter a kernel (METHOD.md)
    TANDEM_ASSIGN(DeviceBuffer a, random_device_buffer(device, size_t{rows} * shape.k, shape.ab, 1.0f, rng));
    TANDEM_ASSIGN(DeviceBuffer out, random_device_buffer(device, size_t{rows} * shape.n, shape.out, 1.0f, rng));
    TANDEM_ASSIGN(StudyBatch sb, one_sequence(device, rows));
    std::vector<Gemm> lt;
    std::vector<KernelStep> stream;
    for (const void* wc : ws) {
      TANDEM_ASSIGN(Gemm g,
                    Gemm::with_algo(device, shape, rows, GemmOperands{wc, a.data(), out.data(), nullptr}, algo));
      lt.push_back(std::move(g));
      TANDEM_ASSIGN(KernelStep step,
                    gemm_stream_step(sb.ctx, token_loc(a, shape.k, shape.ab, "timed input"),
                                     token_loc(out, shape.n, shape.out, "timed output"), wc, shape.splits,
                                     shape.accumulate));
      stream.push_back(std::move(step));
    }
    size_t next = 0;
    TANDEM_ASSIGN(const double lt_us, median_us(device, [&] { return lt[next++ % lt.size()].run(device); }, kRuns));
    next = 0;
    TANDEM_ASSIGN(const double stream_us, median_us(device, [&] {
                    return launch(modules, stream[next++ % stream.size()], device.stream());
                  }, kRuns));
    log::info("{} at {} rows: cuBLASLt {:.1f} us, the streaming GEMM {:.1f} us (weights from HBM)", shape.describe(),
              rows, lt_us, stream_us);
    return stream_us < lt_us;
  });
}

}  // namespace tandem::cuda
