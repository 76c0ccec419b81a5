// One case of the DFlash PyTorch fixture (tests/fixtures/dflash/reference.json) settled and drafted on a
// backend, and the comparison of two backends' block rows: shared by the float and the quantized CUDA
// drafter tests, which check the same drafts against the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/models/dflash/dflash_model.h"

namespace tandem::cuda::test {

inline const std::string kDFlashReference = "/tests/fixtures/dflash/reference.json";

// The fixture under `root`, or null (and a failure) when it is missing.
inline nlohmann::json load_dflash_reference(const std::string& root) {
  const std::string path = root + kDFlashReference;
  std::ifstream f(path);
  if (!f) {
    ADD_FAILURE() << "missing fixture " << path << " (tools/make_dflash_fixture.py writes it)";
    return nlohmann::json();
  }
  return nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
}

// The worst |got − want| / scale over a drafter's fetched rows (block rows 1..B−1). The scale is the row's
// largest |want| (at least 1) when by_row, else max(1, |want|) per element. Fails naming the first element
// past tol.
inline double compare_block_rows(const ir::Tensor2& got, const ir::Tensor2& want, double tol, bool by_row,
                                 const std::string& what) {
  EXPECT_EQ(got.rows, want.rows) << what;
  EXPECT_EQ(got.width, want.width) << what;
  if (got.rows != want.rows || got.width != want.width) return 1e30;
  double worst = 0.0;
  for (uint32_t r = 0; r < want.rows; ++r) {
    double row_scale = 1.0;
    for (uint32_t c = 0; c < want.width; ++c) row_scale = std::max(row_scale, std::fabs(double{want.at(r, c)}));
    for (uint32_t c = 0; c < want.width; ++c) {
      const double w = want.at(r, c);
      const double err = std::fabs(got.at(r, c) - w) / (by_row ? row_scale : std::max(1.0, std::fabs(w)));
      worst = std::max(worst, err);
      if (!(err <= tol)) {
        ADD_FAILURE() << what << ": block row " << r + 1 << " column " << c << " is " << got.at(r, c)
                      << ", expected " << w << " (error " << err << ", bound " << tol << ")";
        return worst;
      }
    }
  }
  return worst;
}

// How a case is drafted: the v2 walk's temperature and seed, the drafter's quantization.
struct CaseDraft {
  ir::SamplingParams walk{};
  std::optional<models::dflash::Quantization> quantization = std::nullopt;
};

struct DraftedCase {
  std::unique_ptr<models::dflash::Drafter> drafter;  // still open: callers read its codebooks or weights
  models::dflash::BlockOut out;                      // logits, selector rows, candidates and q fetched
  bool ok = false;
};

// Opens the drafter in `dir` for its target in `target_dir` on `backend`, settles the case's context tap
// rows and drafts its block from its anchor.
inline DraftedCase settle_and_draft(ir::Backend& backend, const std::string& dir, const std::string& target_dir,
                                    const nlohmann::json& c, const CaseDraft& how = {}) {
  DraftedCase d;
  const uint32_t context = c["context_len"], block = c["block_size"], anchor = c["anchor"];
  std::optional<uint32_t> width;
  if (c.contains("draft_vocab") && !c["draft_vocab"].is_null()) width = c["draft_vocab"].get<uint32_t>();
  const models::dflash::DrafterOptions options{1, context + block, 0, width, nullptr, how.quantization};
  auto drafter = models::dflash::Drafter::open(backend, dir, target_dir, options);
  EXPECT_TRUE(drafter.ok()) << drafter.error().message();
  if (!drafter.ok()) return d;
  d.drafter = std::move(drafter).value();
  std::vector<float> taps;
  for (const nlohmann::json& row : c["taps"]) {
    for (const nlohmann::json& x : row) taps.push_back(x.get<float>());
  }
  const models::dflash::SettleRows settle{0, taps, {}};
  auto st = d.drafter->settle({&settle, 1});
  EXPECT_TRUE(st.ok()) << st.error().message();
  if (!st.ok()) return d;
  std::vector<models::dflash::BlockOut> out;
  const models::dflash::BlockRows rows{0, anchor, how.walk};
  st = d.drafter->draft({&rows, 1}, block, out, /*fetch_logits=*/true, /*fetch_proposals=*/true);
  EXPECT_TRUE(st.ok()) << st.error().message();
  if (!st.ok()) return d;
  d.out = std::move(out[0]);
  d.ok = true;
  return d;
}

}  // namespace tandem::cuda::test
