// The streaming GEMM's probe (gemm_stream_probe_impl.h): the kernel and cuBLASLt's reference algorithm run the
// same noise against the real weight, and the verdict is remembered per shape, layout and reference.
#include "engine/cuda/gemm_stream_probe_impl.h"

#include <random>
#include <string>

#include "engine/cuda/check_impl.h"
#include "engine/cuda/study_support_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {

Result<bool> gemm_stream_same_bits(const Device& device, const KernelModules& modules, GemmAlgos& algos,
                                   const GemmShape& shape, const cublasLtMatmulAlgo_t& reference, const void* w) {
  if (!gemm_stream_supported(shape.k, shape.splits, shape.ab, shape.out, shape.accumulate).ok() ||
      (shape.epilogue != LtEpilogue::kNone)) {
    return false;
  }
  // The verdict holds for this source of the kernel: an edit of gemm_stream.cu (or the headers) probes again.
  std::string key = shape.describe() + " stream " + modules.source_key("gemm_stream.cu");
  key.append(reinterpret_cast<const char*>(&reference), sizeof(reference));  // INVARIANT: plain bytes
  return algos.same_bits_memo(key, [&]() -> Result<bool> {
    const uint32_t rows = kernels::kGemmStreamRows;
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

}  // namespace tandem::cuda
