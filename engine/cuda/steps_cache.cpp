// Launcher of the KV-cache attention (graph.h CacheAttention; kernels/cache_attention.cu): the checks at
// lowering, the entry by element type and head_dim, the attention pass over (tile, chunk) items × KV
// heads × vector groups, the combine pass over token rows × query heads, and the scratch they share.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

// Attention blocks per multiprocessor in a grid: blocks loop over their items, so a few waves' worth is
// enough to fill the device and even out items of unequal length.
constexpr uint32_t kBlocksPerSm = 16;
constexpr uint32_t kCombineBlocksPerSm = 8;
constexpr uint32_t kHeadDimMax = 256;  // the SIMT kernel keeps 8 columns of a head per lane
constexpr uint32_t kGridYMax = 65535;

Error refuse(const ir::CacheAttention& op, const std::string& what) {
  return Error::make(ErrorKind::kUnsupported, "cache_attention ({} query heads over {} key heads of {}, cache {}): {}",
                     op.q_heads, op.kv_heads, op.head_dim, op.cache, what);
}

// Vector groups of a query tile: its 16 rows × the group's query heads, kCacheVectors per block.
uint32_t vector_groups(const ir::CacheAttention& op) {
  const uint64_t vectors = uint64_t{kernels::kQTileRows} * (op.q_heads / op.kv_heads);
  return static_cast<uint32_t>((vectors + kernels::kCacheVectors - 1) / kernels::kCacheVectors);
}

Result<KernelId> simt_entry(Dt t) {
  switch (t) {
    case Dt::kF32: return KernelId::cache_attention_f32;
    case Dt::kF16: return KernelId::cache_attention_f16;
    case Dt::kBF16: return KernelId::cache_attention_bf16;
    case Dt::kU32: break;
  }
  return Error(ErrorKind::kUnsupported, "cache_attention: token ids have no kernel");
}

// The tensor-core entry for 16-bit caches of a head_dim it takes, or none.
std::optional<KernelId> tc_entry(Dt t, uint32_t head_dim) {
  const bool f16 = t == Dt::kF16;
  if (t != Dt::kF16 && t != Dt::kBF16) return std::nullopt;
  switch (head_dim) {
    case 32: return f16 ? KernelId::cache_attention_tc_f16_h32 : KernelId::cache_attention_tc_bf16_h32;
    case 64: return f16 ? KernelId::cache_attention_tc_f16_h64 : KernelId::cache_attention_tc_bf16_h64;
    case 128: return f16 ? KernelId::cache_attention_tc_f16_h128 : KernelId::cache_attention_tc_bf16_h128;
    default: return std::nullopt;
  }
}

KernelId combine_entry(Dt t) {
  switch (t) {
    case Dt::kF32: return KernelId::cache_attention_combine_f32;
    case Dt::kF16: return KernelId::cache_attention_combine_f16;
    case Dt::kBF16: return KernelId::cache_attention_combine_bf16;
    case Dt::kU32: break;
  }
  return KernelId::cache_attention_combine_f32;  // unreachable: simt_entry refused it first
}

}  // namespace

Status cache_attention_supported(const ir::CacheAttention& op) {
  if (op.head_dim == 0 || op.head_dim % 32 != 0 || op.head_dim > kHeadDimMax) {
    return refuse(op, fmt::format("head_dim {} (the CUDA kernels take multiples of 32 up to {})", op.head_dim,
                                  kHeadDimMax));
  }
  if (op.kv_heads == 0 || op.q_heads == 0 || op.q_heads % op.kv_heads != 0) {
    return refuse(op, "the query heads do not group over the key heads");
  }
  if (uint64_t{op.kv_heads} * vector_groups(op) > kGridYMax) {
    return refuse(op, fmt::format("{} key heads × {} vector groups exceed a grid's {} rows", op.kv_heads,
                                  vector_groups(op), kGridYMax));
  }
  if (op.window && *op.window == 0) return refuse(op, "a window of 0 leaves no key visible");
  return {};
}

size_t cache_attention_scratch_bytes(const ir::Bucket& bucket, const ir::CacheAttention& op) {
  return size_t{bucket.seqs} * kernels::kCacheSplitRows * op.q_heads * (size_t{op.head_dim} + 2) * sizeof(float);
}

size_t cache_attention_scratch_bytes(const ir::Graph& graph, const ir::Bucket& bucket) {
  size_t bytes = 0;
  for (const ir::Op& op : graph.ops) {
    if (const auto* a = std::get_if<ir::CacheAttention>(&op)) {
      bytes = std::max(bytes, cache_attention_scratch_bytes(bucket, *a));
    }
  }
  return bytes;
}

