// Target checkpoints from disk: single-file and sharded directories load and run like the in-memory
// model; bad ones (missing tensor, wrong shape, missing head, taps beyond the depth, no config) are
// rejected with messages naming the tensor, its shape and the expected one.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/cpu/cpu_backend.h"
#include "engine/models/qwen3/qwen3_model.h"
#include "tests/engine/models/qwen3/tiny_models.h"

namespace tandem::models::qwen3 {
namespace {

const std::vector<uint32_t> kPrompt = {5, 9, 2, 33, 7};

std::vector<float> logits_of(Target& t) {
  std::vector<TargetOut> out;
  const TargetRows rows{0, kPrompt, LogitRows::kAll, {}};
  EXPECT_TRUE(t.forward({&rows, 1}, out).ok());
  return out.empty() ? std::vector<float>{} : out[0].logits.data;
}

std::string open_error(const std::string& dir, std::vector<uint32_t> taps = {1}) {
  auto backend = cpu::make_cpu_backend(1);
  auto t = Target::open(*backend, dir, TargetOptions{std::move(taps), 1, 16, nullptr, true});
  return t.ok() ? std::string("opened") : t.error().message();
}

void drop(testing::TinyTarget& t, const std::string& name) {
  std::erase_if(t.tensors, [&](const io::HostTensor& x) { return x.name == name; });
}

TEST(Qwen3Checkpoint, SingleAndShardedDirectoriesRunLikeTheModelInMemory) {
  for (bool tied : {false, true}) {
    testing::TargetShape shape;
    shape.tied = tied;
    const DType dtype = tied ? DType::kBF16 : DType::kF32;
    const testing::TinyTarget t = testing::random_target(shape, 41, dtype);
    const std::string dir = testing::temp_dir(tied ? "qwen3-sharded" : "qwen3-single");
    testing::write_target_dir(dir, t, tied ? 5 : 1);
    ASSERT_EQ(std::filesystem::exists(dir + "/model.safetensors.index.json"), tied);
    auto backend = cpu::make_cpu_backend(1);
    auto from_disk = Target::open(*backend, dir, TargetOptions{{1}, 1, 16, nullptr, true});
    ASSERT_TRUE(from_disk.ok()) << from_disk.error().message();
    auto in_memory = Target::create(*backend, *t.weights, t.cfg, TargetOptions{{1}, 1, 16, nullptr, true}, "memory");
    ASSERT_TRUE(in_memory.ok()) << in_memory.error().message();
    EXPECT_EQ((*from_disk)->config().tie_word_embeddings, tied);
    EXPECT_EQ(logits_of(**from_disk), logits_of(**in_memory));
  }
}

TEST(Qwen3Checkpoint, RejectsAMissingTensor) {
  testing::TinyTarget t = testing::random_target({}, 42);
  drop(t, "model.layers.2.mlp.up_proj.weight");
  const std::string dir = testing::temp_dir("qwen3-missing");
  testing::write_target_dir(dir, t);
  const std::string e = open_error(dir);
  EXPECT_NE(e.find(dir + ": tensor 'model.layers.2.mlp.up_proj.weight' is missing (expected shape [64, 32])"),
            std::string::npos)
      << e;
}

TEST(Qwen3Checkpoint, RejectsAWrongShape) {
  testing::TinyTarget t = testing::random_target({}, 43);
  drop(t, "model.layers.1.self_attn.k_proj.weight");
  t.tensors.push_back(io::HostTensor::from_f32("model.layers.1.self_attn.k_proj.weight", {24, 32},
                                               std::vector<float>(24 * 32, 0.1f)));
  const std::string dir = testing::temp_dir("qwen3-shape");
  testing::write_target_dir(dir, t);
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("tensor 'model.layers.1.self_attn.k_proj.weight' has shape [24, 32], expected [16, 32]"),
            std::string::npos)
      << e;
}

TEST(Qwen3Checkpoint, RejectsAnUntiedConfigWithoutHead) {
  testing::TinyTarget t = testing::random_target({}, 44);
  drop(t, "lm_head.weight");
  const std::string dir = testing::temp_dir("qwen3-head");
  testing::write_target_dir(dir, t);
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("tensor 'lm_head.weight' is missing (expected shape [48, 32])"), std::string::npos) << e;
}

TEST(Qwen3Checkpoint, RejectsTapsBeyondTheDepthAndMissingFiles) {
  const testing::TinyTarget t = testing::random_target({}, 45);
  const std::string dir = testing::temp_dir("qwen3-taps");
  testing::write_target_dir(dir, t);
  std::string e = open_error(dir, {0, 7});
  EXPECT_NE(e.find("tap layer 7 (entry 1) is beyond the target's 4 layers"), std::string::npos) << e;
  std::filesystem::remove(dir + "/model.safetensors");
  e = open_error(dir);
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  std::filesystem::remove(dir + "/config.json");
  e = open_error(dir);
  EXPECT_NE(e.find(dir + "/config.json"), std::string::npos) << e;
}

}  // namespace
}  // namespace tandem::models::qwen3
