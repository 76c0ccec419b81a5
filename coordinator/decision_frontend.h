// DecisionFrontend: what rank 0 needs of the scorer model to answer HTTP requests without its weights
// on a device: the tokenizer, the compat layout with the checkpoint's budgets and special tokens, the
// vocabulary, and calibration with the checkpoint's temperatures (the same calls `tandem score` makes).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "coordinator/build_layout.h"
#include "engine/core/result.h"
#include "engine/io/tokenizer.h"
#include "engine/models/decision/decision_model.h"

namespace tandem::coordinator {

class DecisionFrontend {
 public:
  // Opens the checkpoint (memory-mapped and validated, never uploaded) and the tokenizer.
  static Result<std::unique_ptr<DecisionFrontend>> load(const config::Model& model);

  const std::string& name() const { return name_; }
  uint32_t vocab() const { return model_->vocab(); }
  const io::LayaAgentConfig& laya() const { return model_->laya(); }
  uint32_t max_sequence_tokens() const { return model_->max_sequence_tokens(); }
  std::string max_sequence_source() const { return model_->max_sequence_source(); }
  const BuildLayout& layout() const { return *layout_; }
  // softmax(logits / T) with T for the question type and option count.
  std::vector<float> probabilities(std::span<const float> logits, uint8_t qtype) const;

 private:
  DecisionFrontend() = default;
  std::string name_;
  std::unique_ptr<models::decision::DecisionModel> model_;
  std::unique_ptr<io::Tokenizer> tokenizer_;
  std::optional<BuildLayout> layout_;
};

}  // namespace tandem::coordinator
