// Naive double-precision Qwen3 / DFlash forwards (HF Qwen3 semantics, dflash.md §1.3-1.5, §3.2).
#include <cmath>
#include <optional>
#include <string>

#include "tests/engine/models/qwen3/reference_impl.h"

namespace tandem::testing {
namespace {

std::vector<double> get(const WeightSource& w, const std::string& name) {
  auto t = w.tensor(name);
  if (!t.ok()) return {};
  const std::vector<float> f = t->to_f32();
  return std::vector<double>(f.begin(), f.end());
}

std::vector<double> rms(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// y = W x (+ b), W row-major [out, in].
std::vector<double> linear(const std::vector<double>& w, const std::vector<double>& b, const std::vector<double>& x) {
  const size_t in = x.size(), out = w.size() / in;
  std::vector<double> y(out);
  for (size_t o = 0; o < out; ++o) {
    double s = b.empty() ? 0.0 : b[o];
    for (size_t i = 0; i < in; ++i) s += w[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

void head_norm(std::vector<double>& x, const std::vector<double>& w, uint32_t hd, double eps) {
  for (size_t h = 0; h < x.size() / hd; ++h) {
    const auto first = x.begin() + static_cast<ptrdiff_t>(h * hd);
    std::vector<double> part(first, first + hd);
    part = rms(part, w, eps);
    std::copy(part.begin(), part.end(), x.begin() + static_cast<ptrdiff_t>(h * hd));
  }
}

void rope(std::vector<double>& x, uint32_t hd, uint32_t pos, double theta) {
  const uint32_t half = hd / 2;
  for (size_t h = 0; h < x.size() / hd; ++h) {
    double* v = x.data() + h * hd;
    for (uint32_t i = 0; i < half; ++i) {
      const double inv = std::pow(theta, -2.0 * i / hd);
      const double a = pos * inv, c = std::cos(a), s = std::sin(a);
      const double x1 = v[i], x2 = v[i + half];
      v[i] = x1 * c - x2 * s;
      v[i + half] = x2 * c + x1 * s;
    }
  }
}

struct Layer {
  std::vector<double> in_norm, post_norm, q, k, v, o, qn, kn, gate, up, down, qb, kb, vb, ob;
  // v2
  std::vector<double> attn_base, attn_kp, mlp_base, mlp_kp;
};

Layer load_layer(const WeightSource& w, const std::string& p) {
  Layer l;
  l.in_norm = get(w, p + "input_layernorm.weight");
  l.post_norm = get(w, p + "post_attention_layernorm.weight");
  l.q = get(w, p + "self_attn.q_proj.weight");
  l.k = get(w, p + "self_attn.k_proj.weight");
  l.v = get(w, p + "self_attn.v_proj.weight");
  l.o = get(w, p + "self_attn.o_proj.weight");
  l.qn = get(w, p + "self_attn.q_norm.weight");
  l.kn = get(w, p + "self_attn.k_norm.weight");
  l.gate = get(w, p + "mlp.gate_proj.weight");
  l.up = get(w, p + "mlp.up_proj.weight");
  l.down = get(w, p + "mlp.down_proj.weight");
  l.qb = get(w, p + "self_attn.q_proj.bias");
  l.kb = get(w, p + "self_attn.k_proj.bias");
  l.vb = get(w, p + "self_attn.v_proj.bias");
  l.ob = get(w, p + "self_attn.o_proj.bias");
  l.attn_base = get(w, p + "attention_conv.base_kernel");
  l.attn_kp = get(w, p + "attention_conv.kernel_projection.weight");
  l.mlp_base = get(w, p + "mlp_conv.base_kernel");
  l.mlp_kp = get(w, p + "mlp_conv.kernel_projection.weight");
  return l;
}

struct Geometry {
  uint32_t heads, kv, hd;
  double eps, theta;
  std::optional<uint32_t> window;
  bool causal;
};

Geometry geometry(const io::Qwen3Config& c, uint32_t layer, bool causal) {
  Geometry g{c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps, c.rope_theta, std::nullopt,
             causal};
  if (layer < c.sliding_layer.size() && c.sliding_layer[layer]) g.window = c.sliding_window;
  return g;
}

// Softmax attention of query rows over key rows with their positions.
Rows attend(const Geometry& g, const Rows& q, const std::vector<uint32_t>& qpos, const Rows& k, const Rows& v,
            const std::vector<uint32_t>& kpos) {
  Rows out(q.size(), std::vector<double>(size_t{g.heads} * g.hd, 0.0));
  const double scale = 1.0 / std::sqrt(static_cast<double>(g.hd));
  for (size_t r = 0; r < q.size(); ++r) {
    for (uint32_t h = 0; h < g.heads; ++h) {
      const uint32_t kh = h / (g.heads / g.kv);
      std::vector<double> s;
      std::vector<size_t> idx;
      for (size_t j = 0; j < k.size(); ++j) {
        if (g.causal && kpos[j] > qpos[r]) continue;
        const int64_t d = int64_t{qpos[r]} - int64_t{kpos[j]};
        if (g.window && std::llabs(d) >= *g.window) continue;
        double dot = 0;
        for (uint32_t i = 0; i < g.hd; ++i) dot += q[r][h * g.hd + i] * k[j][kh * g.hd + i];
        s.push_back(dot * scale);
        idx.push_back(j);
      }
      double mx = -INFINITY, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (size_t t = 0; t < s.size(); ++t) {
        for (uint32_t i = 0; i < g.hd; ++i) out[r][h * g.hd + i] += s[t] / sum * v[idx[t]][kh * g.hd + i];
      }
    }
  }
  return out;
}

std::vector<double> keys(const Layer& l, const Geometry& g, const std::vector<double>& u, uint32_t pos) {
  std::vector<double> k = linear(l.k, l.kb, u);
  head_norm(k, l.kn, g.hd, g.eps);
  rope(k, g.hd, pos, g.theta);
  return k;
}

std::vector<double> mlp(const Layer& l, const std::vector<double>& u) {
  std::vector<double> gate = linear(l.gate, {}, u), up = linear(l.up, {}, u);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  return linear(l.down, {}, gate);
}

// Pre-norm layer over rows x at positions pos, with extra (context) keys/values before them.
// conv: v2 drafter layers (dflash.md §3.2), taps and group from the config.
struct Conv {
  uint32_t taps = 0, group = 0;
};

Rows conv(const Rows& x, const Rows& d, const std::vector<double>& base, const Conv& c, uint32_t stage) {
  const size_t width = x[0].size(), groups = width / c.group;
  Rows y(x.size(), std::vector<double>(width, 0.0));
  for (size_t t = 0; t < x.size(); ++t) {
    for (size_t ch = 0; ch < width; ++ch) {
      for (uint32_t tau = 0; tau < c.taps && tau <= t; ++tau) {
        const size_t k = stage * c.taps + tau;
        const double coef = base[k * width + ch] + d[t][k * groups + ch / c.group];
        y[t][ch] += coef * x[t - tau][ch];
      }
    }
  }
  return y;
}

void layer_forward(const Layer& l, const Geometry& g, Rows& x, const std::vector<uint32_t>& pos, const Rows& ctx_k,
                   const Rows& ctx_v, const std::vector<uint32_t>& ctx_pos, const Conv& c) {
  const size_t n = x.size();
  Rows u(n), d(n);
  for (size_t r = 0; r < n; ++r) u[r] = rms(x[r], l.in_norm, g.eps);
  if (c.taps) {
    for (size_t r = 0; r < n; ++r) d[r] = linear(l.attn_kp, {}, u[r]);
    u = conv(u, d, l.attn_base, c, 0);
  }
  Rows q(n), k = ctx_k, v = ctx_v;
  std::vector<uint32_t> kpos = ctx_pos;
  for (size_t r = 0; r < n; ++r) {
    q[r] = linear(l.q, l.qb, u[r]);
    head_norm(q[r], l.qn, g.hd, g.eps);
    rope(q[r], g.hd, pos[r], g.theta);
    k.push_back(keys(l, g, u[r], pos[r]));
    v.push_back(linear(l.v, l.vb, u[r]));
    kpos.push_back(pos[r]);
  }
  const Rows y = attend(g, q, pos, k, v, kpos);
  Rows a(n);
  for (size_t r = 0; r < n; ++r) a[r] = linear(l.o, l.ob, y[r]);
  if (c.taps) a = conv(a, d, l.attn_base, c, 1);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < a[r].size(); ++i) x[r][i] += a[r][i];
  }
  Rows u2(n), d2(n);
  for (size_t r = 0; r < n; ++r) u2[r] = rms(x[r], l.post_norm, g.eps);
  if (c.taps) {
    for (size_t r = 0; r < n; ++r) d2[r] = linear(l.mlp_kp, {}, u2[r]);
    u2 = conv(u2, d2, l.mlp_base, c, 0);
  }
  Rows m(n);
  for (size_t r = 0; r < n; ++r) m[r] = mlp(l, u2[r]);
  if (c.taps) m = conv(m, d2, l.mlp_base, c, 1);
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < m[r].size(); ++i) x[r][i] += m[r][i];
  }
}

Rows embed(const WeightSource& w, const std::string& name, const std::vector<uint32_t>& ids, uint32_t h) {
  const std::vector<double> e = get(w, name);
  Rows x;
  for (uint32_t id : ids) x.emplace_back(e.begin() + ptrdiff_t{id} * h, e.begin() + ptrdiff_t{id + 1} * h);
  return x;
}

std::string head_of(const io::Qwen3Config& c) {
  return c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
}

}  // namespace

TargetRef reference_target(const WeightSource& w, const io::Qwen3Config& cfg, const std::vector<uint32_t>& ids) {
  Rows x = embed(w, "model.embed_tokens.weight", ids, cfg.hidden_size);
  std::vector<uint32_t> pos(ids.size());
  for (uint32_t i = 0; i < pos.size(); ++i) pos[i] = i;
  TargetRef out;
  for (uint32_t l = 0; l < cfg.num_hidden_layers; ++l) {
    layer_forward(load_layer(w, "model.layers." + std::to_string(l) + "."), geometry(cfg, l, true), x, pos, {}, {},
                  {}, {});
    out.hidden[l] = x;
  }
  const std::vector<double> norm = get(w, "model.norm.weight"), head = get(w, head_of(cfg));
  for (const auto& row : x) out.logits.push_back(linear(head, {}, rms(row, norm, cfg.rms_norm_eps)));
  return out;
}

BlockRef reference_block(const WeightSource& dw, const io::DFlashConfig& cfg, const WeightSource& tw,
                         const io::Qwen3Config& tcfg, const Rows& taps, uint32_t anchor, uint32_t block) {
  const io::Qwen3Config& c = cfg.layers;
  const std::vector<double> fc = get(dw, "fc.weight"), hn = get(dw, "hidden_norm.weight");
  Rows t;
  for (const auto& row : taps) t.push_back(rms(linear(fc, {}, row), hn, c.rms_norm_eps));
  const uint32_t a = static_cast<uint32_t>(taps.size());
  std::vector<uint32_t> ids(block, cfg.mask_token_id), pos(block), ctx_pos(a);
  ids[0] = anchor;
  for (uint32_t i = 0; i < block; ++i) pos[i] = a + i;
  for (uint32_t i = 0; i < a; ++i) ctx_pos[i] = i;
  Rows x = embed(tw, "model.embed_tokens.weight", ids, tcfg.hidden_size);
  const Conv conv_shape = cfg.version == 2 ? Conv{cfg.conv_kernel_size, cfg.conv_group_size} : Conv{};
  for (uint32_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer layer = load_layer(dw, "layers." + std::to_string(l) + ".");
    // z-lab's rule (dflash/model.py Qwen3DFlashAttention): an explicit is_causal sets every layer, else a
    // sliding_attention layer is causal and a full_attention layer is not.
    const bool sliding = l < c.sliding_layer.size() && c.sliding_layer[l];
    const Geometry g = geometry(c, l, cfg.causal.value_or(sliding));
    Rows ck, cv;
    for (uint32_t j = 0; j < a; ++j) {
      ck.push_back(keys(layer, g, t[j], j));
      cv.push_back(linear(layer.v, layer.vb, t[j]));
    }
    layer_forward(layer, g, x, pos, ck, cv, ctx_pos, conv_shape);
  }
  const std::vector<double> norm = get(dw, "norm.weight"), head = get(tw, head_of(tcfg));
  const std::vector<double> sel = get(dw, "candidate_selector.hidden_projection.weight");
  BlockRef out;
  for (uint32_t r = 1; r < block; ++r) {
    const std::vector<double> h = rms(x[r], norm, c.rms_norm_eps);
    out.logits.push_back(linear(head, {}, h));
    if (!sel.empty()) out.selector.push_back(linear(sel, {}, h));
  }
  return out;
}

}  // namespace tandem::testing
