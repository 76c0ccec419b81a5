// Helpers for the CPU backend tests: an in-memory WeightSource, graphs whose Tokens inputs are exact
// copies of given rows (an Embed of the row index), a runner over one backend, and float comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend_impl.h"
#include "engine/ir/executor.h"

namespace tandem::cpu::testing {

class MemorySource final : public WeightSource {
 public:
  void add(const std::string& name, std::vector<uint64_t> shape, std::vector<float> values) {
    tensors_[name] = {std::move(shape), std::move(values)};
  }
  void add_f16(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_half(values[i]);
    half_[name] = {std::move(shape), std::move(bits)};
  }
  Result<TensorView> tensor(std::string_view name) const override {
    if (auto it = tensors_.find(std::string(name)); it != tensors_.end()) {
      return TensorView{it->first, DType::kF32, it->second.first, it->second.second.data()};
    }
    if (auto it = half_.find(std::string(name)); it != half_.end()) {
      return TensorView{it->first, DType::kF16, it->second.first, it->second.second.data()};
    }
    return Error::make(ErrorKind::kNotFound, "tensor {} is not in the test source", name);
  }
  bool contains(std::string_view name) const override {
    return tensors_.count(std::string(name)) > 0 || half_.count(std::string(name)) > 0;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [n, t] : tensors_) out.push_back(n);
    for (const auto& [n, t] : half_) out.push_back(n);
    return out;
  }

 private:
  std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>> tensors_;
  std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<uint16_t>>> half_;
};

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

// A graph under test. Batches built with add_sequence() carry ids 0..T-1, so input() values hold
// exactly the rows given (row r of every input is token r).
struct OpCase {
  ir::Graph graph;
  MemorySource weights;
  ir::Batch batch;

  ir::WeightId weight(const std::string& name, std::vector<uint64_t> shape, std::vector<float> values) {
    weights.add(name, shape, std::move(values));
    return graph.add_weight({name}, std::move(shape));
  }
  // Call after the batch is complete: rows holds tokens × width values.
  ir::Val input(const std::string& name, uint32_t width, std::vector<float> rows) {
    const uint64_t tokens = std::max<uint64_t>(1, batch.tokens());
    rows.resize(tokens * width, 0.0f);
    const ir::WeightId table = weight("in." + name, {tokens, width}, std::move(rows));
    const ir::Val v = graph.add_val(ir::Rows::kTokens, width, name);
    graph.add_op(ir::Embed{table, v});
    return v;
  }
  // Appends a sequence of `len` tokens (ids continue the batch's row numbering).
  void add_sequence(uint32_t len, std::vector<uint32_t> markers = {}, uint8_t qtype = 0) {
    std::vector<uint32_t> ids(len);
    for (uint32_t i = 0; i < len; ++i) ids[i] = batch.tokens() + i;
    batch.add_sequence(ids, markers, qtype);
  }
};

// One backend with its uploaded weights, plans per bucket and (for decoder graphs) a state.
class Runner {
 public:
  Runner(const ir::Graph& graph, const WeightSource& source, size_t threads, Isa isa, uint32_t slots = 0,
         uint32_t capacity = 0)
      : graph_(graph), backend_(make_cpu_backend(threads, isa)) {
    const ir::Graph* graphs[] = {&graph_};
    auto w = backend_->upload(source, graphs);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
    if (w.ok()) weights_ = std::move(w).value();
    if (!graph_.caches.empty()) {
      auto s = backend_->create_state(graph_, slots, capacity);
      EXPECT_TRUE(s.ok());
      if (s.ok()) state_ = std::move(s).value();
    }
  }
  // Runs on a bucket a little larger than the batch, so plans carry rows past the real counts.
  ir::Outputs run(const ir::Batch& batch) {
    ir::Outputs out;
    if (!weights_) return out;
    const ir::Bucket bucket{batch.tokens() + 3, batch.seqs() + 1, batch.num_picks() + 2};
    auto plan = backend_->lower(*weights_, graph_, bucket);
    EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message());
    if (!plan.ok()) return out;
    const Status st = backend_->run(**plan, batch, state_.get(), out);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message());
    return out;
  }
  ir::Backend& backend() { return *backend_; }
  ir::State* state() { return state_.get(); }

 private:
  const ir::Graph& graph_;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<ir::Weights> weights_;
  std::unique_ptr<ir::State> state_;
};

inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kBase, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// |got − want| <= tol · (1 + |want|) for every element, naming the first that is not.
inline void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), tol * (1.0 + std::abs(want[i])))
        << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  }
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace tandem::cpu::testing
