// Drafter checkpoints from disk against a target directory: v1 and v2 in the public z-lab layouts load and
// draft like the in-memory model; bad pairs are rejected with clear messages: a missing tensor or
// codebook, a wrong shape, the selector at the top level, a tensor of no known layout, a vocabulary or
// hidden size other than the target's, taps beyond the target's depth, a block size out of range.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"
#include "tests/engine/models/qwen3/reference_impl.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::models::dflash {
namespace {

struct Dirs {
  std::string target, drafter;
};

Dirs write(const testing::TinyTarget& t, const testing::TinyDrafter& d, const std::string& name) {
  Dirs dirs{testing::temp_dir(name + "-target"), testing::temp_dir(name + "-drafter")};
  testing::write_target_dir(dirs.target, t);
  testing::write_drafter_dir(dirs.drafter, d);
  return dirs;
}

std::string open_error(const Dirs& dirs, std::optional<uint32_t> draft_vocab = std::nullopt) {
  auto backend = cpu::make_cpu_backend(1);
  auto d = Drafter::open(*backend, dirs.drafter, dirs.target, DrafterOptions{1, 16, 0, draft_vocab, nullptr});
  return d.ok() ? std::string("opened") : d.error().message();
}

testing::DrafterShape shape(uint32_t version) {
  testing::DrafterShape s;
  s.version = version;
  s.mask = 47;
  return s;
}

void drop(testing::TinyDrafter& d, const std::string& name) {
  std::erase_if(d.tensors, [&](const io::HostTensor& x) { return x.name == name; });
}

class DrafterCheckpointTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  testing::TinyTarget target_ = testing::random_target({}, 51);
  testing::TinyDrafter drafter_ = testing::random_drafter(target_.cfg, shape(GetParam()), 52);
};

TEST_P(DrafterCheckpointTest, LoadsAndDraftsLikeTheModelInMemory) {
  const Dirs dirs = write(target_, drafter_, "dflash-ok");
  auto backend = cpu::make_cpu_backend(1);
  auto disk = Drafter::open(*backend, dirs.drafter, dirs.target, DrafterOptions{1, 16, 0, std::nullopt, nullptr});
  ASSERT_TRUE(disk.ok()) << disk.error().message();
  auto memory = Drafter::create(*backend, drafter_.weights, drafter_.cfg, *target_.weights, target_.cfg,
                                DrafterOptions{1, 16, 0, std::nullopt, nullptr}, "memory");
  ASSERT_TRUE(memory.ok()) << memory.error().message();
  EXPECT_EQ((*disk)->version(), GetParam());
  std::vector<float> taps(size_t{(*disk)->tap_width()} * 3, 0.5f);
  const SettleRows settle{0, taps};
  const BlockRows block{0, 4};
  std::vector<BlockOut> a, b;
  for (Drafter* d : {disk->get(), memory->get()}) ASSERT_TRUE(d->settle({&settle, 1}).ok());
  ASSERT_TRUE((*disk)->draft({&block, 1}, 4, a).ok());
  ASSERT_TRUE((*memory)->draft({&block, 1}, 4, b).ok());
  EXPECT_EQ(a[0].logits.data, b[0].logits.data);
  EXPECT_EQ(a[0].selector.data, b[0].selector.data);
}

