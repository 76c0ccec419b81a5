// Launchers of the token-choice kernel families (steps_impl.h): argmax, top_k, sample, each one block per
// logits row, the DFlash 2 selector walk, one block per sequence, and rejection sampling (a block per row,
// then a thread per sequence). Element types, widths and the column and k limits are checked here, at
// lowering.
#include <algorithm>

#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {
namespace {

Error mismatch(const char* op, const std::string& what) {
  return Error::make(ErrorKind::kUnsupported, "{}: {}", op, what);
}

unsigned row_blocks(const StepContext& c, ir::Rows rows) { return std::max(1u, c.bucket.rows(rows)); }

// FP32 logits x and `width`-wide U32 ids over the same rows, choosing among x's first `columns` columns.
Status check_choice(const char* op, const Loc& x, uint32_t columns, const Loc& ids, uint32_t width) {
  if (x.type != Dt::kF32) return mismatch(op, "logits " + x.describe() + " must be FP32");
  if (ids.type != Dt::kU32 || ids.width != width || ids.rows != x.rows) {
    return mismatch(op, fmt::format("ids {} must be U32, {} wide, over the rows of {}", ids.describe(), width,
                                    x.describe()));
  }
  if (columns == 0 || columns > x.width) {
    return mismatch(op, fmt::format("{} columns of {} (1 to {})", columns, x.describe(), x.width));
  }
  return {};
}

}  // namespace

// INVARIANT (every argument pack in this file): the pointers are arena values or index tables that
// lowering sized for the bucket's rows at the element types and widths checked here, and each kernel
// touches rows below the index header's real counts only.
Result<KernelStep> argmax_step(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out) {
  TANDEM_TRY(check_choice("argmax", x, columns, out, 1));
  KernelStep s;
  s.id = KernelId::argmax_f32_u32;
  s.grid = dim3(row_blocks(c, x.rows));
  s.block = dim3(kernels::kArgmaxThreads);
  s.args = kernels::ArgmaxArgs{static_cast<unsigned*>(out.ptr), static_cast<const float*>(x.ptr), c.ix.n, x.kind(),
                               x.width, columns};
  return s;
}

Result<KernelStep> top_k_step(const StepContext& c, const Loc& x, uint32_t columns, uint32_t k, const Loc& ids,
                              const Loc& values) {
  TANDEM_TRY(check_choice("top_k", x, columns, ids, k));
  if (k == 0 || k > std::min<uint32_t>(columns, kernels::kTopKMax)) {
    return mismatch("top_k", fmt::format("k {} of {} columns of {} (1 to the smaller of the columns and {})", k,
                                         columns, x.describe(), static_cast<unsigned>(kernels::kTopKMax)));
  }
  if (values.type != Dt::kF32 || values.width != k || values.rows != x.rows) {
    return mismatch("top_k", fmt::format("values {} must be FP32, {} wide, over the rows of {}", values.describe(),
                                         k, x.describe()));
  }
  KernelStep s;
  s.id = KernelId::top_k_f32_u32;
  s.grid = dim3(row_blocks(c, x.rows));
  s.block = dim3(kernels::kTopKThreads);
  s.args = kernels::TopKArgs{static_cast<unsigned*>(ids.ptr), static_cast<float*>(values.ptr),
                             static_cast<const float*>(x.ptr), c.ix.n, x.kind(), x.width, columns, k, nullptr, 1};
  return s;
}

Result<KernelStep> sample_step(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out,
                               ir::Stream stream) {
  if (x.rows != ir::Rows::kPicks) return mismatch("sample", "logits " + x.describe() + " must be pick rows");
  TANDEM_TRY(check_choice("sample", x, columns, out, 1));
  KernelStep s;
  s.id = KernelId::sample_f32_u32;
  s.grid = dim3(row_blocks(c, x.rows));
  s.block = dim3(kernels::kSampleThreads);
  s.args = kernels::SampleArgs{static_cast<unsigned*>(out.ptr),
                               static_cast<const float*>(x.ptr),
                               c.ix.prow,
                               c.ix.cu,
                               c.ix.pcu,
                               c.ix.start,
                               c.ix.sampling,
                               c.ix.n,
                               x.width,
                               columns,
                               static_cast<unsigned>(stream),
                               stream == ir::Stream::kDraft ? 0u : 1u,  // graph.h Sample's filled position
                               nullptr,
                               1};
  return s;
}

