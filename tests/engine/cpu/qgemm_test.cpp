// Quantized GEMM (ir::QGemm) on the CPU backend: int8 and int4 codes with F16 and BF16 scales at groups 32,
// 64 and 128, every epilogue, against a float64 product with the dequantized matrix; the same bits for any
// row count and thread count; codes of the wrong dtype refused at upload, naming the tensor.
#include <gtest/gtest.h>

#include "engine/cpu/qgemm_impl.h"
#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

// MemorySource plus raw tensors of any dtype (codes, 16-bit scales).
class QuantSource final : public WeightSource {
 public:
  explicit QuantSource(const MemorySource& floats) : floats_(floats) {}
  void add(const std::string& name, DType dtype, std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
    raw_[name] = {dtype, std::move(shape), std::move(bytes)};
  }
  Result<TensorView> tensor(std::string_view name) const override {
    if (auto it = raw_.find(std::string(name)); it != raw_.end()) {
      return TensorView{it->first, it->second.dtype, it->second.shape, it->second.bytes.data()};
    }
    return floats_.tensor(name);
  }
  bool contains(std::string_view name) const override {
    return raw_.count(std::string(name)) > 0 || floats_.contains(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out = floats_.names();
    for (const auto& [n, t] : raw_) out.push_back(n);
    return out;
  }

 private:
  struct Raw {
    DType dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
  };
  const MemorySource& floats_;
  std::map<std::string, Raw> raw_;
};

struct QCase {
  uint32_t m, k, n, bits, group;
  DType scale_dtype;
  ir::Epilogue epilogue;
  bool bias;
};

struct QData {
  std::vector<float> a, b, init;
  std::vector<int32_t> q;       // [n, k] codes
  std::vector<uint16_t> scales;  // [n, k / group] bits
  float scale(const QCase& c, size_t i) const {
    return c.scale_dtype == DType::kBF16 ? bf16_to_float(scales[i]) : half_to_float(scales[i]);
  }
};

QData make_data(const QCase& c, uint32_t seed) {
  QData d{random_values(size_t{c.m} * c.k, seed), random_values(c.n, seed + 1), random_values(size_t{c.m} * c.n,
                                                                                              seed + 2), {}, {}};
  std::mt19937 rng(seed + 3);
  const int32_t lo = c.bits == 8 ? -128 : -8;
  const int32_t hi = c.bits == 8 ? 127 : 7;
  std::uniform_int_distribution<int32_t> code(lo, hi);
  d.q.resize(size_t{c.n} * c.k);
  for (int32_t& x : d.q) x = code(rng);
  // Scales that keep |w| near 0.2 for either code range.
  for (float s : random_values(size_t{c.n} * (c.k / c.group), seed + 4, c.bits == 8 ? 0.003f : 0.05f)) {
    d.scales.push_back(c.scale_dtype == DType::kBF16 ? float_to_bf16(std::abs(s)) : float_to_half(std::abs(s)));
  }
  return d;
}

std::vector<uint8_t> pack_codes(const QCase& c, const QData& d) {
  std::vector<uint8_t> out(size_t{c.n} * c.k * c.bits / 8, 0);
  for (size_t i = 0; i < d.q.size(); ++i) {
    if (c.bits == 8) {
      out[i] = static_cast<uint8_t>(static_cast<int8_t>(d.q[i]));
    } else {
      out[i / 2] = static_cast<uint8_t>(out[i / 2] | ((d.q[i] + 8) << (i % 2 == 0 ? 0 : 4)));
    }
  }
  return out;
}

std::vector<uint8_t> scale_bytes(const QData& d) {
  std::vector<uint8_t> out(d.scales.size() * 2);
  std::memcpy(out.data(), d.scales.data(), out.size());
  return out;
}

std::vector<float> run_qgemm(const QCase& c, const QData& d, size_t threads, DType code_dtype = DType::kF32) {
  OpCase oc;
  oc.add_sequence(c.m);
  const ir::Val a = oc.input("a", c.k, d.a);
  QuantSource source(oc.weights);
  const DType codes = code_dtype != DType::kF32 ? code_dtype : c.bits == 8 ? DType::kI8 : DType::kU8;
  source.add("w.qweight", codes, {c.n, uint64_t{c.k} * c.bits / 8}, pack_codes(c, d));
  source.add("w.scales", c.scale_dtype, {c.n, c.k / c.group}, scale_bytes(d));
  const ir::WeightId w = oc.graph.add_weight({"w.qweight"}, {c.n, uint64_t{c.k} * c.bits / 8});
  oc.graph.weights[w.index].codes = true;
  const ir::WeightId s = oc.graph.add_weight({"w.scales"}, {c.n, c.k / c.group});
  std::optional<ir::WeightId> b;
  if (c.bias) b = oc.weight("b", {c.n}, d.b);
  const ir::Val out = c.epilogue == ir::Epilogue::kAccumulate ? oc.input("out", c.n, d.init)
                                                              : oc.graph.add_val(ir::Rows::kTokens, c.n, "out");
  oc.graph.add_op(ir::QGemm{a, w, s, c.bits, c.group, b, c.epilogue, out});
  oc.graph.add_output("out", out);
  Runner runner(oc.graph, source, threads, best_isa());
  ir::Outputs outs = runner.run(oc.batch);
  return outs.values.empty() ? std::vector<float>{} : outs.values[0].data;
}

// float64 product with W[j, c] = q[j, c] · scale[j, c / group]; `bound` gets the f32 summation error bound
// of each output, 2·(k + 4)·2^-24·(Σ|a·w| + |b| + |init|) (γ_k of the sum, with room for the epilogue).
std::vector<double> naive(const QCase& c, const QData& d, std::vector<double>& bound) {
  std::vector<double> out(size_t{c.m} * c.n);
  bound.assign(out.size(), 0.0);
  const uint32_t groups = c.k / c.group;
  for (uint32_t i = 0; i < c.m; ++i) {
    for (uint32_t j = 0; j < c.n; ++j) {
      double s = 0;
      double mag = 0;
      for (uint32_t kk = 0; kk < c.k; ++kk) {
        const double w = double{d.scale(c, size_t{j} * groups + kk / c.group)} * d.q[size_t{j} * c.k + kk];
        s += double{d.a[size_t{i} * c.k + kk]} * w;
        mag += std::abs(double{d.a[size_t{i} * c.k + kk]} * w);
      }
      if (c.bias) s += d.b[j];
      mag += (c.bias ? std::abs(d.b[j]) : 0.0) + std::abs(d.init[size_t{i} * c.n + j]);
      bound[size_t{i} * c.n + j] = 2.0 * (c.k + 4) * std::ldexp(1.0, -24) * mag;
      double& o = out[size_t{i} * c.n + j];
      switch (c.epilogue) {
        case ir::Epilogue::kNone: o = s; break;
        case ir::Epilogue::kGelu: o = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0))); break;
        case ir::Epilogue::kRelu: o = std::max(0.0, s); break;
        case ir::Epilogue::kAccumulate: o = d.init[size_t{i} * c.n + j] + s; break;
      }
    }
  }
  return out;
}

