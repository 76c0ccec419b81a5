// The scorer runner (batch_runner.h): DecisionModel + backend + Scorer, warmed up over the serving
// buckets so no request pays for lowering.
#include <fmt/format.h>

#include "engine/models/decision/decision_model.h"
#include "worker/batch_runner.h"

namespace tandem::worker {
namespace {

class ScorerRunner final : public BatchRunner {
 public:
  ScorerRunner(std::string name, ir::BucketTable buckets) : name_(std::move(name)), buckets_(std::move(buckets)) {}

  Status load(const config::Model& model, const config::Backend& backend, const Stopping& stopping) {
    TANDEM_ASSIGN(model_, models::decision::DecisionModel::load(model.dir));
    TANDEM_ASSIGN(backend_, make_rank_backend(backend));
    TANDEM_ASSIGN(scorer_, models::decision::Scorer::create(*model_, *backend_, buckets_));
    return scorer_->warm_up(stopping);
  }

  Result<RunOutput> run(const ir::Batch& batch) override {
    TANDEM_ASSIGN(ir::Bucket bucket,
                  buckets_.smallest("compat", batch.tokens(), batch.seqs(), batch.num_picks()));
    TANDEM_ASSIGN(models::decision::ScoreOutputs out, scorer_->score(batch));
    return RunOutput{bucket, std::move(out.logits), std::move(out.act)};
  }

  RunnerInfo info() const override {
    const ir::Caps caps = backend_->caps();
    return RunnerInfo{"scorer", name_, caps.name, caps.device, scorer_->weight_bytes(), scorer_->plan_bytes(),
                      model_->vocab()};
  }

 private:
  std::string name_;
  ir::BucketTable buckets_;  // the Scorer keeps a reference: it lives as long as this runner
  std::unique_ptr<models::decision::DecisionModel> model_;
  std::unique_ptr<ir::Backend> backend_;
  std::unique_ptr<models::decision::Scorer> scorer_;
};

}  // namespace

Result<std::unique_ptr<BatchRunner>> load_scorer(const config::Model& model, const config::Backend& backend,
                                                 const ir::BucketTable& buckets, const Stopping& stopping) {
  auto runner = std::make_unique<ScorerRunner>(model.name, buckets);
  Status s = runner->load(model, backend, stopping);
  if (!s.ok()) return std::move(s).error().context(fmt::format("loading {} on {}", model.dir, backend.name));
  return std::unique_ptr<BatchRunner>(std::move(runner));
}

}  // namespace tandem::worker
