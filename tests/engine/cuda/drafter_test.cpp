// DFlash v1/v2 drafters on CUDA plans (issue 10): after settling each fixture case's context tap rows,
// block logits (and v2's selector rows) against the CPU backend, FP32 within 1e-4 of max(1, |cpu|) and
// BF16 within the bound below, and FP32 against the PyTorch reference too; a settle from the target's tap
// rows left on the device gives exactly the logits of a settle from the same rows fetched to the host,
// and the device path is the one taken (rows held by another backend are refused, not read). The v2
// selector walk on the device is engine/spec's host walk, greedy and seeded. A context handed to another
// drafter (a drain) drafts the same bits there.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "engine/spec/selector_impl.h"
#include "tests/engine/cuda/drafter_case.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

using json = nlohmann::json;
using models::dflash::BlockOut;
using models::dflash::BlockRows;
using models::dflash::Drafter;
using models::dflash::DrafterOptions;
using models::dflash::SettleRows;

const std::string kRoot = TANDEM_SOURCE_DIR;

// BF16 plans round GEMM operands and activations to 8 significant bits through two drafter layers and the
// LM head; a value is bounded relative to its row's largest (worst measured on the emulator: logits 0.009,
// v2 selector rows 0.017; the bound is ~3x those).
double tolerance(ir::Precision p) { return p == ir::Precision::kF32 ? 1e-4 : 5e-2; }

std::unique_ptr<ir::Backend> cuda_backend(ir::Precision precision) {
  CudaOptions o;
  o.precision = precision;
  auto b = make_cuda_backend(o);
  EXPECT_TRUE(b.ok()) << b.error().message();
  return b.ok() ? std::move(b).value() : nullptr;
}

struct Drafted {
  BlockOut out;
  spec::Walk host;  // v2: engine/spec's host walk over the fetched logits and selector rows
  bool ok = false;
};

// Settles a fixture case's context and drafts its block (v2 walking with `walk`'s temperature and seed),
// fetching the logits, selector rows, candidates and q; v2 also walks the fetched rows on the host.
Drafted settle_and_draft(ir::Backend& backend, const std::string& dir, const std::string& target_dir, const json& c,
                         ir::SamplingParams walk = {}) {
  DraftedCase run = test::settle_and_draft(backend, dir, target_dir, c, CaseDraft{walk});
  Drafted d;
  if (!run.ok) return d;
  d.out = std::move(run.out);
  if (run.drafter->version() == 2) {
    const uint32_t context = c["context_len"], anchor = c["anchor"];
    d.host = spec::select(d.out.logits, d.out.selector, anchor, *run.drafter->codebooks(),
                          spec::selector_params(run.drafter->setup().cfg), walk.temperature, walk.seed, context);
  }
  d.ok = true;
  return d;
}

TEST(CudaDrafter, BlockLogitsAndSelectorRowsMatchTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  auto cpu = cpu::make_cpu_backend(2);
  for (ir::Precision p : {ir::Precision::kF32, ir::Precision::kBF16}) {
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    for (const json& m : ref["drafters"]) {
      const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
      double worst_logits = 0.0, worst_selector = 0.0;
      for (size_t ci = 0; ci < m["cases"].size(); ++ci) {
        const json& c = m["cases"][ci];
        const std::string what = fmt::format("{} case {} at {}", m["dir"].get<std::string>(), ci, ir::to_string(p));
        const Drafted want = settle_and_draft(*cpu, dir, target_dir, c);
        const Drafted got = settle_and_draft(*cuda, dir, target_dir, c);
        ASSERT_TRUE(want.ok && got.ok) << what;
        const bool by_row = p != ir::Precision::kF32;
        worst_logits = std::max(worst_logits, compare_block_rows(got.out.logits, want.out.logits, tolerance(p),
                                                                 by_row, what + " logits"));
        if (p == ir::Precision::kF32) {
          ir::Tensor2 fixture;
          fixture.rows = static_cast<uint32_t>(c["logits"].size());
          fixture.width = static_cast<uint32_t>(c["logits"][0].size());
          for (const json& row : c["logits"]) {
            for (const json& x : row) fixture.data.push_back(x.get<float>());
          }
          compare_block_rows(got.out.logits, fixture, 1e-4, false, what + " logits vs the PyTorch reference");
        }
        if (m["version"].get<uint32_t>() == 2) {
          worst_selector =
              std::max(worst_selector, compare_block_rows(got.out.selector, want.out.selector, tolerance(p), by_row,
                                                          what + " selector rows"));
        } else {
          EXPECT_EQ(got.out.selector.rows, 0u) << what;
        }
      }
      std::cerr << m["dir"].get<std::string>() << " at " << ir::to_string(p) << ": worst logits error "
                << worst_logits << ", selector " << worst_selector << "\n";
    }
  }
}

