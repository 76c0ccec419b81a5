// The 16-bit precision pass (kime's rules; see types_impl.h for the why).
#include "engine/cuda/types_impl.h"

#include <variant>

namespace tandem::cuda {

const char* dt_name(Dt t) {
  switch (t) {
    case Dt::kF32: return "f32";
    case Dt::kF16: return "f16";
    case Dt::kBF16: return "bf16";
    case Dt::kU32: return "u32";
  }
  return "?";
}

Dt half_type(ir::Precision precision) {
  switch (precision) {
    case ir::Precision::kF32: return Dt::kF32;
    case ir::Precision::kF16: return Dt::kF16;
    case ir::Precision::kBF16: return Dt::kBF16;
  }
  return Dt::kF32;
}

std::vector<Dt> value_types(const ir::Graph& graph, ir::Precision precision) {
  const size_t n = graph.vals.size();
  const Dt half = half_type(precision);
  std::vector<Dt> ty(n, half);
  for (size_t v = 0; v < n; ++v) {
    if (graph.vals[v].elem == ir::Elem::kU32) ty[v] = Dt::kU32;
  }
  if (half == Dt::kF32) return ty;
  std::vector<bool> half_out(n, false);  // outputs of attention / GeGLU: may stay 16-bit whatever feeds them
  auto f32 = [&](ir::Val v) { ty[v.index] = Dt::kF32; };
  for (const ir::Op& op : graph.ops) {
    if (const auto* e = std::get_if<ir::Embed>(&op)) f32(e->out);
    if (const auto* g = std::get_if<ir::Gemm>(&op); g != nullptr && g->epilogue == ir::Epilogue::kAccumulate) {
      f32(g->out);
    }
    if (const auto* q = std::get_if<ir::QGemm>(&op); q != nullptr && q->epilogue == ir::Epilogue::kAccumulate) {
      f32(q->out);
    }
    if (const auto* t = std::get_if<ir::AddType>(&op)) f32(t->h);
    if (const auto* a = std::get_if<ir::Attention>(&op)) {
      f32(a->qkv);
      half_out[a->out.index] = true;
    }
    if (const auto* gg = std::get_if<ir::GeGlu>(&op)) half_out[gg->out.index] = true;
    if (const auto* af = std::get_if<ir::ActFeatures>(&op)) {
      f32(af->h);
      f32(af->logits);
      f32(af->out);
    }
    if (const auto* am = std::get_if<ir::Argmax>(&op)) f32(am->x);
    if (const auto* tk = std::get_if<ir::TopK>(&op)) {
      f32(tk->x);
      f32(tk->values);
    }
    if (const auto* sm = std::get_if<ir::Sample>(&op)) f32(sm->x);
    if (const auto* rs = std::get_if<ir::RejectSample>(&op)) f32(rs->x);
    if (const auto* sw = std::get_if<ir::SelectorWalk>(&op)) {
      f32(sw->values);
      f32(sw->sel);
      f32(sw->q);
    }
  }
  for (const ir::Output& o : graph.outputs) {
    if (o.placement == ir::Placement::kHost && ty[o.val.index] != Dt::kU32) f32(o.val);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const ir::Op& op : graph.ops) {
      ir::Val in, out;
      if (const auto* g = std::get_if<ir::Gemm>(&op)) {
        in = g->a;
        out = g->out;
      } else if (const auto* q = std::get_if<ir::QGemm>(&op)) {
        in = q->a;
        out = q->out;
      } else if (const auto* m = std::get_if<ir::PickRows>(&op)) {
        in = m->h;
        out = m->out;
      } else {
        continue;
      }
      if (ty[in.index] == Dt::kF32 && ty[out.index] == half && !half_out[out.index]) {
        ty[out.index] = Dt::kF32;
        changed = true;
      }
    }
  }
  return ty;
}

}  // namespace tandem::cuda
