// The compat model in plain f64 (reference_model.h): ModernBERT with HF's RoPE angles and windows, the
// norm-first head, the scorer and the act head, one question at a time.
#include "tests/engine/models/decision/reference_model.h"

#include <algorithm>
#include <cmath>

namespace tandem::models::decision::testing {

using Out = Reference::Out;

struct Reference::Impl {
  Impl(const WeightSource& source, const io::ModernBertConfig& enc, const io::LayaAgentConfig& laya)
      : enc_(enc), laya_(laya) {
    for (const std::string& name : source.names()) {
      const std::vector<float> f = source.tensor(name).value().to_f32();
      w_[name] = std::vector<double>(f.begin(), f.end());
    }
  }

  Out forward(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& markers, uint8_t qtype) const {
    const size_t n = ids.size(), d = enc_.hidden_size;
    Out out;
    std::vector<double> feats(d + 4, 0.0);
    if (n > 0) {
      Mat h(n, d);
      for (size_t r = 0; r < n; ++r) {
        for (size_t c = 0; c < d; ++c) h.at(r, c) = w("encoder.embeddings.tok_embeddings.weight")[ids[r] * d + c];
      }
      h = norm(h, "encoder.embeddings.norm", false, enc_.norm_eps);
      for (uint32_t l = 0; l < enc_.num_hidden_layers; ++l) {
        const std::string p = "encoder.layers." + std::to_string(l) + ".";
        const Mat x = l == 0 ? h : norm(h, p + "attn_norm", false, enc_.norm_eps);
        Mat qkv = linear(x, p + "attn.Wqkv.weight", "");
        const bool global = enc_.global_layer[l];
        rope(qkv, 2 * enc_.num_attention_heads, enc_.head_dim, global ? enc_.global_rope_theta : enc_.local_rope_theta);
        const Mat a = attention(qkv, enc_.num_attention_heads, enc_.head_dim,
                                global ? -1 : static_cast<int64_t>(enc_.local_attention / 2));
        add(h, linear(a, p + "attn.Wo.weight", ""));
        const Mat wi = linear(norm(h, p + "mlp_norm", false, enc_.norm_eps), p + "mlp.Wi.weight", "");
        Mat g(n, enc_.intermediate_size);
        for (size_t r = 0; r < n; ++r) {
          for (size_t c = 0; c < g.w; ++c) g.at(r, c) = gelu(wi.at(r, c)) * wi.at(r, g.w + c);
        }
        add(h, linear(g, p + "mlp.Wo.weight", ""));
      }
      h = norm(h, "encoder.final_norm", false, enc_.norm_eps);
      for (size_t r = 0; r < n; ++r) {
        for (size_t c = 0; c < d; ++c) h.at(r, c) += w("type_emb.weight")[qtype * d + c];
      }
      for (uint32_t l = 0; l < laya_.head_layers; ++l) {
        const std::string p = "head.layers." + std::to_string(l) + ".";
        const Mat qkv = linear(norm(h, p + "norm1", true, 1e-5), p + "self_attn.in_proj_weight",
                               p + "self_attn.in_proj_bias");
        add(h, linear(attention(qkv, d / 64, 64, -1), p + "self_attn.out_proj.weight", p + "self_attn.out_proj.bias"));
        Mat f = linear(norm(h, p + "norm2", true, 1e-5), p + "linear1.weight", p + "linear1.bias");
        for (double& v : f.v) v = std::max(0.0, v);
        add(h, linear(f, p + "linear2.weight", p + "linear2.bias"));
      }
      if (!markers.empty()) {
        Mat m(markers.size(), d);
        for (size_t i = 0; i < markers.size(); ++i) {
          for (size_t c = 0; c < d; ++c) m.at(i, c) = h.at(markers[i], c);
        }
        Mat y = linear(norm(m, "scorer.0", true, 1e-5), "scorer.1.weight", "scorer.1.bias");
        for (double& v : y.v) v = gelu(v);
        out.logits = linear(y, "scorer.3.weight", "scorer.3.bias").v;
      }
      for (size_t c = 0; c < d; ++c) feats[c] = h.at(0, c);
    }
    const size_t k = out.logits.size(), kf = std::max<size_t>(k, 2);
    if (k > 0) {
      double mx = -1e300, sum = 0.0;
      for (double z : out.logits) mx = std::max(mx, z);
      for (double z : out.logits) sum += std::exp(z - mx);
      std::vector<double> q;
      for (double z : out.logits) q.push_back(std::exp(z - mx) / sum);
      std::vector<double> sorted = q;
      std::sort(sorted.begin(), sorted.end());
      feats[d] = sorted.back();
      feats[d + 1] = sorted.back() - (k > 1 ? sorted[k - 2] : 0.0);
      double e = 0.0;
      for (double p : q) e -= p * std::log(std::max(p, 1e-9));
      feats[d + 2] = e / std::log(static_cast<double>(kf));
    }
    feats[d + 3] = static_cast<double>(kf) / 255.0;
    Mat f(1, d + 4);
    f.v = feats;
    Mat a = linear(f, "act_head.0.weight", "act_head.0.bias");
    for (double& v : a.v) v = gelu(v);
    const Mat act = linear(a, "act_head.2.weight", "act_head.2.bias");
    out.act = {act.v[0], act.v[1]};
    return out;
  }

