// Where a plan's L2 prefetches go (l2_prefetch_impl.h) and their launches.
#include "engine/cuda/l2_prefetch_impl.h"

#include <algorithm>
#include <string>

namespace tandem::cuda {
namespace {

constexpr unsigned kThreads = 256;

// A step that reads a weight: a cuBLASLt GEMM or one of tandem's GEMM kernels.
bool reads_weight(const Step& step) {
  if (std::holds_alternative<GemmStep>(step)) return true;
  const KernelArgs& a = std::get<KernelStep>(step).args;
  return std::holds_alternative<kernels::GemmDecodeArgs>(a) || std::holds_alternative<kernels::GemmStreamArgs>(a) ||
         std::holds_alternative<kernels::QGemmArgs>(a) || std::holds_alternative<kernels::QGemmTcArgs>(a);
}

// The operands of a quantized GEMM step, or null.
const kernels::QGemmArgs* quantized(const KernelArgs& a) {
  if (const auto* q = std::get_if<kernels::QGemmArgs>(&a)) return q;
  if (const auto* t = std::get_if<kernels::QGemmTcArgs>(&a)) return &t->q;
  return nullptr;
}

constexpr uint64_t kCodeChunk = uint64_t{64} << 10;

}  // namespace

Result<KernelStep> l2_prefetch_step(const StepContext& c, const void* w, uint32_t rows, uint64_t row_bytes,
                                    uint32_t slices, uint64_t budget) {
  if (w == nullptr || rows == 0 || slices == 0 || row_bytes % (uint64_t{slices} * 16) != 0 ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return Error::make(ErrorKind::kUnsupported, "l2_prefetch: {} rows of {} bytes in {} slices (16-byte aligned "
                       "slices)", rows, row_bytes, slices);
  }
  const uint64_t slice_bytes = row_bytes / slices;
  const uint64_t segments = uint64_t{rows} * slices;
  const uint64_t seg = std::min(slice_bytes, budget / segments) / 16 * 16;
  if (seg == 0) return Error::make(ErrorKind::kUnsupported, "l2_prefetch: {} bytes over {} segments", budget, segments);
  KernelStep s;
  s.id = KernelId::l2_prefetch;
  s.grid = dim3(static_cast<unsigned>(std::clamp<uint64_t>((segments + kThreads - 1) / kThreads, 1, std::max(1u, c.sms))));
  s.block = dim3(kThreads);
  s.side = true;
  s.args = kernels::L2PrefetchArgs{w, row_bytes, slice_bytes, rows, slices, static_cast<unsigned>(seg)};
  return s;
}

Result<std::vector<Step>> with_l2_prefetches(std::vector<Step> steps, const std::vector<Gemm>& gemms,
                                             const StepContext& c, const L2Prefetch& p) {
  if (p.bytes == 0 || c.bucket.tokens > p.max_rows) return steps;
  std::vector<Step> out;
  out.reserve(steps.size() * 2);
  size_t fork = 0;  // where the next prefetch goes in `out`: after the last weight step so far
  const auto place = [&](Result<KernelStep> pre, const std::string& label) {
    if (!pre.ok()) return;  // a shape the kernel cannot cut into 16-byte segments: no prefetch, the same bits
    pre->label = label + " (L2 prefetch)";
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(fork), std::move(pre).value());
  };
  for (Step& step : steps) {
    if (const auto* g = std::get_if<GemmStep>(&step)) {
      const Gemm& gemm = gemms[g->gemm.back()];  // every tier reads the same weight
      const GemmShape& shape = gemm.shape();
      const uint64_t bytes = uint64_t{shape.k} * shape.n * dt_size(shape.ab);
      if (shape.ab != Dt::kF32 && bytes >= p.min_bytes) {
        place(l2_prefetch_step(c, gemm.weight(), shape.n, uint64_t{shape.k} * 2, shape.splits, p.bytes), g->label);
      }
    } else if (const kernels::QGemmArgs* q = quantized(std::get<KernelStep>(step).args)) {
      // A quantized weight's codes (its scales are a 16th of them or less): in chunks, as the packed layout's
      // order is not the rows'; a budget under the codes' size takes the same share of every chunk.
      const uint64_t bytes = uint64_t{q->cols} * q->k * q->bits / 8;
      const uint64_t chunk = std::min(kCodeChunk, bytes / 16 * 16);
      if (bytes >= p.min_bytes && chunk > 0) {
        place(l2_prefetch_step(c, q->codes, static_cast<uint32_t>(bytes / chunk), chunk, 1, p.bytes),
              std::get<KernelStep>(step).label);
      }
    }
    const bool weight = reads_weight(step);
    out.push_back(std::move(step));
    if (weight) fork = out.size();
  }
  return out;
}

}  // namespace tandem::cuda
