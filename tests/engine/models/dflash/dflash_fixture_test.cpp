// DFlash v1/v2 drafters in the public z-lab layouts against the PyTorch reference of
// tools/make_dflash_fixture.py (float64 from the saved float32 weights): after settling each case's context
// tap rows, block logits within 1e-4 (relative to max(1, |ref|)), and for v2 the selector's candidates and
// values and the greedy path, also over a reduced draft vocabulary. Each drafter has a causal sliding layer
// and a non-causal full one. Missing fixtures fail.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/spec/selector_impl.h"

namespace tandem::models::dflash {
namespace {

using json = nlohmann::json;

const std::string kRoot = TANDEM_SOURCE_DIR;

json load_reference() {
  const std::string path = kRoot + "/tests/fixtures/dflash/reference.json";
  std::ifstream f(path);
  if (!f) {
    ADD_FAILURE() << "missing fixture " << path << " (tools/make_dflash_fixture.py writes it on the GPU machine)";
    return json();
  }
  return json::parse(f, nullptr, /*allow_exceptions=*/false);
}

double rel_error(double got, double want) { return std::abs(got - want) / std::max(1.0, std::abs(want)); }

TEST(DFlashFixture, BlockLogitsAndSelectorMatchTheReference) {
  const json ref = load_reference();
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters")) << "reference.json is not the expected object";
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  ASSERT_EQ(ref["drafters"].size(), 2u);
  for (const json& m : ref["drafters"]) {
    const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
    SCOPED_TRACE(dir);
    auto backend = cpu::make_cpu_backend(2);
    for (size_t ci = 0; ci < m["cases"].size(); ++ci) {
      const json& c = m["cases"][ci];
      SCOPED_TRACE("case " + std::to_string(ci));
      const uint32_t a = c["context_len"], block = c["block_size"], anchor = c["anchor"];
      std::optional<uint32_t> width;
      if (c.contains("draft_vocab") && !c["draft_vocab"].is_null()) width = c["draft_vocab"].get<uint32_t>();
      auto drafter = Drafter::open(*backend, dir, target_dir, DrafterOptions{1, a + block, 0, width, nullptr});
      ASSERT_TRUE(drafter.ok()) << drafter.error().message();
      Drafter& d = **drafter;
      ASSERT_EQ(d.version(), m["version"].get<uint32_t>());
      // A sliding_attention layer without is_causal is causal (z-lab's rule); the script gives each drafter
      // one next to a full-attention layer.
      ASSERT_EQ(d.setup().cfg.causal_layer, (std::vector<bool>{d.version() == 2, d.version() == 1}))
          << "the fixture predates its causal sliding layer: rerun tools/make_dflash_fixture.py";
      EXPECT_EQ(d.target_layer_ids(), m["tap_layers"].get<std::vector<uint32_t>>());
      std::vector<float> taps;
      for (const json& row : c["taps"]) {
        ASSERT_EQ(row.size(), d.tap_width());
        for (const json& x : row) taps.push_back(x.get<float>());
      }
      ASSERT_EQ(taps.size(), size_t{a} * d.tap_width());
      const SettleRows settle{0, taps};
      ASSERT_TRUE(d.settle({&settle, 1}).ok());
      std::vector<BlockOut> out;
      const BlockRows rows{0, anchor};
      ASSERT_TRUE(d.draft({&rows, 1}, block, out).ok());
      const ir::Tensor2& logits = out[0].logits;
      const json& want = c["logits"];
      ASSERT_EQ(logits.rows, want.size());
      ASSERT_EQ(logits.width, want[0].size());
      for (uint32_t r = 0; r < logits.rows; ++r) {
        for (uint32_t v = 0; v < logits.width; ++v) {
          ASSERT_LE(rel_error(logits.at(r, v), want[r][v].get<double>()), 1e-4) << "row " << r + 1 << " token " << v;
        }
      }
      if (d.version() != 2) continue;
      const spec::Walk w = spec::select(logits, out[0].selector, anchor, *d.codebooks(),
                                        spec::selector_params(d.setup().cfg), 0.0f, 0, a);
      const json& sel = c["selector"];
      for (uint32_t r = 0; r < logits.rows; ++r) {
        EXPECT_EQ(w.candidates[r].ids, sel["candidates"][r].get<std::vector<uint32_t>>()) << "row " << r + 1;
        for (size_t k = 0; k < w.candidates[r].values.size(); ++k) {
          EXPECT_LE(rel_error(w.candidates[r].values[k], sel["values"][r][k].get<double>()), 1e-4);
        }
      }
      EXPECT_EQ(w.path, sel["path"].get<std::vector<uint32_t>>());
    }
  }
}

}  // namespace
}  // namespace tandem::models::dflash