  struct Mat {
    size_t r = 0, w = 0;
    std::vector<double> v;
    Mat(size_t rows, size_t width) : r(rows), w(width), v(rows * width, 0.0) {}
    double& at(size_t i, size_t j) { return v[i * w + j]; }
    double at(size_t i, size_t j) const { return v[i * w + j]; }
  };

  const std::vector<double>& w(const std::string& name) const { return w_.at(name); }
  static double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
  static void add(Mat& h, const Mat& y) {
    for (size_t i = 0; i < h.v.size(); ++i) h.v[i] += y.v[i];
  }

  Mat norm(const Mat& x, const std::string& prefix, bool bias, double eps) const {
    Mat y(x.r, x.w);
    for (size_t i = 0; i < x.r; ++i) {
      double mean = 0, var = 0;
      for (size_t c = 0; c < x.w; ++c) mean += x.at(i, c);
      mean /= static_cast<double>(x.w);
      for (size_t c = 0; c < x.w; ++c) var += (x.at(i, c) - mean) * (x.at(i, c) - mean);
      var /= static_cast<double>(x.w);
      for (size_t c = 0; c < x.w; ++c) {
        y.at(i, c) = (x.at(i, c) - mean) / std::sqrt(var + eps) * w(prefix + ".weight")[c] +
                     (bias ? w(prefix + ".bias")[c] : 0.0);
      }
    }
    return y;
  }

  Mat linear(const Mat& x, const std::string& weight, const std::string& bias) const {
    const std::vector<double>& wt = w(weight);
    const size_t n = wt.size() / x.w;
    Mat y(x.r, n);
    for (size_t i = 0; i < x.r; ++i) {
      for (size_t j = 0; j < n; ++j) {
        double s = bias.empty() ? 0.0 : w(bias)[j];
        for (size_t c = 0; c < x.w; ++c) s += x.at(i, c) * wt[j * x.w + c];
        y.at(i, j) = s;
      }
    }
    return y;
  }

  // HF's angles: f32 inverse frequencies times f32 positions; cos and sin in f64.
  static void rope(Mat& x, size_t heads, size_t hd, float theta) {
    for (size_t r = 0; r < x.r; ++r) {
      for (size_t i = 0; i < hd / 2; ++i) {
        const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(hd));
        const double angle = static_cast<float>(r) * inv;
        for (size_t h = 0; h < heads; ++h) {
          const double a = x.at(r, h * hd + i), b = x.at(r, h * hd + i + hd / 2);
          x.at(r, h * hd + i) = a * std::cos(angle) - b * std::sin(angle);
          x.at(r, h * hd + i + hd / 2) = b * std::cos(angle) + a * std::sin(angle);
        }
      }
    }
  }

  static Mat attention(const Mat& qkv, size_t heads, size_t hd, int64_t window) {
    const size_t n = qkv.r, d = heads * hd;
    Mat out(n, d);
    for (size_t h = 0; h < heads; ++h) {
      for (size_t i = 0; i < n; ++i) {
        std::vector<double> p(n, 0.0);
        double mx = -1e300, sum = 0;
        auto visible = [&](size_t j) {
          return window < 0 || std::llabs(static_cast<int64_t>(i) - static_cast<int64_t>(j)) <= window;
        };
        for (size_t j = 0; j < n; ++j) {
          if (!visible(j)) continue;
          double s = 0;
          for (size_t c = 0; c < hd; ++c) s += qkv.at(i, h * hd + c) * qkv.at(j, d + h * hd + c);
          p[j] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, p[j]);
        }
        for (size_t j = 0; j < n; ++j) {
          p[j] = visible(j) ? std::exp(p[j] - mx) : 0.0;
          sum += p[j];
        }
        for (size_t j = 0; j < n; ++j) {
          for (size_t c = 0; c < hd; ++c) out.at(i, h * hd + c) += p[j] / sum * qkv.at(j, 2 * d + h * hd + c);
        }
      }
    }
    return out;
  }

  io::ModernBertConfig enc_;
  io::LayaAgentConfig laya_;
  std::map<std::string, std::vector<double>> w_;
};

Reference::Reference(const WeightSource& source, const io::ModernBertConfig& enc, const io::LayaAgentConfig& laya)
    : impl_(std::make_unique<Impl>(source, enc, laya)) {}
Reference::~Reference() = default;

Reference::Out Reference::forward(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& markers,
                                  uint8_t qtype) const {
  return impl_->forward(ids, markers, qtype);
}

}  // namespace tandem::models::decision::testing