TEST(CpuQGemm, MatchesFloat64ProductWithTheDequantizedMatrix) {
  uint32_t seed = 1;
  for (uint32_t bits : {8u, 4u}) {
    for (DType sd : {DType::kF16, DType::kBF16}) {
      for (ir::Epilogue ep :
           {ir::Epilogue::kNone, ir::Epilogue::kGelu, ir::Epilogue::kRelu, ir::Epilogue::kAccumulate}) {
        for (QCase c : {QCase{0, 64, 8, bits, 32, sd, ep, true}, QCase{1, 32, 1, bits, 32, sd, ep, false},
                        QCase{1, 384, 33, bits, 64, sd, ep, true}, QCase{16, 256, 17, bits, 128, sd, ep, false},
                        QCase{37, 128, 70, bits, 64, sd, ep, true}}) {
          const QData d = make_data(c, seed++);
          std::vector<double> bound;
          const std::vector<double> want = naive(c, d, bound);
          const std::vector<float> got = run_qgemm(c, d, 2);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_LE(std::abs(got[i] - want[i]), bound[i] + 1e-30)
                << fmt::format("qgemm m={} k={} n={} bits={} group={} scales={} epilogue={} [{}]: got {}, want {}",
                               c.m, c.k, c.n, c.bits, c.group, to_string(sd), static_cast<int>(ep), i, got[i],
                               want[i]);
          }
        }
      }
    }
  }
}

