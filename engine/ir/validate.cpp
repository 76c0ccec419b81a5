// Graph validation: operand rows, widths and weight shapes agree for every op.
#include <type_traits>

#include "engine/ir/executor.h"

namespace tandem::ir {
namespace {

class Checker {
 public:
  explicit Checker(const Graph& g) : g_(g) {}

  Status check_val(Val v) const {
    if (v.index >= g_.vals.size()) return fail("value #{} does not exist", v.index);
    return {};
  }
  Status width(Val v, uint64_t want, const char* what) const {
    TANDEM_TRY(check_val(v));
    if (g_.info(v).width != want) {
      return fail("{} '{}' is {} wide, expected {}", what, g_.info(v).name, g_.info(v).width, want);
    }
    return {};
  }
  Status rows(Val v, Rows want, const char* what) const {
    TANDEM_TRY(check_val(v));
    if (g_.info(v).rows != want) {
      return fail("{} '{}' has {} rows, expected {}", what, g_.info(v).name, to_string(g_.info(v).rows),
                  to_string(want));
    }
    return {};
  }
  Status elem(Val v, Elem want, const char* what) const {
    TANDEM_TRY(check_val(v));
    if (g_.info(v).elem != want) {
      return fail("{} '{}' holds {} elements, expected {}", what, g_.info(v).name, to_string(g_.info(v).elem),
                  to_string(want));
    }
    return {};
  }
  // A row-wise choice over x's first `columns` columns (Argmax, TopK, Sample).
  Status choice(Val x, uint32_t columns, Val out, uint32_t k, const char* what) const {
    TANDEM_TRY(same_rows(x, out));
    TANDEM_TRY(elem(out, Elem::kU32, what));
    TANDEM_TRY(width(out, k, what));
    if (columns == 0 || columns > w(x) || k == 0 || k > columns) {
      return fail("{} over {} of the {} columns of '{}' keeps {}", what, columns, w(x), g_.info(x).name, k);
    }
    return {};
  }
  Status same_rows(Val a, Val b) const {
    TANDEM_TRY(check_val(a));
    TANDEM_TRY(check_val(b));
    if (g_.info(a).rows != g_.info(b).rows) {
      return fail("'{}' and '{}' have different rows", g_.info(a).name, g_.info(b).name);
    }
    return {};
  }
  Status weight(WeightId w, std::vector<uint64_t> shape) const {
    if (w.index >= g_.weights.size()) return fail("weight #{} does not exist", w.index);
    if (g_.weight(w).shape != shape) {
      return fail("weight {} is {}, expected {}", g_.weight(w).name(), shape_string(g_.weight(w).shape),
                  shape_string(shape));
    }
    return {};
  }
  Status cache(uint32_t c, uint64_t width) const {
    if (c >= g_.caches.size()) return fail("cache #{} does not exist", c);
    if (g_.caches[c].width != width) {
      return fail("cache {} is {} wide, expected {}", g_.caches[c].name, g_.caches[c].width, width);
    }
    return {};
  }
  uint64_t w(Val v) const { return g_.info(v).width; }

  template <typename... Args>
  Error fail(fmt::format_string<Args...> f, Args&&... args) const {
    return Error(ErrorKind::kInternal, fmt::format(f, std::forward<Args>(args)...));
  }

  Status op(const Op& any) const {
    return std::visit([&](const auto& o) { return check(o); }, any);
  }

