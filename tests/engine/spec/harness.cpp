// Harness for the speculative-loop tests.
#include "tests/engine/spec/harness.h"

#include <gtest/gtest.h>

#include "engine/cpu/cpu_backend.h"

namespace tandem::spec::testing {

Harness make_harness(const tandem::testing::TinyTarget& target, const tandem::testing::TinyDrafter* drafter,
                     uint32_t slots, uint32_t capacity, bool host_logits) {
  Harness h;
  h.backend = cpu::make_cpu_backend(2);
  models::qwen3::TargetOptions topt{{}, slots, capacity, nullptr, host_logits};
  if (drafter) topt.tap_layers = drafter->cfg.target_layer_ids;
  auto t = models::qwen3::Target::create(*h.backend, *target.weights, target.cfg, topt, "tiny target");
  EXPECT_TRUE(t.ok()) << t.error().message();
  if (t.ok()) h.target = std::move(t).value();
  if (drafter) {
    models::dflash::DrafterOptions dopt{slots, capacity, 0, std::nullopt, nullptr};
    auto d = models::dflash::Drafter::create(*h.backend, drafter->weights, drafter->cfg, *target.weights,
                                             target.cfg, dopt, "tiny drafter");
    EXPECT_TRUE(d.ok()) << d.error().message();
    if (d.ok()) h.drafter = std::move(d).value();
  }
  return h;
}

namespace {

std::vector<Request> make(const Harness& h, const std::vector<RequestParams>& params, bool batched) {
  std::vector<Request> out;
  for (size_t i = 0; i < params.size(); ++i) {
    auto r = make_request(params[i], batched ? static_cast<uint32_t>(i) : 0, h.target->vocab());
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (r.ok()) out.push_back(std::move(r).value());
  }
  return out;
}

}  // namespace

std::vector<Request> run_batched(Harness& h, const std::vector<RequestParams>& params, bool speculative,
                                 const GenerateOptions& options) {
  std::vector<Request> reqs = make(h, params, true);
  const Status st = generate(*h.target, speculative ? h.drafter.get() : nullptr, reqs, options);
  EXPECT_TRUE(st.ok()) << st.error().message();
  return reqs;
}

std::vector<Request> run_alone(Harness& h, const std::vector<RequestParams>& params, bool speculative,
                               const GenerateOptions& options) {
  std::vector<Request> reqs = make(h, params, false);
  for (Request& r : reqs) {
    const Status st = generate(*h.target, speculative ? h.drafter.get() : nullptr, {&r, 1}, options);
    EXPECT_TRUE(st.ok()) << st.error().message();
  }
  return reqs;
}

std::vector<uint32_t> generated(const Request& r) { return {r.generated().begin(), r.generated().end()}; }

}  // namespace tandem::spec::testing