// INVARIANT (the argument pack): q and out are arena values holding the bucket's token rows at the widths
// and types checked here; the scratch holds cache_attention_scratch_bytes (checked); the index tables are
// the plan's, sized for the bucket, and list the bound State's caches and capacity at run time.
Result<std::vector<KernelStep>> cache_attention_steps(const StepContext& c, const Loc& q, const Loc& out,
                                                      const ir::CacheAttention& op, Dt cache_type, void* scratch,
                                                      size_t scratch_bytes, bool tensor_cores) {
  TANDEM_TRY(cache_attention_supported(op));
  const uint64_t width = uint64_t{op.q_heads} * op.head_dim;
  if (q.rows != ir::Rows::kTokens || out.rows != ir::Rows::kTokens || op.q_col + width > q.width ||
      out.width != width) {
    return refuse(op, fmt::format("queries {} from column {} and output {} must be token rows of {} columns",
                                  q.describe(), op.q_col, out.describe(), width));
  }
  if (q.type != cache_type || out.type != cache_type) {
    return refuse(op, fmt::format("queries {} and output {} must have the {} cache's type", q.describe(),
                                  out.describe(), dt_name(cache_type)));
  }
  const size_t need = cache_attention_scratch_bytes(c.bucket, op);
  if (scratch_bytes < need || (need > 0 && scratch == nullptr)) {
    return refuse(op, fmt::format("the split partials need {} bytes of scratch, the plan has {}", need,
                                  scratch_bytes));
  }
  TANDEM_ASSIGN(const KernelId simt, simt_entry(cache_type));
  const std::optional<KernelId> tc = tensor_cores ? tc_entry(cache_type, op.head_dim) : std::nullopt;

  const size_t slots = size_t{c.bucket.seqs} * kernels::kCacheSplitRows * op.q_heads;
  kernels::CacheAttentionArgs args{};
  args.out = out.ptr;
  // INVARIANT: q_col + q_heads · head_dim <= q.width (checked), the row stride q_ld.
  args.q = static_cast<const char*>(q.ptr) + size_t{op.q_col} * dt_size(q.type);
  args.q_ld = q.width;
  args.part_o = static_cast<float*>(scratch);
  // INVARIANT: the sums follow the slots' head_dim floats each, inside the `need` bytes checked above.
  args.part_ml = scratch != nullptr ? static_cast<float*>(scratch) + slots * op.head_dim : nullptr;
  args.caches = c.ix.caches;
  args.seq = c.ix.seq;
  args.cu = c.ix.cu;
  args.start = c.ix.start;
  args.slot = c.ix.slot;
  args.qtiles = c.ix.qtiles;
  args.n = c.ix.n;
  args.cache = op.cache;
  args.kv_heads = op.kv_heads;
  args.group = op.q_heads / op.kv_heads;
  args.head_dim = op.head_dim;
  args.causal = op.causal ? 1u : 0u;
  args.window = op.window.value_or(0);
  args.scale = 1.0f / std::sqrt(static_cast<float>(op.head_dim));

  // Items: every query tile once per chunk; a tile of a sequence of n rows takes at most
  // min(kCacheMaxSplits, kCacheSplitRows / n) chunks, so the bucket holds at most this many.
  const uint64_t items = (uint64_t{c.bucket.tokens} + kernels::kQTileRows - 1) / kernels::kQTileRows +
                         uint64_t{c.bucket.seqs} * kernels::kCacheMaxSplits;
  const uint32_t gy = op.kv_heads * vector_groups(op);
  const uint64_t cap = std::max<uint64_t>(1, uint64_t{kBlocksPerSm} * c.sms / gy);
  KernelStep attend;
  attend.id = tc.value_or(simt);
  attend.grid = dim3(static_cast<unsigned>(std::clamp<uint64_t>(items, 1, cap)), gy);
  attend.block = dim3(kernels::kCacheThreads);
  attend.smem = tc ? 2u * kernels::kCacheTcKeys * (2u * op.head_dim + 16u) : 0u;
  attend.args = args;

  KernelStep combine;
  combine.id = combine_entry(cache_type);
  const uint32_t heads_per_block = kernels::kCacheThreads / 32;
  const uint32_t cy = (op.q_heads + heads_per_block - 1) / heads_per_block;
  const uint64_t ccap = std::max<uint64_t>(1, uint64_t{kCombineBlocksPerSm} * c.sms / cy);
  combine.grid = dim3(static_cast<unsigned>(std::clamp<uint64_t>(c.bucket.tokens, 1, ccap)), cy);
  combine.block = dim3(kernels::kCacheThreads);
  combine.args = args;
  std::vector<KernelStep> steps;
  steps.push_back(std::move(attend));
  steps.push_back(std::move(combine));
  return steps;
}

}  // namespace tandem::cuda
