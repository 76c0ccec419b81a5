// The deployment loader (config/config.h): defaults, overrides, path resolution, the shipped examples,
// and bad files, each rejected with the file, line, YAML path, value and what is allowed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "config/config.h"

namespace tandem::config {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tandem-config-test-" + std::to_string(::getpid()));
    fs::create_directories(root_ / "model" / "tokenizer");
    std::ofstream(root_ / "model" / "tokenizer" / "tokenizer.json") << "{}";
    std::ofstream(root_ / "buckets.txt") << "compat 64 8 64\ncompat 128 16 128\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<Deployment> parse(const std::string& yaml) {
    return parse_deployment(yaml, "deploy.yaml", root_.string());
  }
  // Expects a rejection whose message holds every one of `parts`.
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

const std::string kMinimal = R"(
models:
  scorer:
    dir: model
ranks:
  - role: coordinator
  - role: scorer
)";

TEST_F(ConfigTest, MinimalFileTakesDocumentedDefaults) {
  auto d = parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->server.host, "127.0.0.1");
  EXPECT_EQ(d->server.port, 8080);
  EXPECT_EQ(d->limits.max_body_bytes, 1u << 20);
  EXPECT_EQ(d->limits.shutdown_drain_ms, 10000u);
  EXPECT_EQ(d->batcher.max_batch_tokens, 2048u);
  EXPECT_EQ(d->health.dead_after_ms, 1500u);
  ASSERT_EQ(d->ranks.size(), 2u);
  EXPECT_EQ(d->ranks[0].role, Role::kCoordinator);
  EXPECT_EQ(d->ranks[1].role, Role::kScorer);
  EXPECT_EQ(d->ranks[1].backend.name, "cpu");
  EXPECT_EQ(d->ranks[1].backend.precision, ir::Precision::kF32);
  const Model* m = d->model(Role::kScorer);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->dir, (root_ / "model").string());
  EXPECT_EQ(m->name, "model");
  EXPECT_EQ(m->tokenizer, (root_ / "model" / "tokenizer" / "tokenizer.json").string());
  EXPECT_EQ(d->bucket_table.stage("compat").size(), ir::BucketTable::defaults().stage("compat").size());
  EXPECT_EQ(d->count(Role::kScorer), 1u);
}

TEST_F(ConfigTest, OverridesPerRankAndDevicesCountUp) {
  auto d = parse(R"(
server: {host: localhost, port: 0, io_threads: 3}
limits: {max_queue_sequences: 7, max_questions: 7, max_sequences: 5, request_timeout_ms: 1234, shutdown_drain_ms: 0}
batcher: {max_batch_tokens: 128, max_wait_us: 0, max_inflight_per_rank: 4}
health: {heartbeat_ms: 50, dead_after_ms: 100, exit_grace_ms: 0}
buckets: buckets.txt
backend: {name: cuda, precision: f16}
models:
  scorer: {dir: model, name: tiny, tokenizer: model/tokenizer/tokenizer.json}
ranks:
  - role: coordinator
  - role: scorer
  - {role: scorer, device: 5}
  - role: scorer
  - {role: scorer, backend: cpu, precision: f32, threads: 2}
)");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->server.host, "127.0.0.1");
  EXPECT_EQ(d->server.port, 0);
  EXPECT_EQ(d->server.io_threads, 3u);
  EXPECT_EQ(d->limits.max_queue_sequences, 7u);
  EXPECT_EQ(d->limits.request_timeout_ms, 1234u);
  EXPECT_EQ(d->limits.shutdown_drain_ms, 0u);  // 0: a stop answers the work in hand 503 at once
  EXPECT_EQ(d->batcher.max_inflight_per_rank, 4u);
  EXPECT_EQ(d->health.exit_grace_ms, 0u);
  EXPECT_EQ(d->buckets, (root_ / "buckets.txt").string());
  EXPECT_EQ(d->bucket_table.stage("compat").size(), 2u);
  EXPECT_EQ(d->model(Role::kScorer)->name, "tiny");
  EXPECT_EQ(d->ranks[1].backend.name, "cuda");
  EXPECT_EQ(d->ranks[1].backend.precision, ir::Precision::kF16);
  EXPECT_EQ(d->ranks[1].backend.device, 0);
  EXPECT_EQ(d->ranks[2].backend.device, 5);
  EXPECT_EQ(d->ranks[3].backend.device, 2);  // the third cuda rank in the file
  EXPECT_EQ(d->ranks[4].backend.name, "cpu");
  EXPECT_EQ(d->ranks[4].backend.threads, 2u);
}