// The v2 selector walk runs in the block plan (ir::SelectorWalk): its picks are exactly engine/spec's host
// walk over the same plan's logits and selector rows (each step is ir::selector_energy and
// ir::selector_pick, in f64 with the same summation order), greedy and seeded (the same counter-based
// Gumbel draws), and its q over the candidates is the host walk's within 1e-6 (q is stored as FP32; the
// device's exp may differ from the host's in the last f64 bit). On the CPU backend, and on CUDA at FP32
// and BF16; the FP32 plan's picks are also the CPU backend's, token for token.
TEST(CudaDrafter, SelectorWalkOnTheDeviceIsTheHostWalk) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  auto cpu = cpu::make_cpu_backend(2);
  auto f32 = cuda_backend(ir::Precision::kF32);
  auto bf16 = cuda_backend(ir::Precision::kBF16);
  ASSERT_TRUE(f32 != nullptr && bf16 != nullptr);
  const std::vector<ir::SamplingParams> walks{{0.0f, 1.0f, 0}, {0.8f, 1.0f, 11}, {0.8f, 1.0f, 12}, {1.5f, 1.0f, 13}};
  size_t compared = 0, sampled_rows = 0;
  for (const json& m : ref["drafters"]) {
    if (m["version"].get<uint32_t>() != 2) continue;
    const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
    for (size_t ci = 0; ci < m["cases"].size(); ++ci) {
      for (const ir::SamplingParams& walk : walks) {
        std::vector<Drafted> runs;
        for (ir::Backend* b : {cpu.get(), f32.get(), bf16.get()}) {
          runs.push_back(settle_and_draft(*b, dir, target_dir, m["cases"][ci], walk));
        }
        for (size_t bi = 0; bi < runs.size(); ++bi) {
          const Drafted& d = runs[bi];
          const std::string what = fmt::format("case {}, T {}, seed {}, backend {}", ci, walk.temperature, walk.seed,
                                               bi == 0 ? "cpu" : bi == 1 ? "cuda f32" : "cuda bf16");
          ASSERT_TRUE(d.ok) << what;
          ASSERT_EQ(d.out.ids.size(), d.host.path.size()) << what;
          EXPECT_EQ(d.out.ids, d.host.path) << what;
          ASSERT_EQ(d.out.candidates.rows, d.host.path.size()) << what;
          ASSERT_EQ(d.out.proposal.rows, d.host.path.size()) << what;
          for (uint32_t r = 0; r < d.out.candidates.rows; ++r) {
            const spec::Candidates& want = d.host.candidates[r];
            ASSERT_EQ(d.out.candidates.width, want.ids.size()) << what;
            double sum = 0.0;
            for (uint32_t k = 0; k < d.out.candidates.width; ++k) {
              EXPECT_EQ(d.out.candidates.id(r, k), want.ids[k]) << what << ", row " << r << ", candidate " << k;
              const double q = d.out.proposal.at(r, k);
              const double q_host = walk.temperature == 0.0f ? 0.0 : d.host.proposals[r].probs[k];
              EXPECT_NEAR(q, q_host, 1e-6) << what << ", row " << r << ", candidate " << k;
              sum += q;
            }
            if (walk.temperature > 0.0f) {
              EXPECT_NEAR(sum, 1.0, 1e-5) << what << ", row " << r;
              ++sampled_rows;
            }
          }
          ++compared;
        }
        EXPECT_EQ(runs[1].out.ids, runs[0].out.ids) << "case " << ci << ": the FP32 plan's walk is the CPU's";
      }
    }
  }
  EXPECT_GT(compared, 0u) << "no DFlash 2 fixture";
  EXPECT_GT(sampled_rows, 0u);
}