uint32_t choice_parts(uint32_t rows, uint32_t columns) {
  const uint32_t most = std::min<uint32_t>(kernels::kChoiceMaxParts, columns / kernels::kChoicePartColumns);
  const uint32_t want = (kernels::kChoiceTargetBlocks + std::max(1u, rows) - 1) / std::max(1u, rows);
  return std::max(1u, std::min(most, want));
}

namespace {

// The scratch words a split pass writes for a bucket's rows: sample 2 a part, top_k k a part.
size_t choice_scratch_words(uint32_t rows, uint32_t columns, uint32_t per_part) {
  const uint32_t parts = choice_parts(rows, columns);
  return parts > 1 ? size_t{std::max(1u, rows)} * parts * per_part : 0;
}

// A one-block-a-row step `last` over `rows` bucket rows, split where choice_parts says: a pass of kernel `first`
// over rows × parts blocks writing per_part words a part to scratch (through Args::*out), then `last` (as
// `last_id`) combining them.
template <class Args>
Result<std::vector<KernelStep>> split_rows(const char* op, KernelStep last, KernelId first, KernelId last_id,
                                           uint32_t rows, uint32_t columns, uint32_t per_part,
                                           unsigned long long* Args::*out, void* scratch, size_t scratch_bytes) {
  const uint32_t parts = choice_parts(rows, columns);
  if (parts == 1) return std::vector<KernelStep>{std::move(last)};
  const size_t need = choice_scratch_words(rows, columns, per_part) * sizeof(unsigned long long);
  if (need > scratch_bytes) {
    return mismatch(op, fmt::format("split rows need {} bytes of scratch, the plan has {}", need, scratch_bytes));
  }
  auto& args = std::get<Args>(last.args);
  args.*out = static_cast<unsigned long long*>(scratch);
  args.parts = parts;
  KernelStep pass = last;
  pass.id = first;
  pass.grid = dim3(rows, parts);
  last.id = last_id;
  return std::vector<KernelStep>{std::move(pass), std::move(last)};
}

}  // namespace

size_t choice_scratch_bytes(const ir::Graph& graph, const ir::Bucket& bucket) {
  size_t words = 0;
  for (const ir::Op& op : graph.ops) {
    if (const auto* s = std::get_if<ir::Sample>(&op)) {
      words = std::max(words, choice_scratch_words(bucket.rows(graph.info(s->x).rows), s->columns, 2));
    } else if (const auto* t = std::get_if<ir::TopK>(&op)) {
      words = std::max(words, choice_scratch_words(bucket.rows(graph.info(t->x).rows), t->columns, t->k));
    }
  }
  return words * sizeof(unsigned long long);
}

Result<std::vector<KernelStep>> top_k_steps(const StepContext& c, const Loc& x, uint32_t columns, uint32_t k,
                                            const Loc& ids, const Loc& values, void* scratch, size_t scratch_bytes) {
  TANDEM_ASSIGN(KernelStep one, top_k_step(c, x, columns, k, ids, values));
  return split_rows<kernels::TopKArgs>("top_k", std::move(one), KernelId::top_k_parts_f32,
                                       KernelId::top_k_merge_f32_u32, row_blocks(c, x.rows), columns, k,
                                       &kernels::TopKArgs::keys, scratch, scratch_bytes);
}

Result<std::vector<KernelStep>> sample_steps(const StepContext& c, const Loc& x, uint32_t columns, const Loc& out,
                                             ir::Stream stream, void* scratch, size_t scratch_bytes) {
  TANDEM_ASSIGN(KernelStep one, sample_step(c, x, columns, out, stream));
  return split_rows<kernels::SampleArgs>("sample", std::move(one), KernelId::sample_scan_parts_f32,
                                         KernelId::sample_f32_u32, row_blocks(c, x.rows), columns, 2,
                                         &kernels::SampleArgs::scans, scratch, scratch_bytes);
}

