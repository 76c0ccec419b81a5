// Scorer: a DecisionModel uploaded to a backend, run through an Executor over the "compat" bucket
// stage; and calibrate(), the host-side softmax(z / T) of scorer.md §1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "engine/core/log.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::models::decision {
namespace {
constexpr const char* kStage = "compat";
// Laya divides by max(1e-3, T): a zero or negative temperature never reaches the division.
constexpr double kMinTemperature = 1e-3;
}  // namespace

Scorer::Scorer(const DecisionModel& model, ir::Backend& backend, std::unique_ptr<ir::Weights> weights,
               const ir::BucketTable& table)
    : model_(model),
      backend_(backend),
      weights_(std::move(weights)),
      table_(table),
      executor_(backend, *weights_, model.graph(), table, kStage) {}

Result<std::unique_ptr<Scorer>> Scorer::create(const DecisionModel& model, ir::Backend& backend,
                                               const ir::BucketTable& table) {
  if (table.stage(kStage).empty()) {
    return Error(ErrorKind::kInvalidArgument, "the bucket table has no 'compat' stage for the scorer");
  }
  const ir::Graph* graphs[] = {&model.graph()};
  auto weights = backend.upload(model.weights(), graphs);
  if (!weights.ok()) {
    return std::move(weights).error().context(fmt::format("uploading {} to {}", model.dir(), backend.caps().name));
  }
  return std::unique_ptr<Scorer>(new Scorer(model, backend, std::move(weights).value(), table));
}

Result<ScoreOutputs> Scorer::score(const ir::Batch& batch) {
  TANDEM_TRY(ir::check(batch, model_.batch_limits()));
  ScoreOutputs result;
  if (batch.seqs() == 0) return result;
  TANDEM_TRY(executor_.run(batch, nullptr, out_));
  // Outputs come in the graph's order: logits (markers × 1), then act (sequences × 2).
  const ir::Tensor2& logits = out_.values.at(0);
  const ir::Tensor2& act = out_.values.at(1);
  result.logits = logits.data;
  result.act.resize(act.rows);
  for (uint32_t s = 0; s < act.rows; ++s) result.act[s] = {act.at(s, 0), act.at(s, 1)};
  return result;
}

Status Scorer::warm_up(const std::function<bool()>& stopping) {
  // One line with each bucket's lowering time: on a GPU this is most of a worker's start-up.
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const auto start = Clock::now();
  std::string each;
  const auto& buckets = table_.stage(kStage);
  for (size_t i = 0; i < buckets.size(); ++i) {
    const ir::Bucket& b = buckets[i];
    if (stopping && stopping()) {
      return Error::make(ErrorKind::kCancelled, "stopped while lowering the scorer plans ({} of {} ready)", i,
                         buckets.size());
    }
    const auto t0 = Clock::now();
    TANDEM_TRY(executor_.prepare(b));
    each += fmt::format("{}{} {:.1f} s", each.empty() ? "" : ", ", ir::to_string(b), seconds(Clock::now() - t0));
  }
  log::info("scorer plans on {} lowered in {:.1f} s: {}", backend_.caps().name, seconds(Clock::now() - start), each);
  return {};
}

size_t Scorer::weight_bytes() const { return weights_->bytes(); }
size_t Scorer::plan_bytes() const { return executor_.plan_bytes(); }

std::vector<float> calibrate(std::span<const float> logits, float temperature) {
  const double t = std::max(kMinTemperature, double{temperature});
  std::vector<float> out(logits.size());
  if (logits.empty()) return out;
  double top = -INFINITY;
  for (float z : logits) top = std::max(top, z / t);
  double sum = 0.0;
  for (float z : logits) sum += std::exp(z / t - top);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(std::exp(logits[i] / t - top) / sum);
  return out;
}

float calibrate_statement(float logit, float temperature) {
  const double x = logit / std::max(kMinTemperature, double{temperature});
  // Either branch keeps exp's argument <= 0, so neither overflows.
  const double p = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
  return static_cast<float>(p);
}

}  // namespace tandem::models::decision