// Public drafters ship BF16: read from disk, they draft what the double-precision reference computes from
// the same BF16 values.
TEST_P(DrafterCheckpointTest, LoadsBf16WeightsAndDraftsLikeTheReference) {
  for (io::HostTensor& t : drafter_.tensors) {
    auto view = drafter_.weights->tensor(t.name);
    ASSERT_TRUE(view.ok());
    t = io::HostTensor::from_f32(t.name, t.shape, view->to_f32(), DType::kBF16);
  }
  auto bf16 = std::make_shared<io::HostTensors>();
  for (const io::HostTensor& t : drafter_.tensors) bf16->add(t);
  const Dirs dirs = write(target_, drafter_, "dflash-bf16");
  auto backend = cpu::make_cpu_backend(1);
  auto d = Drafter::open(*backend, dirs.drafter, dirs.target, DrafterOptions{1, 16, 0, std::nullopt, nullptr});
  ASSERT_TRUE(d.ok()) << d.error().message();
  testing::Rand r(4);
  std::vector<float> taps(size_t{(*d)->tap_width()} * 3);
  for (float& x : taps) x = r.symmetric(1.5f);
  const SettleRows settle{0, taps};
  ASSERT_TRUE((*d)->settle({&settle, 1}).ok());
  std::vector<BlockOut> out;
  const BlockRows block{0, 4};
  ASSERT_TRUE((*d)->draft({&block, 1}, 5, out).ok());
  testing::Rows rows;
  for (size_t i = 0; i < 3; ++i) {
    rows.emplace_back(taps.begin() + static_cast<ptrdiff_t>(i * (*d)->tap_width()),
                      taps.begin() + static_cast<ptrdiff_t>((i + 1) * (*d)->tap_width()));
  }
  const testing::BlockRef ref =
      testing::reference_block(*bf16, drafter_.cfg, *target_.weights, target_.cfg, rows, 4, 5);
  ASSERT_EQ(out[0].logits.rows, ref.logits.size());
  for (uint32_t i = 0; i < out[0].logits.rows; ++i) {
    for (uint32_t v = 0; v < out[0].logits.width; ++v) {
      ASSERT_NEAR(out[0].logits.at(i, v), ref.logits[i][v], 1e-4 * std::max(1.0, std::abs(ref.logits[i][v])))
          << "row " << i + 1 << " token " << v;
    }
  }
}

TEST_P(DrafterCheckpointTest, RejectsAMissingTensor) {
  drop(drafter_, "layers.1.self_attn.k_norm.weight");
  const std::string e = open_error(write(target_, drafter_, "dflash-missing"));
  EXPECT_NE(e.find("tensor 'layers.1.self_attn.k_norm.weight' is missing (expected shape [8])"), std::string::npos)
      << e;
}

TEST_P(DrafterCheckpointTest, RejectsAWrongShape) {
  drop(drafter_, "fc.weight");
  drafter_.tensors.push_back(io::HostTensor::from_f32("fc.weight", {32, 63}, std::vector<float>(32 * 63, 0.0f)));
  const std::string e = open_error(write(target_, drafter_, "dflash-shape"));
  EXPECT_NE(e.find("tensor 'fc.weight' has shape [32, 63], expected [32, 64]"), std::string::npos) << e;
}

TEST_P(DrafterCheckpointTest, RejectsTapsBeyondTheTargetsDepth) {
  drafter_.config.erase("num_target_layers");
  drafter_.config["dflash_config"]["target_layer_ids"] = {1, 9};
  const std::string e = open_error(write(target_, drafter_, "dflash-taps"));
  EXPECT_NE(e.find("dflash_config.target_layer_ids[1] = 9 is beyond the target's 4 layers"), std::string::npos) << e;
}

TEST_P(DrafterCheckpointTest, RejectsAVocabularyOtherThanTheTargets) {
  drafter_.config["vocab_size"] = 64;
  const Dirs dirs = write(target_, drafter_, "dflash-vocab-size");
  const std::string e = open_error(dirs);
  EXPECT_NE(e.find(dirs.drafter + "/config.json: vocab_size 64 differs from the target's vocab_size 48 in " +
                   dirs.target + "/config.json"),
            std::string::npos)
      << e;
}

TEST_P(DrafterCheckpointTest, RejectsAMaskIdOutsideTheTargetsVocabulary) {
  // A parsed config keeps its mask id inside its own vocabulary, which must be the target's: only a config
  // built in code can reach this check.
  io::DFlashConfig cfg = drafter_.cfg;
  cfg.mask_token_id = 50;
  const auto s = make_setup(cfg, target_.cfg, *drafter_.weights, DrafterOptions{}, "d");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "d: dflash_config.mask_token_id 50 is outside the target's vocabulary of 48 tokens");
}

TEST_P(DrafterCheckpointTest, RejectsATargetHiddenSizeOtherThanTheTargets) {
  drafter_.config["target_hidden_size"] = 40;
  const std::string e = open_error(write(target_, drafter_, "dflash-target-hidden"));
  EXPECT_NE(e.find("target_hidden_size 40 differs from the target's hidden_size 32"), std::string::npos) << e;
}