TEST(CpuQGemm, RowBitsIndependentOfRowsAndThreads) {
  for (uint32_t bits : {8u, 4u}) {
    const QCase tall{61, 192, 45, bits, 64, DType::kF16, ir::Epilogue::kNone, true};
    const QData d = make_data(tall, 77);
    const std::vector<float> reference = run_qgemm(tall, d, 1);
    for (size_t threads : {2, 3}) EXPECT_TRUE(same_bits(run_qgemm(tall, d, threads), reference)) << threads;
    QCase one = tall;
    one.m = 1;
    QData d1 = d;
    d1.a.assign(d.a.begin() + size_t{30} * tall.k, d.a.begin() + size_t{31} * tall.k);
    const std::vector<float> want(reference.begin() + size_t{30} * tall.n, reference.begin() + size_t{31} * tall.n);
    EXPECT_TRUE(same_bits(run_qgemm(one, d1, 2), want)) << "bits " << bits;
  }
}

TEST(CpuQGemm, CodeAccessorReadsBothNibbles) {
  const std::vector<uint8_t> codes = {0x0f, 0x80};  // columns 0..3: 15-8, 0-8, 0-8, 8-8
  const QuantMatrix w{1, 4, 4, 4, codes.data(), nullptr};
  EXPECT_EQ(w.code(0, 0), 7);
  EXPECT_EQ(w.code(0, 1), -8);
  EXPECT_EQ(w.code(0, 2), -8);
  EXPECT_EQ(w.code(0, 3), 0);
}

TEST(CpuQGemm, CodesOfTheWrongDtypeAreRefusedNamingTheTensor) {
  const QCase c{2, 64, 4, 4, 32, DType::kF16, ir::Epilogue::kNone, false};
  const QData d = make_data(c, 5);
  OpCase oc;
  oc.add_sequence(c.m);
  const ir::Val a = oc.input("a", c.k, d.a);
  QuantSource source(oc.weights);
  source.add("w.qweight", DType::kI8, {c.n, 32}, pack_codes(c, d));  // int4 codes must be U8
  source.add("w.scales", DType::kF16, {c.n, 2}, scale_bytes(d));
  const ir::WeightId w = oc.graph.add_weight({"w.qweight"}, {c.n, 32});
  oc.graph.weights[w.index].codes = true;
  const ir::WeightId s = oc.graph.add_weight({"w.scales"}, {c.n, 2});
  const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, c.n, "out");
  oc.graph.add_op(ir::QGemm{a, w, s, 4, 32, std::nullopt, ir::Epilogue::kNone, out});
  auto backend = make_cpu_backend(1, best_isa());
  const ir::Graph* graphs[] = {&oc.graph};
  auto up = backend->upload(source, graphs);
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error().message(), "tensor w.qweight [4, 32] is I8, expected U8");
}

TEST(CpuQGemm, ValidateRefusesAGroupThatDoesNotDivideK) {
  ir::Graph g;
  const ir::Val a = g.add_val(ir::Rows::kTokens, 96, "a");
  g.add_op(ir::Input{a});
  g.feature_width = 96;
  const ir::WeightId w = g.add_weight({"w.qweight"}, {4, 96});
  g.weights[w.index].codes = true;
  const ir::WeightId s = g.add_weight({"w.scales"}, {4, 1});
  const ir::Val out = g.add_val(ir::Rows::kTokens, 4, "out");
  g.add_op(ir::QGemm{a, w, s, 8, 64, std::nullopt, ir::Epilogue::kNone, out});
  const Status st = ir::validate(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("qgemm 'out': group 64 does not divide k = 96"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace tandem::cpu::testing
