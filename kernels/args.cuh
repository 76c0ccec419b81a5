// Kernel argument packs (scorer.md §3): every kernel takes exactly one of these by value, and the host
// launchers fill the same structs, so a launcher cannot pack arguments a kernel reads differently.
// Plain C++ shared by NVRTC (through prelude.cuh) and the host (engine/cuda); no includes.
#pragma once

namespace tandem::kernels {

// Row kinds, in ir::Rows order: a kernel's real row count is n[kind] of the device index header.
enum : unsigned { kRowsTokens = 0, kRowsSeqs = 1, kRowsPicks = 2 };
// Header words of the index buffer: tokens, seqs, picks, attention tiles (scorer), the bound State's
// positions per cache slot and the decoder attention's query tiles (decoders), then padding to 8 words.
enum : unsigned { kHeaderTiles = 3, kHeaderCapacity = 4, kHeaderQTiles = 5, kHeaderWords = 8 };
// Decoder attention query tiles: every kQTileRows-th row of each sequence starts one (index_impl.h).
enum : unsigned { kQTileRows = 16 };
// Anchored attention tiles: every kTileRows-th row of each sequence starts one (determinism).
enum : unsigned { kTileRows = 64, kHeadDim = 64 };
// attention_tc2's dynamic shared memory: 2 stages (1 for the unsplit FP16 entry), each of 64 key rows
// and 64 value rows (64 FP32 = 256 bytes, later rewritten in place as f16 hi and lo, plus 16 bytes of
// padding) and the keys' RoPE cos and sin rows (32 FP32 = 128 bytes plus 16).
enum : unsigned {
  kTc2RowBytes = 272,
  kTc2TrigBytes = 144,
  kTc2Threads = 128,
  kTc2StageBytes = 2 * 64 * kTc2RowBytes + 2 * 64 * kTc2TrigBytes,
  kTc2SmemBytes = 2 * kTc2StageBytes,
  kTc2SmemBytesOneStage = kTc2StageBytes
};
// bias_act activations.
enum : unsigned { kActNone = 0, kActGelu = 1, kActRelu = 2 };

struct EmbedArgs {
  float* out;                // [tokens, width]
  const float* table;        // [vocab, width]
  const unsigned* ids;       // [tokens]
  const unsigned* n;         // index header
  unsigned width;
};

struct LayerNormArgs {
  void* out;                 // [rows, width] of the out type
  const void* x;             // [rows, width] of the in type
  const float* w;            // [width]
  const float* b;            // [width] or null
  const unsigned* n;
  unsigned kind;
  unsigned width;            // <= 1024 (checked at lowering)
  float eps;
};

// In place: x = act(x + bias), on the real rows.
struct BiasActArgs {
  void* x;
  const float* bias;         // [width] or null
  const unsigned* n;
  unsigned kind;
  unsigned width;
  unsigned act;
};

// out = x converted, on the real rows (a GEMM's FP16 staging copy of an FP32 value).
struct CastArgs {
  void* out;
  const void* x;
  const unsigned* n;
  unsigned kind;
  unsigned width;
};

// In place rotate-half RoPE on `heads` heads of 2·half columns starting at `col` of rows `ld` wide.
struct RopeArgs {
  void* x;
  const float* cos;          // [positions, half]
  const float* sin;
  const unsigned* pos;       // [tokens]
  const unsigned* n;
  unsigned ld;
  unsigned col;
  unsigned heads;
  unsigned half;
};

// Packed varlen attention over fused rows [q | k | v] of heads × 64; rope tables null = no rope.
struct AttentionArgs {
  void* out;                 // [tokens, heads·64]
  const void* qkv;           // [tokens, 3·heads·64]
  const float* cos;          // [positions, 32] or null
  const float* sin;
  const unsigned* pos;       // [tokens]
  const unsigned* seq;       // [tokens]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* tiles;     // [attention tiles]: first row of each anchored 64-row tile
  const unsigned* spans;     // [attention tiles][4]: first row, sequence start, sequence end, position of the start
  const unsigned* n;
  unsigned heads;
  int window;                // keys j with |i − j| <= window; < 0: the whole sequence
  float scale;               // applied to q after rope
};

struct GegluArgs {
  void* out;                 // [tokens, inter]
  const void* x;             // [tokens, 2·inter]
  const unsigned* n;
  unsigned kind;
  unsigned inter;
};

struct AddTypeArgs {
  float* h;                  // [tokens, width], in place
  const float* table;        // [types, width]
  const unsigned* seq;
  const unsigned* qtype;
  const unsigned* n;
  unsigned width;
};

struct PickRowsArgs {
  void* out;                 // [picks, width]
  const void* h;             // [tokens, width]
  const unsigned* prow;      // [picks]: absolute token row of each picked row
  const unsigned* n;
  unsigned width;
};

struct ActFeaturesArgs {
  float* out;                // [seqs, width + 4]
  const float* h;            // [tokens, width]
  const float* logits;       // [picks]: the scorer's markers
  const unsigned* cu;
  const unsigned* pcu;
  const unsigned* n;
  unsigned width;
};

// ---- decoder kernels (dflash.md §1.5; graph.h's decoder ops) ----

// out = x / sqrt(mean(x²) + eps) · w over rows of any width (HF Qwen3RMSNorm: normalize, round to f32,
// then scale), one block per row, statistics in f32 with a fixed reduction order.
struct RmsNormArgs {
  void* out;                 // [rows, width] of the out type
  const void* x;             // [rows, width] of the in type
  const float* w;            // [width]
  const unsigned* n;
  unsigned kind;
  unsigned width;
  float eps;
};

// In place on heads × head_dim columns (from column 0) of token rows `ld` wide: per-head RMSNorm with
// weight w ([head_dim]; null: none), then rotate-half RoPE at each row's absolute position pos[row]
// (inv_freq null: none): angle = (float)pos · inv_freq[i] in f32, cos/sin in f64 rounded to f32, as the
// CPU reference computes.
struct HeadNormRopeArgs {
  void* x;
  const float* w;
  const float* inv_freq;     // [head_dim / 2] = 1 / theta^(2i / head_dim) in f32
  const unsigned* pos;       // [tokens]
  const unsigned* n;
  unsigned ld;
  unsigned heads;
  unsigned head_dim;
  float eps;
};

// out = silu(x[:, :inter]) · x[:, inter:], on the real rows.
struct SwigluArgs {
  void* out;                 // [rows, inter]
  const void* x;             // [rows, 2·inter]
  const unsigned* n;
  unsigned kind;
  unsigned inter;
};

// out[r, col : col + width] = x[r] (tap capture into the joined row), converted to out's type.
struct TapArgs {
  void* out;                 // [rows, ld]
  const void* x;             // [rows, width]
  const unsigned* n;
  unsigned kind;
  unsigned width;
  unsigned ld;
  unsigned col;
};

// Input (graph.h): out[r] = row rows[r] of the feature source the index names for this run (its device
// address as two words, its row stride in elements and its storage, kFeat*), converted to out's type,
// on the real token rows. The source is the batch's device rows or the plan's copy of its host rows.
enum : unsigned { kFeatF32 = 0, kFeatF16 = 1, kFeatBF16 = 2, kFeatWords = 4 };
struct InputArgs {
  void* out;                 // [tokens, width]
  const unsigned* source;    // kFeatWords index words: address low, address high, stride, storage
  const unsigned* rows;      // [tokens]: the source row of each token
  const unsigned* n;
  unsigned width;
};

// DFlash 2's grouped dynamic causal convolution (graph.h DynConv, dflash.md §3.2) on the real token rows:
// y[t, c] = Σ_{τ < taps, τ <= t} (base[stage, τ, c] + d[t, (stage·taps + τ)·G + c / group]) · x[t − τ, c]
// with t the row's offset in its sequence (rows before a sequence's first row of the batch read zero, as
// the CPU reference does); out = y, or out += y when accumulate.
struct DynConvArgs {
  void* out;                 // [tokens, width] of the out type
  const void* x;             // [tokens, width] of the in type
  const void* d;             // [tokens, 2·taps·(width / group)] of the in type
  const float* base;         // [2, taps, width]
  const unsigned* seq;       // [tokens]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* n;
  unsigned width;
  unsigned taps;
  unsigned group;
  unsigned stage;
  unsigned accumulate;
};

// Quantized GEMM (graph.h QGemm, docs/quantization.md): out = act(x · dequant(W)ᵀ + bias), or out += the
// same for accumulate, on the real rows. W's codes are int8 [cols, k] or int4 [cols, k / 2] (column 2j in
// the low nibble, 2j + 1 in the high one, stored q + 8), scaled per row and group of `group` columns by
// F16 or BF16 scales [cols, k / group]. One warp per output column streams its codes once per tile of
// kQGemmRows rows; kQGemmWarps warps per block.
enum : unsigned { kQGemmWarps = 8, kQGemmRows = 8 };
struct QGemmArgs {
  void* out;                     // [rows, cols] of the out type
  const void* x;                 // [rows, k] of the in type
  const void* codes;             // cols rows of k · bits / 8 bytes
  const unsigned short* scales;  // [cols, k / group]: F16 or BF16 bits
  const float* bias;             // [cols] or null
  const unsigned* n;
  unsigned kind;
  unsigned cols;
  unsigned k;                    // a multiple of 32 (lowering checks)
  unsigned bits;                 // 8 or 4
  unsigned group;                // a multiple of 32 dividing k
  unsigned scale_bf16;           // 1: BF16 scales, 0: F16
  unsigned act;                  // kActNone, kActGelu or kActRelu
  unsigned accumulate;           // 1: out += the product (act kActNone)
};

// The quantized GEMM on tensor cores (qgemm_tc.cu), on the same operands: a block of kQGemmTcWarps warps
// covers kQGemmTcRows rows (grid x) and kQGemmTcWarps / splits tiles of 16 columns (grid y); splits (1, 2,
// 4 or 8) and slice_chunks (32-wide K chunks per split) come from (k, cols) alone, never from the rows.
// The whole-K kernels (qgemm_tc_whole_k.cu) take the same arguments: a block covers kQGemmTcWarps tiles
// instead, each warp walking every slice of its tile in turn (the block's warps then share their rows), and
// the slices are summed in the same order, so the bits are the same.
// packed: the codes are in the tensor-core layout (engine/cuda/qgemm_layout.h) instead of the checkpoint's:
// a lane's codes of 16 / bits consecutive 32-wide chunks lie in one 16-byte word, each chunk's in the order
// the mma pairs them, so a lane loads them at once and the rows need no reordering.
enum : unsigned { kQGemmTcWarps = 8, kQGemmTcRows = 32 };
struct QGemmTcArgs {
  QGemmArgs q;
  unsigned splits;
  unsigned slice_chunks;
  unsigned packed;  // 1: codes in the tensor-core layout (slices of whole 16-byte groups; lowering checks)
};

// The persistent caches of a bound State, as the index buffer lists them: per cache, the device
// addresses of its K and V arrays, each [slots][capacity][width] of the plan's cache element type.
struct CacheTable {
  unsigned long long k;
  unsigned long long v;
};

// Writes each token row's k and v at (slot of its sequence, its absolute position) of cache `cache`.
struct CacheAppendArgs {
  const void* k;             // [tokens, width] of the cache's element type
  const void* v;
  const CacheTable* caches;  // index buffer
  const unsigned* pos;       // [tokens]: absolute position
  const unsigned* seq;       // [tokens]
  const unsigned* slot;      // [seqs]
  const unsigned* n;         // header: tokens and the cache capacity
  unsigned cache;
  unsigned width;            // the cache's row: elements of k and of v per token
  unsigned ld_k, ld_v;       // row strides of k and v (a fused [q | k | v] row is wider than the cache's)
};

// A fused [q | k | v] token row before attention (graph.h: HeadRmsNorm + Rope of q, the same of k, and
// CacheAppend of k and v, as qwen3_layer.cpp emits them for a stacked q/k/v weight), in one launch: q's
// heads normed with w_q and rotated in place, k's with w_k, rotated, stored in place and at (slot of the
// row's sequence, its position) of cache `cache`, v's heads copied there. Row: heads q heads from column
// 0, then kv_heads k heads, then kv_heads v heads, each head_dim wide, ld apart.
struct QkvPrepArgs {
  void* x;
  const float* w_q;          // [head_dim]
  const float* w_k;          // [head_dim]
  const float* inv_freq;     // [head_dim / 2]
  const CacheTable* caches;  // index buffer
  const unsigned* pos;       // [tokens]
  const unsigned* seq;       // [tokens]
  const unsigned* slot;      // [seqs]
  const unsigned* n;         // header: tokens and the cache capacity
  unsigned cache;
  unsigned ld;
  unsigned heads;
  unsigned kv_heads;
  unsigned head_dim;
  float eps;
};

// KV-cache attention (graph.h CacheAttention; engine/cuda/steps_cache.cpp): each token row's q heads over
// its sequence's slot of cache `cache`. Work is one query tile (16 rows of a sequence, qtiles) × one key
// split × one KV head × kCacheVectors of the tile's rows·group query vectors. A tile of a sequence of n
// <= kCacheSplitRows rows may split its keys into up to min(kCacheMaxSplits, kCacheSplitRows / n) chunks
// of at least kCacheMinChunk keys (a function of the sequence alone, never of the batch); those rows
// leave partials in the scratch and the combine pass writes their output.
enum : unsigned {
  kCacheSplitRows = 128,
  kCacheMaxSplits = 32,
  kCacheMinChunk = 128,
  kCacheVectors = 64,
  kCacheThreads = 128,
  kCacheTcKeys = 64
};
struct CacheAttentionArgs {
  void* out;                 // [tokens, q_heads·head_dim] of the cache's element type
  const void* q;             // [tokens, q_ld]: q_heads·head_dim from its first column, of the cache's type
  float* part_o;             // [seqs·kCacheSplitRows][q_heads][head_dim]: unnormalized split outputs
  float* part_ml;            // [seqs·kCacheSplitRows][q_heads][2]: their score maximum and weight sum
  const CacheTable* caches;  // index buffer
  const unsigned* seq;       // [tokens]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* start;     // [seqs]: absolute position of each sequence's first row
  const unsigned* slot;      // [seqs]
  const unsigned* qtiles;    // [query tiles]: first row of each sequence's every 16th row
  const unsigned* n;         // header: tokens, query tiles, the cache capacity
  unsigned cache;
  unsigned kv_heads;
  unsigned group;            // query heads per KV head
  unsigned head_dim;         // a multiple of 32, <= 256
  unsigned causal;           // 1: keys at positions <= the row's; 0: every key < start + rows
  unsigned window;           // > 0: also |q_pos − k_pos| < window
  float scale;               // head_dim^-0.5
  unsigned q_ld;             // row stride of q (q_heads·head_dim, or a fused [q | k | v] row's width)
};

// ---- token choice (graph.h Argmax, TopK, Sample; engine/ir/sampling.h defines each exactly) ----

// One block per row: argmax 1024 threads, top_k 512, sample 256. top_k keeps kTopKKeep keys per thread per
// pass (so kTopKThreads · kTopKKeep sort slots) and takes k <= kTopKMax; sample sorts at most
// kSampleCandidates boundary candidates in shared memory.
enum : unsigned {
  kArgmaxThreads = 1024,
  kTopKThreads = 512,
  kTopKKeep = 4,
  kTopKMax = 64,
  kSampleThreads = 256,
  kSampleCandidates = 2048
};

// A long row over few rows splits across blocks (grid y: its parts): at one block a row, a batch-1 pick over
// 151,936 logits leaves all but a few SMs idle and the rest waiting on their loads. Each part scans or keeps its
// top-k over columns [p · span, p · span + span), span = ⌈columns / parts⌉ rounded up to a multiple of 4, and a
// second pass combines the parts in their order. Max, min and the top-k of 64-bit keys are exact under any
// split, so a row's result never depends on its parts. Lowering asks for parts only with at least
// kChoicePartColumns columns each, aiming at kChoiceTargetBlocks blocks in all.
enum : unsigned { kChoiceMaxParts = 32, kChoicePartColumns = 2048, kChoiceTargetBlocks = 264 };

// out[r] = the first index of the largest of x[r, 0 : columns), on the real rows of `kind`.
struct ArgmaxArgs {
  unsigned* out;             // [rows] token ids
  const float* x;            // [rows, ld]
  const unsigned* n;
  unsigned kind;
  unsigned ld;
  unsigned columns;          // 1 <= columns <= ld
};

// ids[r, :k] and values[r, :k]: the k largest of x[r, 0 : columns), descending, ties to the lower id.
struct TopKArgs {
  unsigned* ids;             // [rows, k]
  float* values;             // [rows, k]
  const float* x;            // [rows, ld]
  const unsigned* n;
  unsigned kind;
  unsigned ld;
  unsigned columns;
  unsigned k;                // 1 <= k <= min(columns, kTopKMax)
  // Split rows (kChoiceMaxParts): top_k_parts_f32 writes each part's k largest keys to keys[r, part, :k] (0
  // past a part's columns), top_k_merge_f32_u32 takes the row's k largest of them into ids and values.
  unsigned long long* keys;  // [rows, parts, k]
  unsigned parts;            // 1: one block a row (top_k_f32_u32)
};

// out[p] = sample_token(x[p, 0 : columns), sampling[s], start[s] + prow[p] − cu[s] + fill, stream) for pick
// p of sequence s (pcu[s] <= p < pcu[s + 1]), on the real picks: fill 1 and ir::Stream::kTarget for a
// target's rows, 0 and kDraft for a drafter's block rows.
struct SampleArgs {
  unsigned* out;             // [picks] token ids
  const float* x;            // [picks, ld]
  const unsigned* prow;      // [picks]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* pcu;       // [seqs + 1]
  const unsigned* start;     // [seqs]
  const unsigned* sampling;  // [seqs][4]: temperature and top_p as f32 bits, the seed's low and high words
  const unsigned* n;
  unsigned ld;
  unsigned columns;
  unsigned stream;           // ir::Stream of the draw
  unsigned fill;             // the filled position's offset from the row's
  // Split rows (kChoiceMaxParts): sample_scan_parts_f32 writes each part's scan (the largest choice key, then
  // the smallest finite order key | NaN seen << 32) to scans[p, part, 0..1], and sample_f32_u32 combines them
  // instead of scanning its row.
  unsigned long long* scans;  // [picks, parts, 2]
  unsigned parts;             // 1: sample_f32_u32 scans its row itself
};

// ---- rejection sampling (graph.h RejectSample; engine/ir/reject.h defines it) ----

// A sequence's proposals as kProposalWords index words (index_impl.h fill_proposals): the values' address
// (two words), row stride and width, the candidates' address (two words) and row stride, and the kind.
enum : unsigned { kProposalWords = 8, kProposalNone = 0, kProposalDense = 1, kProposalSparse = 2 };
// Two passes over Sample's ids, in place. reject_sample_f32_u32 (one block of kSampleThreads per pick row)
// writes over each draft row's token kRejectAccepted, or the row's residual sample when its draft is
// rejected; reject_commit_u32 (one thread per sequence) puts the draft tokens in place of the marks up to
// the first rejection and kRejectNone (ir::kNoToken) after it. The last row keeps Sample's token: the bonus.
enum : unsigned { kRejectAccepted = 0xfffffffeu, kRejectNone = 0xffffffffu };
struct RejectSampleArgs {
  unsigned* ids;             // [picks]: Sample's tokens, rewritten in place
  const float* x;            // [picks, ld]: the target's logits
  const unsigned* tokens;    // [tokens]: a sequence's drafts are its rows 1..
  const unsigned* prow;      // [picks]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* pcu;       // [seqs + 1]
  const unsigned* start;     // [seqs]
  const unsigned* sampling;  // [seqs][4], as SampleArgs
  const unsigned* proposals; // [seqs][kProposalWords]
  const unsigned* n;
  unsigned ld;
  unsigned columns;
};

// The decode GEMM (gemm_decode.cu): out[r, :] (= or +=) a[r, :] · wᵀ + bias on the real rows, f16/bf16
// operands, f32 accumulation. A block of kGemmDecodeWarps warps covers kGemmDecodeRows rows (grid x) and
// kGemmDecodeWarps / splits tiles of 16 columns (grid y); splits (1, 2, 4 or 8) and slice_chunks (32-wide
// K chunks per split) come from (k, cols) alone (gemm_decode_split), never from the rows.
enum : unsigned { kGemmDecodeWarps = 8, kGemmDecodeRows = 32 };
struct GemmDecodeArgs {
  void* out;                 // [rows, cols] of the out type
  const void* a;             // [rows, k], rows k elements apart
  const void* w;             // [cols, k]
  const float* bias;         // [cols] or null
  const unsigned* n;
  unsigned kind;
  unsigned k;                // a multiple of 8
  unsigned cols;
  unsigned splits;
  unsigned slice_chunks;
  unsigned accumulate;       // 1: add the prior out (f32 out only)
};

// The streaming GEMM (gemm_stream.cu): out[r, :] (= or +=) a[r, :] · wᵀ for up to kGemmStreamRows real rows,
// f16/bf16 operands, f32 accumulation in mma.sync m16n8k16 steps over K in natural order (16 k a step), one
// chain per output and K slice, the slices summed in slice order, then the prior output: meant to give cuBLASLt's
// bits for the same K split (lowering probes that before it uses it). A block is one tile of kGemmStreamCols
// columns (grid y), a warp per K slice; each lane keeps kGemmStreamDepth steps of its weights in flight in
// registers, and each warp reads its slice of the real rows from dynamic shared memory, where it copied them
// first: `rows` (the bucket's) rows of slice_k * 2 + kGemmStreamRowPad bytes a warp, at most kGemmStreamSmemMax a
// block (lowering keeps to it, so a bucket of many rows of a long K stays on cuBLASLt). Rows past the real ones
// are never read.
enum : unsigned {
  kGemmStreamWarps = 4,  // the most K slices
  kGemmStreamRows = 16,
  kGemmStreamCols = 8,             // a block's tile of output columns
  kGemmStreamDepth = 32,           // k16 steps of weights in flight per lane (256 bytes a step per warp)
  kGemmStreamRowPad = 32,          // a staged row's extra bytes: 8 rows' 8-byte reads of a step in distinct banks
  kGemmStreamSmemMax = 200 * 1024  // a block's staged rows at most (16 rows of k 4,096: 132 KB)
};
struct GemmStreamArgs {
  void* out;                 // [rows, cols] of the out type
  const void* a;             // [rows, k], rows k elements apart
  const void* w;             // [cols, k]
  const unsigned* n;
  unsigned kind;
  unsigned k;                // a multiple of 16
  unsigned cols;
  unsigned splits;           // 1, 2 or 4: the block's warps
  unsigned slice_k;          // K per slice, a multiple of 16
  unsigned accumulate;       // 1: add the prior out (f32 out only)
  unsigned rows;             // 1..16: the bucket's rows
};

// ---- the DFlash 2 selector walk (graph.h SelectorWalk; engine/ir/selector.h defines each step) ----

// One block of kSelectorThreads per sequence walks its pick rows in order: a warp per candidate sums
// its energy's low-rank term; k <= kTopKMax candidates, any rank.
enum : unsigned { kSelectorThreads = 256 };

// ids[p] = cand[p, pick], q[p, :k] = softmax(E / T) (zeros at T = 0) for the picks p of sequence s
// (pcu[s] <= p < pcu[s + 1]), the first one's predecessor tokens[cu[s]], each later one's the previous pick.
struct SelectorWalkArgs {
  unsigned* ids;             // [picks]
  float* q;                  // [picks, k]
  const unsigned* cand;      // [picks, k]
  const float* values;       // [picks, k]
  const float* sel;          // [picks, rank]
  const float* pred;         // [vocab, rank]
  const float* succ;         // [vocab, rank]
  const unsigned* tokens;    // [tokens]
  const unsigned* cu;        // [seqs + 1]
  const unsigned* pcu;       // [seqs + 1]
  const unsigned* prow;      // [picks]
  const unsigned* start;     // [seqs]
  const unsigned* sampling;  // [seqs][4]: temperature and top_p as f32 bits, the seed's low and high words
  const unsigned* n;
  unsigned k;                // 1 <= k <= kTopKMax
  unsigned rank;
  float softcap;             // 0: no soft-capping
  float multiplier;
};

}  // namespace tandem::kernels
