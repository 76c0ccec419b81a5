// Weight upload: gather parts, check shapes against WeightRef, convert on the host, copy to the device.
#include "engine/cuda/weights_impl.h"

#include <algorithm>
#include <variant>

#include "engine/core/dtype.h"
#include "engine/cuda/check_impl.h"
#include "engine/cuda/qgemm_layout.h"

namespace tandem::cuda {
namespace {

constexpr size_t kChunk = size_t{1} << 22;  // elements converted per host pass

struct Need {
  const ir::WeightRef* ref = nullptr;
  bool f32 = false, half = false, raw = false;
  uint32_t code_bits = 0;  // a QGemm's codes: their bits (the tensor-core layout needs them)
};

// Which weights the graphs read, and in which element types.
Result<std::map<std::string, Need>> collect(std::span<const ir::Graph* const> graphs, ir::Precision precision) {
  std::map<std::string, Need> needs;
  for (const ir::Graph* g : graphs) {
    std::vector<bool> gemm_weight(g->weights.size(), false);
    std::vector<bool> other_use(g->weights.size(), false);
    std::vector<bool> raw_use(g->weights.size(), false);  // a QGemm's codes and scales
    std::vector<uint32_t> code_bits(g->weights.size(), 0);
    for (const ir::Op& op : g->ops) {
      if (const auto* q = std::get_if<ir::QGemm>(&op)) {
        raw_use[q->w.index] = true;
        code_bits[q->w.index] = q->bits;
        raw_use[q->scales.index] = true;
        if (q->b) other_use[q->b->index] = true;
      }
      if (const auto* gm = std::get_if<ir::Gemm>(&op)) {
        gemm_weight[gm->w.index] = true;
        if (gm->b) other_use[gm->b->index] = true;
      }
      // Tables are read as FP32 rows even when a GEMM also multiplies by them (a tied LM head); norms,
      // biases and DFlash 2's base kernels as FP32 by kernels. A weight the graph declares but none of its
      // ops reads (a drafter's settle graph holds every layer's) needs nothing here.
      if (const auto* e = std::get_if<ir::Embed>(&op)) other_use[e->table.index] = true;
      if (const auto* t = std::get_if<ir::AddType>(&op)) other_use[t->table.index] = true;
      if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
        other_use[ln->w.index] = true;
        if (ln->b) other_use[ln->b->index] = true;
      }
      if (const auto* rn = std::get_if<ir::RmsNorm>(&op)) other_use[rn->w.index] = true;
      if (const auto* hn = std::get_if<ir::HeadRmsNorm>(&op)) other_use[hn->w.index] = true;
      if (const auto* dc = std::get_if<ir::DynConv>(&op)) other_use[dc->base.index] = true;
      if (const auto* sw = std::get_if<ir::SelectorWalk>(&op)) {  // DFlash 2's codebooks, FP32 rows
        other_use[sw->predecessor.index] = true;
        other_use[sw->successor.index] = true;
      }
    }
    for (size_t i = 0; i < g->weights.size(); ++i) {
      const ir::WeightRef& ref = g->weights[i];
      Need& n = needs[ref.name()];
      if (n.ref != nullptr && n.ref->shape != ref.shape) {
        return Error::make(ErrorKind::kShape, "weight {} is {} in one graph and {} in another", ref.name(),
                           shape_string(n.ref->shape), shape_string(ref.shape));
      }
      n.ref = &ref;
      const bool gemm_half = gemm_weight[i] && precision != ir::Precision::kF32;
      n.half = n.half || gemm_half;
      n.raw = n.raw || raw_use[i];
      if (code_bits[i] != 0) n.code_bits = code_bits[i];
      n.f32 = n.f32 || other_use[i] || (gemm_weight[i] && !gemm_half);
    }
  }
  return needs;
}

// The checkpoint views of a ref's parts, checked to stack along dim 0 into ref.shape.
Result<std::vector<TensorView>> parts_of(const WeightSource& source, const ir::WeightRef& ref) {
  std::vector<TensorView> views;
  uint64_t rows = 0;
  for (const std::string& part : ref.parts) {
    TANDEM_ASSIGN(TensorView v, source.tensor(part));
    const bool rank_ok = v.shape.size() == ref.shape.size() && !v.shape.empty();
    if (!rank_ok || !std::equal(v.shape.begin() + 1, v.shape.end(), ref.shape.begin() + 1)) {
      return Error::make(ErrorKind::kShape, "weight {}: tensor {} is {}, which does not stack into {}", ref.name(),
                         part, shape_string(v.shape), shape_string(ref.shape));
    }
    rows += v.shape[0];
    views.push_back(std::move(v));
  }
  if (ref.shape.empty() || rows != ref.shape[0]) {
    return Error::make(ErrorKind::kShape, "weight {}: its parts stack to {} rows, expected {}", ref.name(), rows,
                       shape_string(ref.shape));
  }
  return views;
}

uint64_t numel(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

// The parts' bytes as stored, stacked into t.raw: every part of one dtype. With pack_bits (a QGemm's codes whose
// k the tensor-core layout holds), each part's columns go up in that layout instead (t.raw_packed).
Status upload_raw(const Device& device, const std::string& name, const std::vector<TensorView>& views, uint32_t pack_bits,
                  DeviceTensor& t) {
  uint64_t bytes = 0;
  for (const TensorView& v : views) {
    if (v.dtype != views.front().dtype) {
      return Error::make(ErrorKind::kFormat, "weight {}: its parts are {} and {}; a quantized weight's parts share "
                         "one dtype", name, to_string(views.front().dtype), to_string(v.dtype));
    }
    bytes += v.numel() * dtype_size(v.dtype);
  }
  t.raw_dtype = views.front().dtype;
  const uint64_t k = pack_bits == 0 || views.front().shape.size() != 2 ? 0 : views.front().shape[1] * 8 / pack_bits;
  const bool pack = k <= UINT32_MAX && qgemm_tc_packable(k, pack_bits);
  TANDEM_ASSIGN(t.raw, DeviceBuffer::make(bytes, "weight " + name + (pack ? " (tensor-core layout)" : " (as stored)")));
  uint64_t at = 0;
  std::vector<std::vector<uint8_t>> packed;  // the host copies, alive until the stream drains
  for (const TensorView& v : views) {
    const uint64_t n = v.numel() * dtype_size(v.dtype);
    const void* from = v.data;
    if (pack && n > 0) {
      auto p = pack_qgemm_tc_codes({static_cast<const uint8_t*>(v.data), n}, static_cast<uint32_t>(v.shape[0]),
                                   static_cast<uint32_t>(k), pack_bits);
      if (!p.ok()) return std::move(p).error().context("weight " + name);
      packed.push_back(std::move(p).value());
      from = packed.back().data();
    }
    // INVARIANT: the parts' bytes sum to the buffer's size (counted above; packing keeps each part's size);
    // the checkpoint's mapping and the packed copies outlive the copy, which is drained before returning.
    if (n > 0) {
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(t.raw.as<unsigned char>() + at, from, n, cudaMemcpyHostToDevice,
                                        device.stream()));
    }
    at += n;
  }
  t.raw_packed = pack;
  return device.synchronize();
}

Status upload_one(const Device& device, const WeightSource& source, const Need& need, ir::Precision precision,
                  bool pack_qgemm_codes, DeviceTensor& t) {
  const bool bf16 = precision == ir::Precision::kBF16;
  const std::string name = need.ref->name();
  TANDEM_ASSIGN(std::vector<TensorView> views, parts_of(source, *need.ref));
  const uint64_t total = numel(need.ref->shape);
  t.shape = need.ref->shape;
  if (need.raw) TANDEM_TRY(upload_raw(device, name, views, pack_qgemm_codes ? need.code_bits : 0, t));
  if (!need.f32 && !need.half) return {};
  if (need.f32) {
    TANDEM_ASSIGN(t.f32, DeviceBuffer::make(total * 4, "weight " + name));
  }
  if (need.half) {
    TANDEM_ASSIGN(t.half, DeviceBuffer::make(total * 2, "weight " + name + (bf16 ? " (bf16)" : " (f16)")));
  }
  std::vector<float> f32(std::min<uint64_t>(total, kChunk));
  std::vector<uint16_t> half(need.half ? f32.size() : 0);
  uint64_t at = 0;  // elements of the stacked tensor done
  for (const TensorView& v : views) {
    const uint64_t n = v.numel();
    const auto* src = static_cast<const unsigned char*>(v.data);
    for (uint64_t done = 0; done < n; done += kChunk) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, n - done));
      convert_to_f32(v.dtype, src + done * dtype_size(v.dtype), len, f32.data());
      // INVARIANT: at + done + len <= total (parts_of checked that the parts stack to the ref's shape), and
      // both device buffers hold total elements. The copies go on the backend's stream, so every later
      // kernel sees them, and the stream is drained before the host chunks are reused.
      if (need.f32) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(t.f32.as<float>() + at + done, f32.data(), len * 4, cudaMemcpyHostToDevice,
                                          device.stream()));
      }
      if (need.half) {
        for (size_t i = 0; i < len; ++i) half[i] = bf16 ? float_to_bf16(f32[i]) : float_to_half(f32[i]);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(t.half.as<uint16_t>() + at + done, half.data(), len * 2,
                                          cudaMemcpyHostToDevice, device.stream()));
      }
      TANDEM_TRY(device.synchronize());
    }
    at += n;
  }
  return {};
}

}  // namespace

size_t CudaWeights::bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.f32.bytes() + t.half.bytes() + t.raw.bytes();
  return total;
}

size_t CudaWeights::packed_codes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.raw_packed ? 1 : 0;
  return n;
}

const DeviceTensor* CudaWeights::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::unique_ptr<CudaWeights>> upload_weights(const Device& device, const WeightSource& source,
                                                    std::span<const ir::Graph* const> graphs,
                                                    ir::Precision precision, bool pack_qgemm_codes) {
  TANDEM_TRY(device.activate());
  TANDEM_ASSIGN(auto needs, collect(graphs, precision));
  auto out = std::make_unique<CudaWeights>();
  out->device_ = &device;
  out->precision_ = precision;
  for (const auto& [name, need] : needs) {
    DeviceTensor t;
    auto st = upload_one(device, source, need, precision, pack_qgemm_codes, t);
    if (!st.ok()) return std::move(st).error().context("uploading weights to " + device.info().describe());
    out->tensors_.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace tandem::cuda