 private:
  Status check(const Embed& o) const {
    TANDEM_TRY(rows(o.out, Rows::kTokens, "embed output"));
    if (o.table.index >= g_.weights.size() || g_.weight(o.table).shape.size() != 2) {
      return fail("embed table must be a 2-d weight");
    }
    return width(o.out, g_.weight(o.table).shape[1], "embed output");
  }
  Status check(const LayerNorm& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    TANDEM_TRY(width(o.out, w(o.x), "layer norm output"));
    TANDEM_TRY(weight(o.w, {w(o.x)}));
    if (o.b) TANDEM_TRY(weight(*o.b, {w(o.x)}));
    return {};
  }
  Status check(const RmsNorm& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    TANDEM_TRY(width(o.out, w(o.x), "rms norm output"));
    return weight(o.w, {w(o.x)});
  }
  Status check(const Gemm& o) const {
    TANDEM_TRY(same_rows(o.a, o.out));
    if (o.first_rows) {  // w's first out-width rows
      if (o.w.index >= g_.weights.size()) return fail("weight #{} does not exist", o.w.index);
      const std::vector<uint64_t>& shape = g_.weight(o.w).shape;
      if (shape.size() != 2 || shape[0] < w(o.out) || shape[1] != w(o.a)) {
        return fail("gemm '{}': weight {} is {}, not at least {} rows of {}", g_.info(o.out).name,
                    g_.weight(o.w).name(), shape_string(shape), w(o.out), w(o.a));
      }
    } else {
      TANDEM_TRY(weight(o.w, {w(o.out), w(o.a)}));
    }
    if (o.b) TANDEM_TRY(weight(*o.b, {w(o.out)}));
    return {};
  }
  Status check(const QGemm& o) const {
    TANDEM_TRY(same_rows(o.a, o.out));
    const uint64_t n = w(o.out);
    const uint64_t k = w(o.a);
    if (o.bits != 4 && o.bits != 8) return fail("qgemm '{}': bits {} (4 or 8)", g_.info(o.out).name, o.bits);
    if (o.group == 0 || k % o.group != 0 || (o.bits == 4 && o.group % 2 != 0)) {
      return fail("qgemm '{}': group {} does not divide k = {} into even groups", g_.info(o.out).name, o.group, k);
    }
    TANDEM_TRY(weight(o.w, {n, k * o.bits / 8}));
    if (!g_.weight(o.w).codes) return fail("qgemm weight {} is not marked as codes", g_.weight(o.w).name());
    TANDEM_TRY(weight(o.scales, {n, k / o.group}));
    if (o.b) TANDEM_TRY(weight(*o.b, {n}));
    return {};
  }
  Status check(const Rope& o) const {
    TANDEM_TRY(check_val(o.x));
    if (o.head_dim % 2 != 0 || uint64_t{o.col} + uint64_t{o.heads} * o.head_dim > w(o.x)) {
      return fail("rope on '{}' covers columns past its width", g_.info(o.x).name);
    }
    return {};
  }
  Status check(const GeGlu& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    return width(o.x, 2 * w(o.out), "geglu input");
  }
  Status check(const SwiGlu& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    return width(o.x, 2 * w(o.out), "swiglu input");
  }
  Status check(const Attention& o) const {
    TANDEM_TRY(rows(o.qkv, Rows::kTokens, "attention qkv"));
    TANDEM_TRY(rows(o.out, Rows::kTokens, "attention output"));
    TANDEM_TRY(width(o.qkv, 3ull * o.heads * o.head_dim, "attention qkv"));
    return width(o.out, uint64_t{o.heads} * o.head_dim, "attention output");
  }
  Status check(const AddType& o) const {
    TANDEM_TRY(rows(o.h, Rows::kTokens, "add_type target"));
    if (o.table.index >= g_.weights.size() || g_.weight(o.table).shape.size() != 2) {
      return fail("type table must be a 2-d weight");
    }
    return weight(o.table, {g_.weight(o.table).shape[0], w(o.h)});
  }
  Status check(const PickRows& o) const {
    TANDEM_TRY(rows(o.h, Rows::kTokens, "pick_rows input"));
    TANDEM_TRY(rows(o.out, Rows::kPicks, "pick_rows output"));
    return width(o.out, w(o.h), "pick_rows output");
  }
  Status check(const ActFeatures& o) const {
    TANDEM_TRY(rows(o.h, Rows::kTokens, "act features input"));
    TANDEM_TRY(rows(o.logits, Rows::kPicks, "act features logits"));
    TANDEM_TRY(width(o.logits, 1, "act features logits"));
    TANDEM_TRY(rows(o.out, Rows::kSeqs, "act features output"));
    return width(o.out, w(o.h) + 4, "act features output");
  }
  Status check(const HeadRmsNorm& o) const {
    TANDEM_TRY(check_val(o.x));
    if (uint64_t{o.col} + uint64_t{o.heads} * o.head_dim > w(o.x)) {
      return fail("head norm of {} heads of {} from column {} runs past '{}' ({} wide)", o.heads, o.head_dim, o.col,
                  g_.info(o.x).name, w(o.x));
    }
    return weight(o.w, {o.head_dim});
  }
  Status check(const CacheAppend& o) const {
    TANDEM_TRY(rows(o.k, Rows::kTokens, "cache keys"));
    TANDEM_TRY(rows(o.v, Rows::kTokens, "cache values"));
    if (o.cache >= g_.caches.size()) return fail("cache #{} does not exist", o.cache);
    const uint64_t cw = g_.caches[o.cache].width;
    if (o.k_col + cw > w(o.k) || o.v_col + cw > w(o.v)) {
      return fail("cache {} ({} wide) from column {} of '{}' ({} wide) and {} of '{}' ({} wide) runs past them",
                  g_.caches[o.cache].name, cw, o.k_col, g_.info(o.k).name, w(o.k), o.v_col, g_.info(o.v).name, w(o.v));
    }
    return {};
  }
  Status check(const CacheAttention& o) const {
    TANDEM_TRY(rows(o.q, Rows::kTokens, "cache attention queries"));
    TANDEM_TRY(same_rows(o.q, o.out));
    if (o.kv_heads == 0 || o.q_heads % o.kv_heads != 0) {
      return fail("cache attention: {} query heads do not group over {} key heads", o.q_heads, o.kv_heads);
    }
    if (uint64_t{o.q_col} + uint64_t{o.q_heads} * o.head_dim > w(o.q)) {
      return fail("cache attention queries: {} heads of {} from column {} run past '{}' ({} wide)", o.q_heads,
                  o.head_dim, o.q_col, g_.info(o.q).name, w(o.q));
    }
    TANDEM_TRY(width(o.out, uint64_t{o.q_heads} * o.head_dim, "cache attention output"));
    return cache(o.cache, uint64_t{o.kv_heads} * o.head_dim);
  }
  Status check(const Input& o) const {
    TANDEM_TRY(rows(o.out, Rows::kTokens, "input"));
    return width(o.out, g_.feature_width, "input");
  }
  Status check(const Tap& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    if (uint64_t{o.col} + w(o.x) > w(o.out)) return fail("tap of '{}' runs past its output", g_.info(o.x).name);
    return {};
  }
  Status check(const DynConv& o) const {
    TANDEM_TRY(same_rows(o.x, o.out));
    TANDEM_TRY(same_rows(o.x, o.d));
    TANDEM_TRY(width(o.out, w(o.x), "conv output"));
    if (o.group == 0 || w(o.x) % o.group != 0 || o.stage > 1 || o.taps == 0) {
      return fail("conv on '{}': bad group {}, stage {} or taps {}", g_.info(o.x).name, o.group, o.stage, o.taps);
    }
    TANDEM_TRY(width(o.d, 2ull * o.taps * (w(o.x) / o.group), "conv deltas"));
    return weight(o.base, {2, o.taps, w(o.x)});
  }
  Status check(const Argmax& o) const { return choice(o.x, o.columns, o.out, 1, "argmax output"); }
  Status check(const TopK& o) const {
    TANDEM_TRY(choice(o.x, o.columns, o.ids, o.k, "top_k ids"));
    TANDEM_TRY(same_rows(o.x, o.values));
    return width(o.values, o.k, "top_k values");
  }
  Status check(const Sample& o) const {
    TANDEM_TRY(rows(o.x, Rows::kPicks, "sample input"));
    return choice(o.x, o.columns, o.out, 1, "sample output");
  }
  Status check(const RejectSample& o) const {
    TANDEM_TRY(rows(o.x, Rows::kPicks, "reject_sample logits"));
    TANDEM_TRY(choice(o.x, o.columns, o.ids, 1, "reject_sample ids"));
    return elem(o.x, Elem::kF32, "reject_sample logits");
  }
  Status check(const SelectorWalk& o) const {
    TANDEM_TRY(rows(o.cand, Rows::kPicks, "selector candidates"));
    TANDEM_TRY(elem(o.cand, Elem::kU32, "selector candidates"));
    const uint64_t k = w(o.cand);
    if (k == 0) return fail("selector walk over '{}' has no candidates", g_.info(o.cand).name);
    for (const Val v : {o.values, o.sel, o.ids, o.q}) TANDEM_TRY(same_rows(o.cand, v));
    TANDEM_TRY(width(o.values, k, "selector candidate values"));
    TANDEM_TRY(width(o.q, k, "selector proposal"));
    TANDEM_TRY(width(o.ids, 1, "selector ids"));
    TANDEM_TRY(elem(o.ids, Elem::kU32, "selector ids"));
    TANDEM_TRY(elem(o.q, Elem::kF32, "selector proposal"));
    if (o.predecessor.index >= g_.weights.size()) return fail("weight #{} does not exist", o.predecessor.index);
    const std::vector<uint64_t>& shape = g_.weight(o.predecessor).shape;
    if (shape.size() != 2 || shape[1] != w(o.sel)) {
      return fail("selector codebook {} is {}, expected [vocab, {}] (the width of '{}')",
                  g_.weight(o.predecessor).name(), shape_string(shape), w(o.sel), g_.info(o.sel).name);
    }
    return weight(o.successor, shape);
  }

