// The graph IR: values with symbolic row counts (Rows), ops over them, weights named by checkpoint
// tensor. One IR serves the scorer (scorer.md §2) and the decoders (dflash.md): a graph is built once per
// model and lowered per bucket by a backend.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/ir/sampling.h"

namespace tandem::ir {

// What a value's rows count: the batch's tokens, its sequences, or the rows it picks out of its
// sequences (Batch::picks: the scorer's option markers, a decoder's logit rows). The real counts are
// known only at run time; a bucket bounds them at lowering.
enum class Rows : uint8_t { kTokens, kSeqs, kPicks };

// What a value's elements are: floats (activations, logits) or token ids (Argmax, TopK, Sample).
enum class Elem : uint8_t { kF32, kU32 };
const char* to_string(Elem elem);
const char* to_string(Rows rows);

struct Val {
  uint32_t index = 0;
  friend bool operator==(Val, Val) = default;
};

struct ValInfo {
  Rows rows;
  uint32_t width;    // elements per row (4 bytes each in an arena: f32 or u32)
  std::string name;  // for errors and profiles: "enc.3.qkv"
  Elem elem = Elem::kF32;
};

// A weight: checkpoint tensors stacked along dim 0 (one part for most; [gate; up] or [q; k; v] fuse
// several GEMMs into one), with the shape the graph needs. Backends convert every dtype to what they run.
struct WeightRef {
  std::vector<std::string> parts;
  std::vector<uint64_t> shape;  // of the stacked tensor
  bool codes = false;           // integer codes of a quantized weight (QGemm::w), read as they are
  std::vector<uint64_t> part_rows;  // each part's rows when they differ ([q | k | v]); empty: equal parts
  std::string name() const;     // parts joined by '+'
  // Part i's expected shape: the stacked shape with its rows.
  std::vector<uint64_t> part_shape(size_t i) const;
};

struct WeightId {
  uint32_t index = 0;
  friend bool operator==(WeightId, WeightId) = default;
};

enum class Epilogue : uint8_t {
  kNone,
  kGelu,        // exact erf GELU
  kRelu,
  kAccumulate,  // out += a·wᵀ + b (the residual add)
};

// ---- ops shared by every model ----

// out[r] = table[ids[r]].
struct Embed { WeightId table; Val out; };
// out = (x - mean) / sqrt(var + eps) · w (+ b), statistics in f64 on the CPU.
struct LayerNorm { Val x; WeightId w; std::optional<WeightId> b; float eps; Val out; };
// out = x / sqrt(mean(x²) + eps) · w.
struct RmsNorm { Val x; WeightId w; float eps; Val out; };
// out = epilogue(a · wᵀ + b), w is [n, k].
// first_rows: w may have more rows than out is wide, and only its first out-width rows are multiplied (a
// drafter's draft vocabulary over the target's LM head, read in place: no copy, no work past the vocabulary).
struct Gemm {
  Val a;
  WeightId w;
  std::optional<WeightId> b;
  Epilogue epilogue;
  Val out;
  bool first_rows = false;
};
// out = epilogue(a · Wᵀ + b) with W [n, k] quantized group-wise (docs/quantization.md), dequantized
// inside the loop: W[r, c] = q[r, c] · scales[r, c / group]. `w` holds the codes (codes = true): int8
// [n, k] for bits 8, or for bits 4 [n, k / 2] bytes with column 2j in the low nibble and 2j + 1 in the
// high one, each stored as q + 8 (q in −8..7). `scales` is [n, k / group].
struct QGemm {
  Val a;
  WeightId w;
  WeightId scales;
  uint32_t bits;
  uint32_t group;
  std::optional<WeightId> b;
  Epilogue epilogue;
  Val out;
};
// In place on `heads` heads of `head_dim` starting at column `col`: rotate-half (NeoX) RoPE at the row's
// position (batch start of its sequence + its offset in the sequence).
struct Rope { Val x; uint32_t col; uint32_t heads; uint32_t head_dim; float theta; };
// Rope's inverse frequencies, inv_i = 1 / theta^(2i / head_dim) in f32 as HF computes them; the angle of
// pair i at position p is the f32 product p · inv_i, its cos and sin taken in f64 (every backend).
std::vector<float> rope_inv_freq(float theta, uint32_t head_dim);
// out = gelu(x[:, :I]) · x[:, I:].
struct GeGlu { Val x; Val out; };
// out = silu(x[:, :I]) · x[:, I:].
struct SwiGlu { Val x; Val out; };

// ---- scorer ops (scorer.md §2) ----

// Packed varlen self-attention over fused rows [q | k | v] (heads × head_dim each), per sequence; key j
// visible to query i iff |i − j| <= window (no window: the whole sequence). Scale head_dim^-0.5.
struct Attention { Val qkv; uint32_t heads; uint32_t head_dim; std::optional<uint32_t> window; Val out; };
// h[r] += table[qtype[seq(r)]], in place.
struct AddType { Val h; WeightId table; };
// out[p] = h[cu[s] + picks[p]] for the picks p of each sequence s.
struct PickRows { Val h; Val out; };
// Per sequence: [CLS row | top1 | top1 − top2 | normalized entropy | max(k,2)/255] (scorer.md §2).
struct ActFeatures { Val h; Val logits; Val out; };

// ---- decoder ops (dflash.md) ----

// In place: RMSNorm over each of `heads` slices of `head_dim` from column `col` (Qwen3 q_norm / k_norm; the
// target's q and k are columns of one fused [q | k | v] row).
struct HeadRmsNorm { Val x; WeightId w; uint32_t heads; uint32_t head_dim; float eps; uint32_t col = 0; };
// Writes k and v rows (the cache's width from columns k_col of k and v_col of v: a fused [q | k | v] row
// may be both) into cache `cache` at (slot of the row's sequence, the row's position).
struct CacheAppend { Val k; Val v; uint32_t cache; uint32_t k_col = 0; uint32_t v_col = 0; };
// Attention of q rows over cache `cache` of their sequence's slot. Causal: keys at positions <= the
// row's. Block (non-causal): keys at positions < start + rows of the sequence. Both also need
// |q_pos − k_pos| < window when a window is set. GQA: q_heads / kv_heads queries share a key head.
struct CacheAttention {
  Val q;
  uint32_t cache;
  uint32_t q_heads;
  uint32_t kv_heads;
  uint32_t head_dim;
  bool causal;
  std::optional<uint32_t> window;
  Val out;
  uint32_t q_col = 0;  // the queries' first column in q's rows (a fused [q | k | v] row)
};
// out[r] = the batch's feature row r (a drafter's tap rows).
struct Input { Val out; };
// out[r, col : col + width(x)] = x[r] (tap capture into the joined row).
struct Tap { Val x; Val out; uint32_t col; };
// DFlash 2 grouped dynamic causal convolution over each sequence's rows (dflash.md §3.2):
// y[t, c] = Σ_τ (base[stage, τ, c] + d[t, (stage·taps + τ)·G + c / group]) · x[t − τ, c], then
// out = y (kNone) or out += y (kAccumulate).
struct DynConv {
  Val x;
  Val d;
  WeightId base;  // [2, taps, width]
  uint32_t stage;
  uint32_t taps;
  uint32_t group;
  Epilogue epilogue;
  Val out;
};

// ---- token choice on the device (engine/ir/sampling.h defines each exactly) ----

// out[r] = argmax over x[r, 0 : columns) (ties to the lower index); out is u32, one wide.
struct Argmax { Val x; uint32_t columns; Val out; };
// The k largest of x[r, 0 : columns) in descending order, ties to the lower index: ids (u32) and their
// values (f32), both k wide.
struct TopK { Val x; uint32_t columns; uint32_t k; Val ids; Val values; };
// out[p] = ir::sample_token(x[p, 0 : columns), batch.sampling[s], fill, stream) for pick p of sequence s
// at absolute position start[s] + picks[p] (greedy where the batch has no sampling parameters); out is
// u32, one wide, over pick rows. `fill` is the position the row's token fills: a target row's next one
// (kTarget: position + 1), or a drafter block row's own (kDraft: position; v1 proposals under rejection
// sampling, whose sampling parameters carry top_p 1).
struct Sample { Val x; uint32_t columns; Val out; Stream stream = Stream::kTarget; };
// Rejection sampling of each sequence's verify block (dflash.md §1.8; engine/ir/reject.h defines it
// exactly), in place on `ids`, a Sample's output over the same pick rows. A sequence with proposals
// (batch.proposals) has logits rows x[0..n] for its rows [tok, d_1 .. d_n]; its pick rows of ids become the
// committed tokens (the accepted drafts, then the residual sample or the bonus, which is Sample's token of
// row n) and kNoToken after them. Other sequences keep Sample's tokens.
struct RejectSample { Val x; uint32_t columns; Val ids; };
// The DFlash 2 selector walk (dflash.md §3.3; engine/ir/selector.h defines each step exactly): per
// sequence, its pick rows in order, each choosing one of its k candidates (cand, u32, and their raw
// logits values: a TopK's outputs) by E[c] = selector_energy(values[c], P[prev], sel row, C[cand[c]]),
// prev being the previous row's choice (the sequence's first token for its first pick row); the pick is
// selector_pick(E, batch.sampling[s], position start[s] + picks[p]). ids (u32, one wide) get the chosen
// candidate, q (k wide) softmax(E / T) over the candidates (zeros where the batch samples greedily).
// predecessor and successor are [vocab, rank]; sel is rank wide.
struct SelectorWalk {
  Val cand;
  Val values;
  Val sel;
  WeightId predecessor;
  WeightId successor;
  float softcap;
  float multiplier;
  Val ids;
  Val q;
};

using Op = std::variant<Embed, LayerNorm, RmsNorm, Gemm, QGemm, Rope, GeGlu, SwiGlu, Attention, AddType,
                        PickRows, ActFeatures, HeadRmsNorm, CacheAppend, CacheAttention, Input,
                        Tap, DynConv, Argmax, TopK, Sample, SelectorWalk, RejectSample>;

const char* op_name(const Op& op);

// A persistent cache the graph reads and writes (a KV cache layer, a drafter context layer): K and V
// of `width` floats per position, per slot. Backends allocate it in a State, outside plan arenas.
struct CacheInfo {
  std::string name;
  uint32_t width;
};

// Where a run leaves an output: copied to the host (Tensor2::data or ::ids), or left on the backend's
// device (Tensor2::device) for another plan or a transport to read, never copied.
enum class Placement : uint8_t { kHost, kDevice };

struct Output {
  std::string name;
  Val val;
  Placement placement = Placement::kHost;
};

struct Graph {
  std::vector<ValInfo> vals;
  std::vector<Op> ops;
  std::vector<WeightRef> weights;
  std::vector<CacheInfo> caches;
  std::vector<Output> outputs;
  uint32_t feature_width = 0;  // width of Batch::features rows that Input reads; 0 if none

  Val add_val(Rows rows, uint32_t width, std::string name, Elem elem = Elem::kF32);
  // Returns the id of the weight with these parts, adding it if new.
  WeightId add_weight(std::vector<std::string> parts, std::vector<uint64_t> shape);
  // Parts of different row counts stacked along dim 0 (shape[0] is their sum).
  WeightId add_stacked_weight(std::vector<std::string> parts, std::vector<uint64_t> part_rows,
                              std::vector<uint64_t> shape);
  uint32_t add_cache(std::string name, uint32_t width);
  void add_op(Op op) { ops.push_back(std::move(op)); }
  void add_output(std::string name, Val val, Placement placement = Placement::kHost) {
    outputs.push_back({std::move(name), val, placement});
  }

  const ValInfo& info(Val v) const { return vals[v.index]; }
  const WeightRef& weight(WeightId w) const { return weights[w.index]; }
};

// Values an op reads and writes. In-place ops list the value in both; Gemm/QGemm/DynConv with kAccumulate
// read `out` too.
struct Uses {
  std::vector<Val> reads;
  std::vector<Val> writes;
};
Uses uses(const Op& op);

}  // namespace tandem::ir
