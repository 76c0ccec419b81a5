// The deployment's generation parts (config/config.h): generator, target and drafter roles with their
// pairing, the `generation` section's defaults and keys, the draft-length schedule, and every mistake
// named with its file, line, YAML path, value and what is allowed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"

namespace tandem::config {
namespace {

namespace fs = std::filesystem;

class GenerationConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tandem-genconfig-test-" + std::to_string(::getpid()));
    fs::create_directories(root_ / "lm");
    fs::create_directories(root_ / "draft");
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<Deployment> parse(const std::string& yaml) { return parse_deployment(yaml, "deploy.yaml", root_.string()); }
  void expect_error(const std::string& yaml, std::initializer_list<std::string> parts) {
    auto d = parse(yaml);
    ASSERT_FALSE(d.ok()) << "accepted:\n" << yaml;
    for (const auto& p : parts) {
      EXPECT_NE(d.error().message().find(p), std::string::npos)
          << "message lacks '" << p << "': " << d.error().message();
    }
  }

  fs::path root_;
};

const std::string kModels = "models:\n  target: {dir: lm}\n  drafter: {dir: draft}\n";

TEST_F(GenerationConfigTest, GeneratorTakesTheDocumentedDefaults) {
  auto d = parse(kModels + "ranks:\n  - role: coordinator\n  - role: generator\n");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->ranks[1].role, Role::kGenerator);
  EXPECT_STREQ(to_string(Role::kGenerator), "generator");
  EXPECT_TRUE(runs_target(Role::kGenerator));
  EXPECT_TRUE(runs_drafter(Role::kGenerator));
  EXPECT_TRUE(d->serves_generation());
  EXPECT_FALSE(d->serves_scoring());
  const Generation& g = d->generation;
  EXPECT_EQ(g.block_size, 0u);
  EXPECT_EQ(g.slots, 8u);
  EXPECT_EQ(g.kv_capacity, 0u);
  EXPECT_EQ(g.max_queue_requests, 256u);
  EXPECT_EQ(g.verify, Verify::kMatch);
  EXPECT_TRUE(g.overlap);
  EXPECT_TRUE(g.warm_up);
  EXPECT_TRUE(g.draft_schedule.empty());
  EXPECT_EQ(d->model(Role::kTarget)->tokenizer, (root_ / "lm" / "tokenizer.json").string());
  EXPECT_EQ(d->ranks[1].target, -1);
}

TEST_F(GenerationConfigTest, DraftersPairWithTheNearestTargetBeforeThemOrTheNamedOne) {
  auto d = parse(kModels + R"(generation:
  block_size: 8
  slots: 4
  kv_capacity: 512
  max_queue_requests: 9
  verify: reject
  overlap: false
  warm_up: false
  draft_schedule:
    - {batch: 1, block: 16}
    - {batch: 4, block: 4}
    - {batch: 8, block: 0}
ranks:
  - role: coordinator
  - role: target
  - role: drafter
  - role: target
  - role: drafter
  - {role: drafter, target: 1, backend: cuda, precision: bf16}
)");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->ranks[2].target, 1);
  EXPECT_EQ(d->ranks[4].target, 3);
  EXPECT_EQ(d->ranks[5].target, 1);
  EXPECT_EQ(d->ranks[5].backend.precision, ir::Precision::kBF16);
  const Generation& g = d->generation;
  EXPECT_EQ(g.block_size, 8u);
  EXPECT_EQ(g.slots, 4u);
  EXPECT_EQ(g.kv_capacity, 512u);
  EXPECT_EQ(g.max_queue_requests, 9u);
  EXPECT_EQ(g.verify, Verify::kReject);
  EXPECT_FALSE(g.overlap);
  EXPECT_FALSE(g.warm_up);
  ASSERT_EQ(g.draft_schedule.size(), 3u);
  // Below the first entry the block size applies; each entry from its batch size up.
  EXPECT_EQ(g.block_for(1, 8), 16u);
  EXPECT_EQ(g.block_for(3, 8), 16u);
  EXPECT_EQ(g.block_for(4, 8), 4u);
  EXPECT_EQ(g.block_for(7, 8), 4u);
  EXPECT_EQ(g.block_for(8, 8), 0u);
  EXPECT_EQ(g.block_for(1000, 8), 0u);
  Generation late;
  late.draft_schedule = {{4, 2}};
  EXPECT_EQ(late.block_for(3, 8), 8u);
  EXPECT_EQ(late.block_for(4, 8), 2u);
}

TEST_F(GenerationConfigTest, DrafterWithoutATargetBeforeIt) {
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: drafter\n  - role: target\n",
               {"deploy.yaml:6:5", "ranks[1]", "a drafter drafts for a target rank listed before it"});
}

TEST_F(GenerationConfigTest, DrafterNamingARankThatIsNoTarget) {
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: generator\n  - {role: drafter, target: 1}\n",
               {"deploy.yaml:7:29", "ranks[2].target", "rank 1 is a generator", "allowed: the index of a target rank"});
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: target\n  - {role: drafter, target: 7}\n",
               {"ranks[2].target", "rank 7 does not exist", "0..2"});
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: target\n  - {role: drafter, target: 2}\n",
               {"ranks[2].target", "2 is this drafter itself"});
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: target\n  - {role: drafter, target: zero}\n",
               {"ranks[2].target", "'zero' is not an integer"});
}

TEST_F(GenerationConfigTest, TargetKeyOnlyForDrafters) {
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - {role: generator, target: 1}\n",
               {"ranks[1].target", "unknown key"});
}

