// The quantized GEMM's kernel study (study_impl.h): both qgemm kernels and the dense BF16 decode GEMM on one
// shape, random operands on the device, launches timed one by one between events (timing_impl.h), medians.
// Each launch reads the next of several copies of its weight, more bytes than the L2 holds together, as a
// drafter's round reads each matrix once (study_split.cpp does the same for the target's GEMMs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/qgemm_layout.h"
#include "engine/cuda/study_impl.h"
#include "engine/cuda/study_support_impl.h"
#include "engine/cuda/steps_impl.h"
#include "engine/cuda/timing_impl.h"

namespace tandem::cuda {
namespace {

constexpr uint32_t kGroup = 64;  // a load-time quantization's group (dflash_quant.h kLoadGroupSize)

Result<std::vector<float>> download_bf16(const Device& device, const DeviceBuffer& b, size_t n) {
  TANDEM_ASSIGN(const std::vector<unsigned char> bytes, download_bytes(device, b, n * 2));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    out[i] = bf16_to_float(bits);
  }
  return out;
}

Loc bf16_loc(const DeviceBuffer& b, uint32_t width, const char* name) { return token_loc(b, width, Dt::kBF16, name); }

}  // namespace

Result<std::vector<QGemmStudy>> study_qgemm(const Device& device, const KernelModules& modules, uint32_t k,
                                            uint32_t cols, uint32_t rows, int reps) {
  if (k == 0 || k % kGroup != 0 || cols == 0 || rows == 0) {
    return Error::make(ErrorKind::kInvalidArgument, "qgemm study: k {} (a multiple of {}), {} columns, {} rows", k,
                       kGroup, cols, rows);
  }
  TANDEM_TRY(device.activate());
  std::mt19937 rng(29);
  TANDEM_ASSIGN(const StudyBatch sb, one_sequence(device, rows));
  const StepContext& ctx = sb.ctx;

  TANDEM_ASSIGN(DeviceBuffer x, random_device_buffer(device, size_t{rows} * k, Dt::kBF16, 1.0f, rng));
  TANDEM_ASSIGN(DeviceBuffer y, DeviceBuffer::make(size_t{rows} * cols * 2, "a study output"));
  std::vector<uint16_t> scale_bits(size_t{cols} * (k / kGroup));
  std::uniform_real_distribution<float> scale(0.5f, 1.5f);
  std::vector<QGemmStudy> out;
  for (uint32_t bits : {8u, 4u}) {
    for (uint16_t& s : scale_bits) s = float_to_half(scale(rng) / (bits == 8 ? 127.0f : 7.0f) / std::sqrt(float(k)));
    std::vector<uint8_t> code_bytes(size_t{cols} * k * bits / 8);
    for (uint8_t& c : code_bytes) c = static_cast<uint8_t>(rng());
    // Codes and scales rotate together (copy i of each), counted as one weight.
    const size_t weight_bytes = code_bytes.size() + scale_bits.size() * 2, copies = rotation_copies(weight_bytes);
    TANDEM_ASSIGN(DeviceBuffer codes0, upload_vector(device, code_bytes, "study codes"));
    TANDEM_ASSIGN(DeviceBuffer scales0, upload_vector(device, scale_bits, "study scales"));
    TANDEM_ASSIGN(const std::vector<DeviceBuffer> codes,
                  rotation(device, std::move(codes0), code_bytes.size(), copies));
    TANDEM_ASSIGN(const std::vector<DeviceBuffer> scales,
                  rotation(device, std::move(scales0), scale_bits.size() * 2, copies));
    // The same codes in the tensor-core layout (qgemm_layout.h), where k allows it.
    std::vector<DeviceBuffer> packed;
    if (qgemm_tc_packable(k, bits)) {
      TANDEM_ASSIGN(const std::vector<uint8_t> p, pack_qgemm_tc_codes(code_bytes, cols, k, bits));
      TANDEM_ASSIGN(DeviceBuffer packed0, upload_vector(device, p, "study packed codes"));
      TANDEM_ASSIGN(packed, rotation(device, std::move(packed0), p.size(), copies));
    }
    std::vector<float> first;
    // The CUDA cores and the tensor cores on the checkpoint's codes, then the tensor cores on packed codes in
    // the sliced and the whole-K mapping (the same bits).
    struct Variant {
      QGemmKernel kernel;
      bool packed;
      const char* label;
    };
    for (const Variant& v : {Variant{QGemmKernel::kCudaCores, false, "cuda cores"},
                             Variant{QGemmKernel::kTensorCores, false, "tensor cores"},
                             Variant{QGemmKernel::kTensorCores, true, "tensor cores packed"},
                             Variant{QGemmKernel::kTensorCoresWholeK, true, "tensor cores packed whole-K"}}) {
      if (v.packed && packed.empty()) continue;
      std::vector<KernelStep> steps;  // one per weight copy
      for (size_t i = 0; i < copies; ++i) {
        QuantWeight w;
        w.codes = v.packed ? packed[i].data() : codes[i].data();
        w.scales = scales[i].as<const uint16_t>();
        w.bits = bits;
        w.group = kGroup;
        w.packed = v.packed;
        TANDEM_ASSIGN(KernelStep step, qgemm_step(ctx, bf16_loc(x, k, "x"), w, nullptr, kernels::kActNone, false,
                                                  bf16_loc(y, cols, "y"), v.kernel));
        step.label = fmt::format("qgemm int{} {}", bits, v.label);
        steps.push_back(std::move(step));
      }
      QGemmStudy st;
      st.kernel = steps.front().label;
      st.weight_bytes = static_cast<double>(weight_bytes);
      size_t next = 0;
      TANDEM_ASSIGN(st.median_us, median_us(device, [&] {
        return launch(modules, steps[next++ % steps.size()], device.stream());
      }, reps));
      TANDEM_ASSIGN(const std::vector<float> got, download_bf16(device, y, size_t{rows} * cols));
      if (first.empty()) {
        first = got;
      } else {  // the tensor cores against the CUDA cores, relative to the largest output
        double big = 0.0, diff = 0.0;
        for (size_t i = 0; i < got.size(); ++i) {
          big = std::max(big, std::fabs(double(first[i])));
          const double d = std::fabs(double(got[i]) - double(first[i]));
          diff = std::isnan(d) ? INFINITY : std::max(diff, d);
        }
        st.max_rel_diff = big > 0.0 ? diff / big : diff;
      }
      out.push_back(st);
    }
  }
  // The dense BF16 weight on the decode GEMM: what the quantized kernels save against.
  const size_t dense_bytes = size_t{cols} * k * 2;
  TANDEM_ASSIGN(DeviceBuffer dense0, random_device_buffer(device, size_t{cols} * k, Dt::kBF16, 0.02f, rng));
  TANDEM_ASSIGN(const std::vector<DeviceBuffer> dense,
                rotation(device, std::move(dense0), dense_bytes, rotation_copies(dense_bytes)));
  std::vector<KernelStep> steps;
  for (const DeviceBuffer& d : dense) {
    TANDEM_ASSIGN(KernelStep step, gemm_decode_step(ctx, bf16_loc(x, k, "x"), bf16_loc(y, cols, "y"), d.data(),
                                                    nullptr, false));
    steps.push_back(std::move(step));
  }
  QGemmStudy st;
  st.kernel = "dense bf16 decode GEMM";
  st.weight_bytes = double(dense_bytes);
  size_t next = 0;
  TANDEM_ASSIGN(st.median_us, median_us(device, [&] {
    return launch(modules, steps[next++ % steps.size()], device.stream());
  }, reps));
  out.push_back(st);
  return out;
}

}  // namespace tandem::cuda