TEST_F(ConfigTest, ShippedExamplesLoad) {
  // The examples point at models/decision-tickets, the decision model the project ships (trained by
  // tools/train_default_models.sh; the random decision-tiny lives in tests/fixtures for tests only).
  for (const char* name : {"cpu.yaml", "one-gpu.yaml", "two-gpus.yaml"}) {
    auto d = load_deployment(std::string(TANDEM_SOURCE_DIR) + "/config/examples/" + name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.error().message();
    EXPECT_GE(d->count(Role::kScorer), 1u) << name;
    EXPECT_EQ(fs::path(d->model(Role::kScorer)->dir).filename(), "decision-tickets") << name;
  }
}

TEST_F(ConfigTest, MissingFileIsNamed) {
  auto d = load_deployment((root_ / "nope.yaml").string());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("nope.yaml"), std::string::npos);
}

// Each bad file names its line, YAML path, the value at fault and what is allowed.
TEST_F(ConfigTest, NotYamlAtAll) {
  expect_error("server: {host: [1, 2\n", {"deploy.yaml:", "not valid YAML"});
}

TEST_F(ConfigTest, TopLevelIsAList) {
  expect_error("- a\n- b\n", {"deploy.yaml:1:1", "expected a mapping"});
}

TEST_F(ConfigTest, UnknownTopLevelKey) {
  expect_error(kMinimal + "bacher: {max_batch_tokens: 10}\n",
               {"deploy.yaml:8:1", "bacher", "unknown key", "allowed keys here", "batcher"});
}

TEST_F(ConfigTest, UnknownNestedKey) {
  expect_error(kMinimal + "server:\n  prot: 80\n", {"deploy.yaml:9:3", "server.prot", "unknown key", "port"});
}

TEST_F(ConfigTest, PortOutOfRange) {
  expect_error(kMinimal + "server:\n  port: 70000\n", {"deploy.yaml:9:9", "server.port", "70000", "0..65535"});
}

TEST_F(ConfigTest, PortNotANumber) {
  expect_error(kMinimal + "server:\n  port: eighty\n", {"server.port", "'eighty'", "an integer in 0..65535"});
}

TEST_F(ConfigTest, NegativeTimeout) {
  expect_error(kMinimal + "limits: {request_timeout_ms: -5}\n",
               {"limits.request_timeout_ms", "'-5'", "an integer in 1..3600000"});
}

TEST_F(ConfigTest, ShutdownDrainOutOfRange) {
  expect_error(kMinimal + "limits: {shutdown_drain_ms: 3600001}\n",
               {"limits.shutdown_drain_ms", "3600001 is out of range", "an integer in 0..3600000"});
}

TEST_F(ConfigTest, BadHost) {
  expect_error(kMinimal + "server: {host: my-server}\n", {"server.host", "'my-server'", "IPv4 or IPv6"});
}

// server.admin: who may call POST /admin/drain and /admin/undrain; loopback clients only by default.
TEST_F(ConfigTest, AdminAccess) {
  auto d = parse(kMinimal);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->server.admin, AdminAccess::kLoopback);
  for (const auto& [text, want] : {std::pair{"all", AdminAccess::kAll}, std::pair{"off", AdminAccess::kOff},
                                   std::pair{"loopback", AdminAccess::kLoopback}}) {
    d = parse(kMinimal + "server: {admin: " + text + "}\n");
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d->server.admin, want) << text;
  }
  expect_error(kMinimal + "server: {admin: yes}\n", {"server.admin", "'yes'", "loopback", "all", "off"});
}

TEST_F(ConfigTest, UnknownBackend) {
  expect_error(kMinimal + "backend: {name: tpu}\n", {"backend.name", "'tpu'", "allowed: cpu, cuda"});
}

TEST_F(ConfigTest, CpuRejectsF16) {
  expect_error(kMinimal + "backend: {name: cpu, precision: f16}\n",
               {"backend.precision", "f16", "cpu backend", "allowed: f32"});
}

TEST_F(ConfigTest, UnknownPrecision) {
  expect_error(kMinimal + "backend: {precision: f8}\n", {"backend.precision", "'f8'", "allowed: f32, f16, bf16"});
}

TEST_F(ConfigTest, ScorerRejectsBf16) {
  expect_error(kMinimal + "backend: {name: cuda, precision: bf16}\n",
               {"ranks[1].precision", "bf16 is for target, drafter and generator ranks", "allowed for a scorer"});
}

TEST_F(ConfigTest, UnknownRole) {
  expect_error("models: {scorer: {dir: model}}\nranks:\n  - role: coordinator\n  - role: scorre\n",
               {"deploy.yaml:4:11", "ranks[1].role", "'scorre'", "allowed: coordinator, scorer"});
}

TEST_F(ConfigTest, FirstRankMustBeCoordinator) {
  expect_error("models: {scorer: {dir: model}}\nranks:\n  - role: scorer\n  - role: scorer\n",
               {"ranks[0].role", "'scorer'", "allowed: coordinator"});
}

TEST_F(ConfigTest, SecondCoordinator) {
  expect_error("models: {scorer: {dir: model}}\nranks:\n  - role: coordinator\n  - role: coordinator\n",
               {"ranks[1].role", "only the first rank may be the coordinator"});
}