TEST_F(GenerationConfigTest, RolesNeedTheirModels) {
  expect_error("models:\n  target: {dir: lm}\nranks:\n  - role: coordinator\n  - role: generator\n",
               {"models", "a rank has role drafter but models.drafter is missing"});
  expect_error("models:\n  drafter: {dir: draft}\nranks:\n  - role: coordinator\n  - role: target\n"
               "  - role: drafter\n",
               {"models", "models.target is missing"});
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: target\n",
               {"models.drafter", "no rank has role drafter"});
}

TEST_F(GenerationConfigTest, DrafterTakesNoTokenizer) {
  expect_error("models:\n  target: {dir: lm}\n  drafter: {dir: draft, tokenizer: t.json}\nranks:\n"
               "  - role: coordinator\n  - role: generator\n",
               {"models.drafter.tokenizer", "unknown key"});
}

TEST_F(GenerationConfigTest, DrafterQuantization) {
  const std::string ranks = "ranks:\n  - role: coordinator\n  - role: generator\n";
  auto plain = parse(kModels + ranks);
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_EQ(plain->model(Role::kDrafter)->quantization, "");  // as the checkpoint stores it
  for (const std::string q : {"none", "int8", "int4"}) {
    auto d = parse("models:\n  target: {dir: lm}\n  drafter: {dir: draft, quantization: " + q + "}\n" + ranks);
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d->model(Role::kDrafter)->quantization, q);
  }
  expect_error("models:\n  target: {dir: lm}\n  drafter: {dir: draft, quantization: int2}\n" + ranks,
               {"deploy.yaml:3:", "models.drafter.quantization", "'int2' is not allowed", "allowed: none, int8, int4"});
  expect_error("models:\n  target: {dir: lm, quantization: int8}\n  drafter: {dir: draft}\n" + ranks,
               {"models.target.quantization", "unknown key"});
}

TEST_F(GenerationConfigTest, TheOldCombinedRoleNameIsRefused) {
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - role: target+drafter\n",
               {"ranks[1].role", "'target+drafter' is not allowed", "generator"});
}

TEST_F(GenerationConfigTest, GenerationSectionWithoutATarget) {
  fs::create_directories(root_ / "scorer" / "tokenizer");
  std::ofstream(root_ / "scorer" / "tokenizer" / "tokenizer.json") << "{}";
  expect_error("models: {scorer: {dir: scorer}}\ngeneration: {slots: 2}\nranks:\n  - role: coordinator\n"
               "  - role: scorer\n",
               {"deploy.yaml:2:13", "generation", "no rank runs a target"});
}

TEST_F(GenerationConfigTest, BadGenerationKeys) {
  const std::string ranks = "ranks:\n  - role: coordinator\n  - role: generator\n";
  expect_error(kModels + "generation: {block_size: 1}\n" + ranks,
               {"generation.block_size", "1 drafts nothing", "allowed: 0 (the drafter's block_size) or 2..16"});
  expect_error(kModels + "generation: {block_size: 17}\n" + ranks,
               {"generation.block_size", "17 is out of range", "0..16"});
  expect_error(kModels + "generation: {slots: 0}\n" + ranks, {"generation.slots", "0 is out of range", "1..4096"});
  expect_error(kModels + "generation: {kv_capacity: 20}\n" + ranks,
               {"generation.kv_capacity", "20 positions cannot hold a prompt and a block", "at least 32"});
  expect_error(kModels + "generation: {verify: greedy}\n" + ranks,
               {"generation.verify", "'greedy' is not allowed", "allowed: match, reject"});
  expect_error(kModels + "generation: {overlap: yes}\n" + ranks,
               {"generation.overlap", "'yes' is not allowed", "allowed: true, false"});
  expect_error(kModels + "generation: {warm_up: later}\n" + ranks,
               {"generation.warm_up", "'later' is not allowed", "allowed: true, false"});
  expect_error(kModels + "generation: {slot: 3}\n" + ranks, {"generation.slot", "unknown key", "slots"});
}

TEST_F(GenerationConfigTest, BadDraftSchedules) {
  const std::string ranks = "ranks:\n  - role: coordinator\n  - role: generator\n";
  expect_error(kModels + "generation: {draft_schedule: 4}\n" + ranks,
               {"generation.draft_schedule", "expected a list of {batch, block} entries"});
  expect_error(kModels + "generation:\n  draft_schedule:\n    - {batch: 4, block: 8}\n    - {batch: 4, block: 0}\n" +
                   ranks,
               {"deploy.yaml:7:15", "generation.draft_schedule[1].batch", "4 does not exceed the previous entry's batch 4"});
  expect_error(kModels + "generation:\n  draft_schedule:\n    - {batch: 2}\n" + ranks,
               {"generation.draft_schedule[0]", "needs both 'batch'"});
  expect_error(kModels + "generation:\n  draft_schedule:\n    - {batch: 2, block: 1}\n" + ranks,
               {"generation.draft_schedule[0].block", "1 drafts nothing", "0 (no speculation)"});
  expect_error(kModels + "generation:\n  draft_schedule:\n    - {batch: 2, block: 4, when: now}\n" + ranks,
               {"generation.draft_schedule[0].when", "unknown key"});
}

TEST_F(GenerationConfigTest, CpuGenerationRanksRunF32) {
  expect_error(kModels + "ranks:\n  - role: coordinator\n  - {role: generator, precision: bf16}\n",
               {"ranks[1].precision", "bf16 is not supported by the cpu backend"});
}

}  // namespace
}  // namespace tandem::config