TEST_P(DrafterCheckpointTest, RejectsAHiddenSizeOtherThanTheTargets) {
  testing::TargetShape wide;
  wide.hidden = 48;
  const testing::TinyTarget other = testing::random_target(wide, 53);
  const testing::TinyDrafter d = testing::random_drafter(other.cfg, shape(GetParam()), 54);
  const std::string e = open_error(write(target_, d, "dflash-hidden"));
  EXPECT_NE(e.find("drafter hidden_size 48 differs from the target's hidden_size 32"), std::string::npos) << e;
}

TEST_P(DrafterCheckpointTest, RejectsABlockSizeOutsideWhatTheBucketsHold) {
  const Dirs dirs = write(target_, drafter_, "dflash-block");
  auto backend = cpu::make_cpu_backend(1);
  auto d = Drafter::open(*backend, dirs.drafter, dirs.target, DrafterOptions{1, 64, 17, std::nullopt, nullptr});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(), dirs.drafter + ": block size 17 is not in 2..16 (a block drafts B − 1 tokens; the "
                                                "'drafter' buckets hold blocks of at most 16 rows per sequence)");
  drafter_.config["block_size"] = 32;  // the config's own, with no option to override it
  const Dirs big = write(target_, drafter_, "dflash-block-config");
  d = Drafter::open(*backend, big.drafter, big.target, DrafterOptions{1, 64, 0, std::nullopt, nullptr});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find(": the config's block_size 32 is not in 2..16"), std::string::npos)
      << d.error().message();
  // A table whose 'drafter' buckets hold longer blocks allows them.
  auto table = ir::BucketTable::parse("drafter 64 2 64\ndrafter 40 1 39\n", "test buckets");
  ASSERT_TRUE(table.ok()) << table.error().message();
  EXPECT_EQ(max_block_size(*table), 40u);
  d = Drafter::open(*backend, big.drafter, big.target, DrafterOptions{1, 64, 0, std::nullopt, &*table});
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ((*d)->block_size(), 32u);
}

TEST_P(DrafterCheckpointTest, IgnoresAnEmbeddingAndHeadOfItsOwn) {
  const uint64_t h = 32, v = 48;
  drafter_.tensors.push_back(io::HostTensor::from_f32("embed_tokens.weight", {v, h}, std::vector<float>(v * h, 1.0f)));
  drafter_.tensors.push_back(io::HostTensor::from_f32("lm_head.weight", {v, h}, std::vector<float>(v * h, 1.0f)));
  EXPECT_EQ(open_error(write(target_, drafter_, "dflash-own-head")), "opened");
}

TEST_P(DrafterCheckpointTest, RefusesATensorOfNoKnownLayout) {
  drafter_.tensors.push_back(io::HostTensor::from_f32("d2t", {48}, std::vector<float>(48, 0.0f)));
  const std::string e = open_error(write(target_, drafter_, "dflash-unknown"));
  EXPECT_NE(e.find(fmt::format("tensor 'd2t' [48] is not part of the DFlash {} layout that tandem runs (z-lab {})",
                               GetParam(), GetParam() == 2 ? "DFlash2DraftModel" : "DFlashDraftModel")),
            std::string::npos)
      << e;
}