TEST_F(ConfigTest, NoWorkers) {
  expect_error("ranks:\n  - role: coordinator\n", {"ranks", "at least 2 ranks"});
}

TEST_F(ConfigTest, RanksMissing) {
  expect_error("models: {scorer: {dir: model}}\n", {"'ranks' is required"});
}

TEST_F(ConfigTest, CoordinatorTakesNoBackend) {
  expect_error("models: {scorer: {dir: model}}\nranks:\n  - {role: coordinator, device: 1}\n  - role: scorer\n",
               {"ranks[0].device", "unknown key"});
}

TEST_F(ConfigTest, RoleWithoutModel) {
  expect_error("ranks:\n  - role: coordinator\n  - role: scorer\n", {"models", "models.scorer is missing"});
}

TEST_F(ConfigTest, ModelWithoutRole) {
  expect_error("models: {scorer: {dir: model}, drafter: {dir: model}}\nranks:\n  - role: coordinator\n"
               "  - role: scorer\n",
               {"models.drafter", "no rank has role drafter"});
}

TEST_F(ConfigTest, ModelDirMissing) {
  expect_error("models: {scorer: {dir: nowhere}}\nranks:\n  - role: coordinator\n  - role: scorer\n",
               {"models.scorer.dir", "'nowhere'", "not a directory"});
}

TEST_F(ConfigTest, ModelDirRequired) {
  expect_error("models: {scorer: {name: x}}\nranks:\n  - role: coordinator\n  - role: scorer\n",
               {"models.scorer", "'dir' is required"});
}

TEST_F(ConfigTest, TokenizerMissing) {
  fs::create_directories(root_ / "bare");
  expect_error("models: {scorer: {dir: bare}}\nranks:\n  - role: coordinator\n  - role: scorer\n",
               {"models.scorer", "no tokenizer file", "tokenizer.json"});
}

TEST_F(ConfigTest, DuplicateKey) {
  expect_error(kMinimal + "server: {port: 1}\nserver: {port: 2}\n", {"server", "appears twice"});
}

TEST_F(ConfigTest, HeartbeatSlowerThanDeath) {
  expect_error(kMinimal + "health: {heartbeat_ms: 500, dead_after_ms: 600}\n",
               {"health.dead_after_ms", "600", "at least 2 x health.heartbeat_ms = 1000"});
}

TEST_F(ConfigTest, BatchLargerThanAnyBucket) {
  expect_error(kMinimal + "buckets: buckets.txt\nbatcher: {max_batch_tokens: 4096}\n",
               {"batcher.max_batch_tokens", "4096", "at most 128"});
}

TEST_F(ConfigTest, BucketFileMissing) {
  expect_error(kMinimal + "buckets: missing.txt\n", {"buckets", "missing.txt"});
}

TEST_F(ConfigTest, BucketTableWithoutCompat) {
  std::ofstream(root_ / "other.txt") << "state 64 8 0\n";
  expect_error(kMinimal + "buckets: other.txt\n", {"buckets", "no 'compat' stage"});
}

TEST_F(ConfigTest, WrongVersion) {
  expect_error(kMinimal + "version: 2\n", {"version", "2 is out of range", "1..1"});
}

TEST_F(ConfigTest, SectionOfWrongType) {
  expect_error(kMinimal + "limits: 5\n", {"limits", "expected a mapping, found a scalar"});
}

TEST_F(ConfigTest, QueueSmallerThanARequest) {
  expect_error(kMinimal + "limits: {max_queue_sequences: 10, max_questions: 8}\n",
               {"limits.max_queue_sequences", "10 is smaller than one request may be", "at least 256"});
}

TEST_F(ConfigTest, DeviceOutOfRange) {
  expect_error("models: {scorer: {dir: model}}\nbackend: {name: cuda}\nranks:\n  - role: coordinator\n"
               "  - {role: scorer, device: 99}\n",
               {"ranks[1].device", "99", "0..63"});
}

TEST_F(ConfigTest, RandomMutationsNeverCrash) {
  // Whatever the bytes, an error or a deployment comes back: no exception, no crash (the sanitizer
  // build checks memory too).
  const std::string base = kMinimal + "server: {port: 81, host: \"::1\"}\nlimits: {max_questions: 9}\n";
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]:,-#&*!|>'\"%@` \n\tabcz019.";
  size_t accepted = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string text = base;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 4); ++e) {
      const size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (at < text.size()) text.erase(at, 1 + rng() % 3); break;
        case 2: if (at < text.size()) text[at] = static_cast<char>(rng()); break;
      }
    }
    auto d = parse(text);
    if (d.ok()) {
      ++accepted;
    } else {
      EXPECT_FALSE(d.error().message().empty());
    }
  }
  EXPECT_LT(accepted, 1500u);
}

}  // namespace
}  // namespace tandem::config
