// The Qwen3 target against HF transformers (float64) on the fixtures of tools/make_qwen3_fixture.py:
// logits of every prompt position within 1e-4 (relative to max(1, |ref|)), tap rows equal to HF's hidden
// states (the residual stream after the layer, as the fixture's layer hooks see it), and greedy
// continuations equal to HF generate token for token. Missing fixtures fail.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/spec/spec.h"

namespace tandem::models::qwen3 {
namespace {

using json = nlohmann::json;

const std::string kRoot = TANDEM_SOURCE_DIR;
constexpr double kTol = 1e-4;

const json& reference() {
  static const json ref = [] {
    std::ifstream f(kRoot + "/tests/fixtures/qwen3/reference.json");
    return f ? json::parse(f, nullptr, /*allow_exceptions=*/false) : json();
  }();
  return ref;
}

// Largest |got − want| / max(1, |want|) over a rows × width table, and where it is.
struct Worst {
  double error = 0.0;
  uint32_t row = 0, col = 0;
};
template <typename Got>
Worst worst(const json& want, uint32_t rows, uint32_t width, const Got& got) {
  Worst w;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t c = 0; c < width; ++c) {
      const double ref = want[r][c].get<double>();
      const double e = std::abs(got(r, c) - ref) / std::max(1.0, std::abs(ref));
      if (e > w.error) w = {e, r, c};
    }
  }
  return w;
}

class Qwen3FixtureTest : public ::testing::TestWithParam<size_t> {};

TEST_P(Qwen3FixtureTest, LogitsTapsAndGreedyMatchHf) {
  const json& ref = reference();
  ASSERT_TRUE(ref.is_object() && ref.contains("models"))
      << "missing or malformed " << kRoot << "/tests/fixtures/qwen3/reference.json (tools/make_qwen3_fixture.py)";
  ASSERT_LT(GetParam(), ref["models"].size());
  const json& m = ref["models"][GetParam()];
  const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
  SCOPED_TRACE(dir);
  const std::vector<uint32_t> taps = m["tap_layers"].get<std::vector<uint32_t>>();
  uint32_t capacity = 0;
  for (const json& c : m["cases"]) {
    capacity = std::max<uint32_t>(capacity, static_cast<uint32_t>(c["prompt"].size()) +
                                                c["max_new_tokens"].get<uint32_t>() + 1);
  }
  auto backend = cpu::make_cpu_backend(2);
  auto target = Target::open(*backend, dir, TargetOptions{taps, 1, capacity, nullptr, true});
  ASSERT_TRUE(target.ok()) << target.error().message();
  Target& t = **target;
  const uint32_t h = t.config().hidden_size;
  ASSERT_FALSE(m["cases"].empty());
  for (size_t ci = 0; ci < m["cases"].size(); ++ci) {
    const json& c = m["cases"][ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    const std::vector<uint32_t> prompt = c["prompt"].get<std::vector<uint32_t>>();
    const uint32_t n = static_cast<uint32_t>(prompt.size());
    ASSERT_TRUE(t.cache().crop(0, 0).ok());
    std::vector<TargetOut> out;
    const TargetRows rows{0, prompt, LogitRows::kAll, {}};
    ASSERT_TRUE(t.forward_fetching_taps({&rows, 1}, out).ok());
    ASSERT_EQ(c["logits"].size(), n);
    ASSERT_EQ(c["logits"][0].size(), out[0].logits.width);
    const Worst wl = worst(c["logits"], n, out[0].logits.width, [&](uint32_t r, uint32_t v) {
      return out[0].logits.at(r, v);
    });
    EXPECT_LE(wl.error, kTol) << "logits: position " << wl.row << ", token " << wl.col;
    for (size_t i = 0; i < taps.size(); ++i) {
      const json& hidden = c["hidden"][std::to_string(taps[i])];
      ASSERT_EQ(hidden.size(), n) << "hidden states of layer " << taps[i];
      const Worst wt = worst(hidden, n, h, [&](uint32_t r, uint32_t j) {
        return out[0].taps.at(r, static_cast<uint32_t>(i) * h + j);
      });
      EXPECT_LE(wt.error, kTol) << "tap of layer " << taps[i] << ": position " << wt.row << ", element " << wt.col;
    }
    // Greedy continuation by HF generate's rules: max_new_tokens, or an EOS id when the reference stopped
    // early (the fixture disables EOS, so it never does).
    const std::vector<uint32_t> greedy = c["greedy"].get<std::vector<uint32_t>>();
    spec::RequestParams params{prompt, c["max_new_tokens"].get<uint32_t>(), {}, {}};
    if (greedy.size() < params.max_tokens) params.stop_ids = t.config().eos_token_ids;
    auto req = spec::make_request(params, 0, t.vocab());
    ASSERT_TRUE(req.ok()) << req.error().message();
    ASSERT_TRUE(spec::generate(t, nullptr, {&*req, 1}, {}).ok());
    EXPECT_EQ(std::vector<uint32_t>(req->generated().begin(), req->generated().end()), greedy) << "greedy";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Qwen3FixtureTest, ::testing::Values(0u, 1u),
                         [](const auto& p) { return p.param == 0 ? std::string("tiny") : std::string("tiny_tied"); });

}  // namespace
}  // namespace tandem::models::qwen3