TEST_P(DrafterCheckpointTest, RejectsADraftVocabularyLargerThanTheTargets) {
  const std::string e = open_error(write(target_, drafter_, "dflash-vocab"), 49u);
  EXPECT_NE(e.find("draft vocabulary 49 is not in 1..48"), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(Versions, DrafterCheckpointTest, ::testing::Values(1u, 2u),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

void rename(testing::TinyDrafter& d, const std::string& from, const std::string& to) {
  for (io::HostTensor& t : d.tensors) {
    if (t.name == from) t.name = to;
  }
}

// The selector under "candidate_selector.", the codebooks bare or with ".weight", as z-lab's
// DFlash2DraftModel.from_pretrained and vLLM's qwen3_dflash2.py load them.
TEST(DrafterCheckpoint, LoadsTheSelectorCodebooksWithOrWithoutWeightSuffix) {
  const testing::TinyTarget target = testing::random_target({}, 55);
  const std::string pred = "candidate_selector.predecessor_codebook", succ = "candidate_selector.successor_codebook";
  for (const bool suffix : {false, true}) {
    testing::TinyDrafter d = testing::random_drafter(target.cfg, shape(2), 56);
    rename(d, pred, suffix ? pred + ".weight" : pred);
    rename(d, succ + ".weight", suffix ? succ + ".weight" : succ);
    const Dirs dirs = write(target, d, suffix ? "dflash-suffix" : "dflash-bare");
    auto backend = cpu::make_cpu_backend(1);
    auto drafter = Drafter::open(*backend, dirs.drafter, dirs.target, DrafterOptions{1, 16, 0, std::nullopt, nullptr});
    ASSERT_TRUE(drafter.ok()) << drafter.error().message();
    EXPECT_EQ((*drafter)->setup().predecessor, suffix ? pred + ".weight" : pred);
    EXPECT_EQ((*drafter)->setup().successor, suffix ? succ + ".weight" : succ);
    EXPECT_EQ((*drafter)->setup().hidden_projection, "candidate_selector.hidden_projection.weight");
    ASSERT_NE((*drafter)->codebooks(), nullptr);
    EXPECT_EQ((*drafter)->codebooks()->rank(), 6u);
  }
}

TEST(DrafterCheckpoint, RefusesTheSelectorAtTheTopLevel) {
  const testing::TinyTarget target = testing::random_target({}, 55);
  testing::TinyDrafter d = testing::random_drafter(target.cfg, shape(2), 56);
  rename(d, "candidate_selector.hidden_projection.weight", "hidden_projection.weight");
  std::string e = open_error(write(target, d, "dflash-old-projection"));
  EXPECT_NE(e.find("tensor 'candidate_selector.hidden_projection.weight' is missing (expected shape [6, 32]); the "
                   "checkpoint has 'hidden_projection.weight' at the top level, which no public DFlash 2 checkpoint "
                   "does (they keep the selector under 'candidate_selector.')"),
            std::string::npos)
      << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  rename(d, "candidate_selector.predecessor_codebook", "predecessor_codebook.weight");
  e = open_error(write(target, d, "dflash-old-codebook"));
  EXPECT_NE(e.find("tensor 'candidate_selector.predecessor_codebook' (or "
                   "'candidate_selector.predecessor_codebook.weight') is missing (expected shape [48, 6]); the "
                   "checkpoint has 'predecessor_codebook.weight' at the top level"),
            std::string::npos)
      << e;
}

TEST(DrafterCheckpoint, RejectsAMissingOrMisshapedCodebook) {
  const testing::TinyTarget target = testing::random_target({}, 55);
  testing::TinyDrafter d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "candidate_selector.predecessor_codebook");
  std::string e = open_error(write(target, d, "dflash-codebook"));
  EXPECT_NE(e.find("tensor 'candidate_selector.predecessor_codebook' (or "
                   "'candidate_selector.predecessor_codebook.weight') is missing (expected shape [48, 6])"),
            std::string::npos)
      << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "candidate_selector.successor_codebook.weight");
  d.tensors.push_back(io::HostTensor::from_f32("candidate_selector.successor_codebook", {47, 6},
                                               std::vector<float>(47 * 6, 0.0f)));
  e = open_error(write(target, d, "dflash-codebook-shape"));
  EXPECT_NE(e.find("tensor 'candidate_selector.successor_codebook' has shape [47, 6], expected [48, 6]"),
            std::string::npos)
      << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "candidate_selector.hidden_projection.weight");
  d.tensors.push_back(io::HostTensor::from_f32("candidate_selector.hidden_projection.weight", {6, 31},
                                               std::vector<float>(6 * 31, 0.0f)));
  e = open_error(write(target, d, "dflash-projection-shape"));
  EXPECT_NE(e.find("tensor 'candidate_selector.hidden_projection.weight' has shape [6, 31], expected [6, 32]"),
            std::string::npos)
      << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "layers.0.mlp_conv.base_kernel");
  e = open_error(write(target, d, "dflash-conv"));
  EXPECT_NE(e.find("tensor 'layers.0.mlp_conv.base_kernel' is missing (expected shape [2, 2, 32])"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace tandem::models::dflash