Result<std::vector<KernelStep>> reject_sample_steps(const StepContext& c, const Loc& x, uint32_t columns,
                                                    const Loc& ids) {
  if (x.rows != ir::Rows::kPicks) return mismatch("reject_sample", "logits " + x.describe() + " must be pick rows");
  TANDEM_TRY(check_choice("reject_sample", x, columns, ids, 1));
  const kernels::RejectSampleArgs args{static_cast<unsigned*>(ids.ptr),
                                       static_cast<const float*>(x.ptr),
                                       c.ix.ids,
                                       c.ix.prow,
                                       c.ix.cu,
                                       c.ix.pcu,
                                       c.ix.start,
                                       c.ix.sampling,
                                       c.ix.proposals,
                                       c.ix.n,
                                       x.width,
                                       columns};
  std::vector<KernelStep> steps(2);
  steps[0].id = KernelId::reject_sample_f32_u32;
  steps[0].grid = dim3(row_blocks(c, x.rows));
  steps[0].block = dim3(kernels::kSampleThreads);
  steps[0].args = args;
  // One thread per sequence: a block of 32 covers up to 32 sequences.
  steps[1].id = KernelId::reject_commit_u32;
  steps[1].grid = dim3((row_blocks(c, ir::Rows::kSeqs) + 31) / 32);
  steps[1].block = dim3(32);
  steps[1].args = args;
  return steps;
}

Result<KernelStep> selector_walk_step(const StepContext& c, const Loc& cand, const Loc& values, const Loc& sel,
                                      const float* pred, const float* succ, float softcap, float multiplier,
                                      const Loc& ids, const Loc& q) {
  const char* op = "selector_walk";
  if (cand.rows != ir::Rows::kPicks || cand.type != Dt::kU32) {
    return mismatch(op, "candidates " + cand.describe() + " must be U32 pick rows");
  }
  const uint32_t k = cand.width;
  if (k == 0 || k > kernels::kTopKMax) {
    return mismatch(op, fmt::format("{} candidates of {} (1 to {})", k, cand.describe(),
                                    static_cast<unsigned>(kernels::kTopKMax)));
  }
  for (const Loc* l : {&values, &sel, &q}) {
    if (l->type != Dt::kF32 || l->rows != cand.rows) {
      return mismatch(op, fmt::format("{} must be FP32 over the rows of {}", l->describe(), cand.describe()));
    }
  }
  if (values.width != k || q.width != k) {
    return mismatch(op, fmt::format("values {} and q {} must be {} wide", values.describe(), q.describe(), k));
  }
  if (ids.type != Dt::kU32 || ids.width != 1 || ids.rows != cand.rows) {
    return mismatch(op, fmt::format("ids {} must be U32, 1 wide, over the rows of {}", ids.describe(),
                                    cand.describe()));
  }
  KernelStep s;
  s.id = KernelId::selector_walk_f32_u32;
  s.grid = dim3(row_blocks(c, ir::Rows::kSeqs));
  s.block = dim3(kernels::kSelectorThreads);
  s.args = kernels::SelectorWalkArgs{static_cast<unsigned*>(ids.ptr),
                                     static_cast<float*>(q.ptr),
                                     static_cast<const unsigned*>(cand.ptr),
                                     static_cast<const float*>(values.ptr),
                                     static_cast<const float*>(sel.ptr),
                                     pred,
                                     succ,
                                     c.ix.ids,
                                     c.ix.cu,
                                     c.ix.pcu,
                                     c.ix.prow,
                                     c.ix.start,
                                     c.ix.sampling,
                                     c.ix.n,
                                     k,
                                     sel.width,
                                     softcap,
                                     multiplier};
  return s;
}

}  // namespace tandem::cuda
