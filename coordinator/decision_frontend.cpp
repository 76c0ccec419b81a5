// DecisionFrontend (decision_frontend.h).
#include "coordinator/decision_frontend.h"

namespace tandem::coordinator {

Result<std::unique_ptr<DecisionFrontend>> DecisionFrontend::load(const config::Model& model) {
  std::unique_ptr<DecisionFrontend> f(new DecisionFrontend());
  f->name_ = model.name;
  TANDEM_ASSIGN(f->model_, models::decision::DecisionModel::load(model.dir));
  TANDEM_ASSIGN(f->tokenizer_, io::Tokenizer::load(model.tokenizer));
  const auto& special = f->model_->special();
  const auto& laya = f->model_->laya();
  f->layout_.emplace(*f->tokenizer_, CompatSpecials{special.cls, special.sep, special.mask},
                     CompatBudget{laya.max_len, laya.head_max_len});
  return f;
}

std::vector<float> DecisionFrontend::probabilities(std::span<const float> logits, uint8_t qtype) const {
  return model_->probabilities(qtype, logits);
}

}  // namespace tandem::coordinator