  const Graph& g_;
};

}  // namespace

Status validate(const Graph& graph) {
  Checker c(graph);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    auto st = c.op(op);
    // Token ids are written by the choice ops only and read by the selector walk and rejection sampling
    // only: every other operand is f32.
    const Uses u = uses(op);
    // (The selector walk reads a TopK's ids and writes ids and q: its check names each element type.)
    // (RejectSample rewrites a Sample's ids in place: its check names both element types.)
    const auto* walk = std::get_if<SelectorWalk>(&op);
    const bool reject = std::holds_alternative<RejectSample>(op);
    const bool writes_ids = std::holds_alternative<Argmax>(op) || std::holds_alternative<TopK>(op) ||
                            std::holds_alternative<Sample>(op) || walk != nullptr || reject;
    for (size_t r = 0; st.ok() && walk == nullptr && !reject && r < u.reads.size(); ++r) {
      st = c.elem(u.reads[r], Elem::kF32, "input");
    }
    if (walk != nullptr && st.ok()) st = c.elem(walk->values, Elem::kF32, "selector candidate values");
    if (walk != nullptr && st.ok()) st = c.elem(walk->sel, Elem::kF32, "selector rows");
    for (size_t k = 0; st.ok() && !writes_ids && k < u.writes.size(); ++k) st = c.elem(u.writes[k], Elem::kF32, "output");
    if (const auto* t = std::get_if<TopK>(&op); st.ok() && t != nullptr) st = c.elem(t->values, Elem::kF32, "top_k values");
    if (!st.ok()) return std::move(st).context(fmt::format("graph op {} ({})", i, op_name(op)));
  }
  for (const Output& o : graph.outputs) {
    if (o.val.index >= graph.vals.size()) return c.fail("output {} names no value", o.name);
  }
  return {};
}

}  // namespace tandem::ir