// The target's prompt run leaves its tap rows on the device; the drafter settles from them inside the
// tap sink. The same rows fetched to the host and settled from there give the same bits.
TEST(CudaDrafter, SettlesFromTheTargetsDeviceTapsWithoutTheHost) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  auto cpu = cpu::make_cpu_backend(1);
  for (ir::Precision p : {ir::Precision::kF32, ir::Precision::kBF16}) {
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    for (const json& m : ref["drafters"]) {
      const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
      SCOPED_TRACE(dir + " at " + ir::to_string(p));
      const uint32_t prompt_len = 13, block = 8, capacity = 32;
      auto on_device = Drafter::open(*cuda, dir, target_dir, DrafterOptions{1, capacity, 0, std::nullopt, nullptr});
      auto on_host = Drafter::open(*cuda, dir, target_dir, DrafterOptions{1, capacity, 0, std::nullopt, nullptr});
      ASSERT_TRUE(on_device.ok() && on_host.ok());
      models::qwen3::TargetOptions to;
      to.tap_layers = (*on_device)->target_layer_ids();
      to.capacity = capacity;
      auto target = models::qwen3::Target::open(*cuda, target_dir, to);
      ASSERT_TRUE(target.ok()) << target.error().message();
      std::vector<uint32_t> prompt(prompt_len);
      for (uint32_t i = 0; i < prompt_len; ++i) prompt[i] = (17 * i + 5) % 200;
      const models::qwen3::TargetRows rows{0, prompt, models::qwen3::LogitRows::kLast, {}};
      std::vector<models::qwen3::TargetOut> out;
      uint32_t settled = 0;
      const models::qwen3::TapSink sink = [&](size_t, uint32_t first, const ir::DeviceRows& taps) -> Status {
        EXPECT_EQ(first, settled);
        EXPECT_EQ(taps.owner, cuda.get());
        const SettleRows s{0, {}, taps};
        TANDEM_TRY((*on_device)->settle({&s, 1}));
        // The device path, not a host copy: the same rows said to be another backend's are refused.
        ir::DeviceRows foreign = taps;
        foreign.owner = cpu.get();
        const SettleRows f{0, {}, foreign};
        const Status refused = (*on_host)->settle({&f, 1});
        EXPECT_FALSE(refused.ok());
        if (!refused.ok()) {
          EXPECT_NE(refused.error().message().find("held by another backend"), std::string::npos)
              << refused.error().message();
        }
        settled += taps.rows;
        return {};
      };
      auto st = (*target)->forward({&rows, 1}, out, sink);
      ASSERT_TRUE(st.ok()) << st.error().message();
      EXPECT_EQ(settled, prompt_len);
      ASSERT_TRUE((*target)->cache().crop(0, 0).ok());
      st = (*target)->forward_fetching_taps({&rows, 1}, out);
      ASSERT_TRUE(st.ok()) << st.error().message();
      const SettleRows host{0, out[0].taps.data, {}};
      ASSERT_TRUE((*on_host)->context().crop(0, 0).ok());
      st = (*on_host)->settle({&host, 1});
      ASSERT_TRUE(st.ok()) << st.error().message();
      std::vector<BlockOut> a, b;
      const BlockRows block_rows{0, out[0].ids.id(0, 0)};
      ASSERT_TRUE((*on_device)->draft({&block_rows, 1}, block, a).ok());
      ASSERT_TRUE((*on_host)->draft({&block_rows, 1}, block, b).ok());
      EXPECT_EQ(a[0].logits.data, b[0].logits.data);
      EXPECT_EQ(a[0].selector.data, b[0].selector.data);
      EXPECT_EQ((*on_device)->context().length(0), prompt_len);
    }
  }
}

// A drain hands a drafter context to another rank as f32 rows (CudaState::read_rows / write_rows, through
// decode::CacheSlots): at FP32 and BF16 the rows read back from the drafter that took them are the rows
// that went in, bit for bit, and it drafts the same bits as the drafter that settled them.
TEST(CudaDrafter, AContextHandedOverDraftsTheSameBits) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  const json& m = ref["drafters"][0];
  const json& c = m["cases"][0];
  const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
  const uint32_t a = c["context_len"], block = c["block_size"], anchor = c["anchor"];
  std::optional<uint32_t> width;
  if (c.contains("draft_vocab") && !c["draft_vocab"].is_null()) width = c["draft_vocab"].get<uint32_t>();
  std::vector<float> taps;
  for (const json& row : c["taps"]) {
    for (const json& x : row) taps.push_back(x.get<float>());
  }
  for (ir::Precision p : {ir::Precision::kF32, ir::Precision::kBF16}) {
    SCOPED_TRACE(ir::to_string(p));
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    auto from = Drafter::open(*cuda, dir, target_dir, DrafterOptions{2, a + block, 0, width, nullptr});
    auto to = Drafter::open(*cuda, dir, target_dir, DrafterOptions{2, a + block, 0, width, nullptr});
    ASSERT_TRUE(from.ok() && to.ok());
    const SettleRows settle{0, taps, {}};
    ASSERT_TRUE((*from)->settle({&settle, 1}).ok());
    std::vector<float> rows, back;
    Status s = (*from)->context().export_rows(0, a, rows);
    ASSERT_TRUE(s.ok()) << s.error().message();
    s = (*to)->context().import_rows(1, a, rows);
    ASSERT_TRUE(s.ok()) << s.error().message();
    ASSERT_TRUE((*to)->context().export_rows(1, a, back).ok());
    EXPECT_EQ(back, rows);
    std::vector<BlockOut> want, got;
    const BlockRows at_from{0, anchor, {}}, at_to{1, anchor, {}};
    ASSERT_TRUE((*from)->draft({&at_from, 1}, block, want, true, false).ok());
    ASSERT_TRUE((*to)->draft({&at_to, 1}, block, got, true, false).ok());
    EXPECT_EQ(got[0].logits.data, want[0].logits.data);
    EXPECT_EQ(got[0].ids, want[0].ids);
  }
}

}  // namespace
}  // namespace tandem::cuda::test
