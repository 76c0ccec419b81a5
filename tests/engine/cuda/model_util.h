// Whole-model helpers for the GPU tests: the decision model tests' tiny random checkpoint, run on the
// CPU reference backend and on CUDA (F32 or F16) through executors over the default bucket table, random
// question batches, and the comparisons of scorer.md §5 (FP32 logits and act; FP16 probabilities).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/ir/executor.h"
#include "tests/engine/cuda/gpu_test_util.h"
#include "engine/models/decision/decision_model.h"
#include "tests/engine/models/decision/decision_test_util.h"

namespace tandem::cuda::test {

namespace decision = models::decision;

// One backend with the model's weights and an executor over the compat stage.
struct Runner {
  std::unique_ptr<ir::Backend> backend;
  std::unique_ptr<ir::Weights> weights;
  std::unique_ptr<ir::Executor> executor;
  ir::Outputs out;

  Status run(const ir::Batch& batch) { return executor->run(batch, nullptr, out); }
  const std::vector<float>& logits() const { return out.values[0].data; }
  const std::vector<float>& act() const { return out.values[1].data; }
};

inline Result<std::unique_ptr<Runner>> make_runner(std::unique_ptr<ir::Backend> backend,
                                                   const decision::DecisionModel& model) {
  auto r = std::make_unique<Runner>();
  r->backend = std::move(backend);
  const ir::Graph* graphs[] = {&model.graph()};
  TANDEM_ASSIGN(r->weights, r->backend->upload(model.weights(), graphs));
  r->executor = std::make_unique<ir::Executor>(*r->backend, *r->weights, model.graph(), ir::BucketTable::defaults(),
                                               "compat");
  return r;
}

// `base` carries the options other than the precision (the attention kernel, GEMM row tiers).
inline Result<std::unique_ptr<Runner>> cuda_runner(const decision::DecisionModel& model, ir::Precision precision,
                                                   CudaOptions base = {}) {
  CudaOptions o = base;
  o.precision = precision;
  // The emulator's timings mean nothing and cost minutes: it picks untimed (gemm_test covers timing).
  if (emulated()) o.gemm_timed = false;
  TANDEM_ASSIGN(auto backend, make_cuda_backend(o));
  return make_runner(std::move(backend), model);
}

inline Result<std::unique_ptr<Runner>> cpu_runner(const decision::DecisionModel& model) {
  return make_runner(cpu::make_cpu_backend(2), model);
}

inline Result<std::unique_ptr<decision::DecisionModel>> tiny_model(uint32_t seed = 1234) {
  const decision::testing::TinyShape shape;
  return decision::DecisionModel::from_parts(decision::testing::to_source(decision::testing::tiny_tensors(shape, seed)),
                                             decision::testing::tiny_encoder(shape),
                                             decision::testing::tiny_laya(shape));
}

// One question: `len` token ids and up to `markers` distinct marker positions.
inline void add_question(ir::Batch& b, std::mt19937& rng, uint32_t vocab, uint32_t len, uint32_t markers) {
  std::vector<uint32_t> ids(len);
  for (auto& id : ids) id = static_cast<uint32_t>(rng() % vocab);
  std::vector<uint32_t> pos(len);
  for (uint32_t i = 0; i < len; ++i) pos[i] = i;
  std::shuffle(pos.begin(), pos.end(), rng);
  pos.resize(std::min(len, markers));
  std::sort(pos.begin(), pos.end());
  b.add_sequence(ids, pos, static_cast<uint8_t>(rng() % 3));
}

inline ir::Batch random_batch(std::mt19937& rng, uint32_t vocab, uint32_t questions, uint32_t max_len,
                              uint32_t max_markers) {
  ir::Batch b;
  for (uint32_t q = 0; q < questions; ++q) {
    add_question(b, rng, vocab, static_cast<uint32_t>(rng() % (max_len + 1)),
                 static_cast<uint32_t>(rng() % (max_markers + 1)));
  }
  return b;
}

// FP32 parity: every logit and act value within tol · max(1, |ref|).
inline void expect_close_outputs(const Runner& got, const Runner& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.logits().size(), ref.logits().size()) << what;
  ASSERT_EQ(got.act().size(), ref.act().size()) << what;
  for (size_t i = 0; i < ref.logits().size(); ++i) {
    ASSERT_LE(std::fabs(got.logits()[i] - ref.logits()[i]), tol * std::max(1.0f, std::fabs(ref.logits()[i])))
        << what << ": logit " << i << " is " << got.logits()[i] << ", reference " << ref.logits()[i];
  }
  for (size_t i = 0; i < ref.act().size(); ++i) {
    ASSERT_LE(std::fabs(got.act()[i] - ref.act()[i]), tol * std::max(1.0f, std::fabs(ref.act()[i])))
        << what << ": act value " << i << " is " << got.act()[i] << ", reference " << ref.act()[i];
  }
}

// FP16 statistics over many questions (scorer.md §5): the largest and mean probability error, and
// argmax disagreements where the reference's top-2 margin exceeds 1e-2.
struct ProbStats {
  double max_err = 0.0, sum_err = 0.0;
  size_t questions = 0, argmax_misses = 0;
  double act_max_err = 0.0;
  std::string worst;

  void add(const decision::DecisionModel& model, const ir::Batch& b, const Runner& got, const Runner& ref) {
    for (uint32_t s = 0; s < b.seqs(); ++s) {
      const uint32_t m0 = b.pcu[s], k = b.pcu[s + 1] - m0;
      for (uint32_t j = 0; j < 2; ++j) {
        act_max_err = std::max(act_max_err, static_cast<double>(std::fabs(got.act()[2 * s + j] - ref.act()[2 * s + j])));
      }
      if (k == 0) continue;
      const float t = model.temperature(b.qtype[s], k);
      const std::vector<float> p = decision::calibrate({got.logits().data() + m0, k}, t);
      const std::vector<float> q = decision::calibrate({ref.logits().data() + m0, k}, t);
      double err = 0.0;
      for (uint32_t i = 0; i < k; ++i) err = std::max(err, static_cast<double>(std::fabs(p[i] - q[i])));
      if (err > max_err) {
        max_err = err;
        worst = "question " + std::to_string(questions) + " (" + std::to_string(k) + " options)";
      }
      sum_err += err;
      ++questions;
      size_t pa = 0, qa = 0;
      for (size_t i = 1; i < k; ++i) {
        if (p[i] > p[pa]) pa = i;
        if (q[i] > q[qa]) qa = i;
      }
      float second = 0.0f;
      for (size_t i = 0; i < k; ++i) {
        if (i != qa) second = std::max(second, q[i]);
      }
      const bool clear = k == 1 || q[qa] - second > 1e-2f;
      if (clear && pa != qa) ++argmax_misses;
    }
  }
  double mean() const { return questions == 0 ? 0.0 : sum_err / static_cast<double>(questions); }
};

}  // namespace tandem::cuda::test
