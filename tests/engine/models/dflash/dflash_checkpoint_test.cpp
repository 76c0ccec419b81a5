// Drafter checkpoints from disk against a target directory: v1 and v2 load and draft like the in-memory
// model; bad pairs are rejected with clear messages: a missing tensor or codebook, a wrong shape, taps
// beyond the target's depth, a mask id outside its vocabulary, a hidden size other than the target's.
#include <gtest/gtest.h>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/dflash/dflash_model.h"
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

TEST_P(DrafterCheckpointTest, RejectsAMaskIdOutsideTheTargetsVocabulary) {
  drafter_.config["vocab_size"] = 64;
  drafter_.config["dflash_config"]["mask_token_id"] = 50;
  const std::string e = open_error(write(target_, drafter_, "dflash-mask"));
  EXPECT_NE(e.find("dflash_config.mask_token_id 50 is outside the target's vocabulary of 48 tokens"),
            std::string::npos)
      << e;
}

TEST_P(DrafterCheckpointTest, RejectsAHiddenSizeOtherThanTheTargets) {
  testing::TargetShape wide;
  wide.hidden = 48;
  const testing::TinyTarget other = testing::random_target(wide, 53);
  const testing::TinyDrafter d = testing::random_drafter(other.cfg, shape(GetParam()), 54);
  const std::string e = open_error(write(target_, d, "dflash-hidden"));
  EXPECT_NE(e.find("drafter hidden_size 48 differs from the target's hidden_size 32"), std::string::npos) << e;
}

TEST_P(DrafterCheckpointTest, RejectsADraftVocabularyLargerThanTheTargets) {
  const std::string e = open_error(write(target_, drafter_, "dflash-vocab"), 49u);
  EXPECT_NE(e.find("draft vocabulary 49 is not in 1..48"), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(Versions, DrafterCheckpointTest, ::testing::Values(1u, 2u),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

TEST(DrafterCheckpoint, RejectsAMissingOrMisshapedCodebook) {
  const testing::TinyTarget target = testing::random_target({}, 55);
  testing::TinyDrafter d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "predecessor_codebook");
  std::string e = open_error(write(target, d, "dflash-codebook"));
  EXPECT_NE(e.find("tensor 'predecessor_codebook' or 'predecessor_codebook.weight' is missing"), std::string::npos)
      << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "successor_codebook.weight");
  d.tensors.push_back(io::HostTensor::from_f32("successor_codebook", {47, 6}, std::vector<float>(47 * 6, 0.0f)));
  e = open_error(write(target, d, "dflash-codebook-shape"));
  EXPECT_NE(e.find("tensor 'successor_codebook' has shape [47, 6], expected [48, 6]"), std::string::npos) << e;
  d = testing::random_drafter(target.cfg, shape(2), 56);
  drop(d, "layers.0.mlp_conv.base_kernel");
  e = open_error(write(target, d, "dflash-conv"));
  EXPECT_NE(e.find("tensor 'layers.0.mlp_conv.base_kernel' is missing (expected shape [2, 2, 32])"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace tandem::models::dflash
