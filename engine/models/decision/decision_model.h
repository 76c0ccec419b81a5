// The Laya-compat DecisionModel (scorer.md §1-2): loads a checkpoint directory in the public layout
// (model.safetensors, encoder/config.json, rl_agent_config.json), validates every tensor by name and
// shape, and builds its IR graph. Scorer runs it on a backend; calibration turns logits into
// probabilities with the checkpoint's temperatures.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/io/hf_config.h"
#include "engine/io/laya_config.h"
#include "engine/io/safetensors.h"
#include "engine/ir/backend.h"
#include "engine/ir/executor.h"

namespace tandem::models::decision {

// The question type whose one-option form is answered by a sigmoid (io::kQuestionTypes order).
inline constexpr uint8_t kNoul = 2;

struct SpecialTokens {
  uint32_t cls = 0, sep = 0, pad = 0, mask = 0;
};

class DecisionModel {
 public:
  // Loads and validates `dir`. Missing, extra or misshaped tensors are each named with expected and
  // actual shape (all problems in one error, one per line).
  static Result<std::unique_ptr<DecisionModel>> load(const std::string& dir);
  // Same over tensors already in memory (tests).
  static Result<std::unique_ptr<DecisionModel>> from_parts(std::unique_ptr<WeightSource> weights,
                                                           io::ModernBertConfig encoder,
                                                           io::LayaAgentConfig laya);

  const ir::Graph& graph() const { return graph_; }
  const WeightSource& weights() const { return *weights_; }
  const io::ModernBertConfig& encoder() const { return encoder_; }
  const io::LayaAgentConfig& laya() const { return laya_; }
  const SpecialTokens& special() const { return special_; }
  uint32_t vocab() const { return encoder_.vocab_size; }
  uint32_t hidden() const { return encoder_.hidden_size; }
  ir::BatchLimits batch_limits() const;
  // The longest sequence the checkpoint takes: the smaller of rl_agent_config.json's max_len and the
  // encoder's max_position_embeddings; max_sequence_source() names both, for messages.
  uint32_t max_sequence_tokens() const;
  std::string max_sequence_source() const;
  // The calibration temperature for a question type and option count: rl_agent_config's
  // temperature_by_options entry if any, else the checkpoint's `temperature` buffer.
  float temperature(uint8_t qtype, uint32_t options) const;
  // The answer's calibrated probabilities at temperature(qtype, k): softmax(z / T) over the k options,
  // except a noul question with one option (the statement), which answers P(true) = sigmoid(z / T): a
  // softmax over one logit would always be 1.
  std::vector<float> probabilities(uint8_t qtype, std::span<const float> logits) const;
  const std::string& dir() const { return dir_; }

 private:
  DecisionModel() = default;
  std::string dir_;
  std::unique_ptr<WeightSource> weights_;
  io::ModernBertConfig encoder_;
  io::LayaAgentConfig laya_;
  SpecialTokens special_;
  std::array<float, 3> temperature_{};
  ir::Graph graph_;
};

struct ScoreOutputs {
  std::vector<float> logits;              // one per marker, in batch order
  std::vector<std::array<float, 2>> act;  // one pair per sequence
};

// A model uploaded to a backend with an executor over the "compat" bucket stage. One caller at a time.
class Scorer {
 public:
  static Result<std::unique_ptr<Scorer>> create(const DecisionModel& model, ir::Backend& backend,
                                                const ir::BucketTable& table);
  // Checks the batch (ir::check) and runs it; a batch larger than the largest bucket is a kCapacity error.
  Result<ScoreOutputs> score(const ir::Batch& batch);
  // Lowers every bucket of the stage now, so no request pays for lowering. `stopping` (if set) is asked
  // before each bucket: a job told to stop leaves at the next one (kCancelled).
  Status warm_up(const std::function<bool()>& stopping = {});
  const DecisionModel& model() const { return model_; }
  size_t weight_bytes() const;
  size_t plan_bytes() const;

 private:
  Scorer(const DecisionModel& model, ir::Backend& backend, std::unique_ptr<ir::Weights> weights,
         const ir::BucketTable& table);
  const DecisionModel& model_;
  ir::Backend& backend_;
  std::unique_ptr<ir::Weights> weights_;
  const ir::BucketTable& table_;
  ir::Executor executor_;
  ir::Outputs out_;
};

// softmax(logits / temperature), computed in double and rounded to float.
std::vector<float> calibrate(std::span<const float> logits, float temperature);
// sigmoid(logit / temperature), computed in double and rounded to float: P(statement true) of a noul
// question with one option.
float calibrate_statement(float logit, float temperature);

}  // namespace tandem::models::decision
