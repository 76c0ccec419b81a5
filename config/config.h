// The deployment YAML (serving.md "YAML deployment"): listener, limits, batcher, health, models per
// role, backend and one entry per MPI rank. Loaded and validated once at start; every error names the
// file, line, YAML path, the value found and what is allowed. Nothing is defaulted from a typo.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"
#include "engine/ir/bucket.h"

namespace tandem::config {

// kGenerator: a target and its drafter in one rank (one GPU); kTarget and kDrafter: the two apart, paired
// by Rank::target (architecture.md "A speculative round, drafter on another GPU").
enum class Role : uint8_t { kCoordinator, kScorer, kTarget, kDrafter, kGenerator };
const char* to_string(Role role);  // "coordinator", "scorer", "target", "drafter", "generator"
// Whether the role runs a target model (target, generator) or a drafter (drafter, generator).
bool runs_target(Role role);
bool runs_drafter(Role role);

// Who may call the admin routes (POST /admin/drain, /admin/undrain).
enum class AdminAccess : uint8_t { kLoopback, kAll, kOff };
const char* to_string(AdminAccess access);  // "loopback", "all", "off"

struct Listener {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: the OS picks a free port (printed at start)
  uint32_t io_threads = 1;
  AdminAccess admin = AdminAccess::kLoopback;  // clients on a loopback address only, by default
};

struct Limits {
  uint64_t max_body_bytes = 1 << 20;
  uint32_t max_header_bytes = 16 * 1024;
  uint32_t max_questions = 64;        // per /v1/decide request
  uint32_t max_options = 64;          // per question
  uint32_t max_sequences = 256;       // per /v1/score request
  uint32_t max_request_tokens = 65536;
  uint32_t max_queue_sequences = 4096;  // waiting, not yet dispatched; beyond it: 429
  uint32_t max_connections = 1024;
  uint32_t request_timeout_ms = 30000;  // admission to answer; beyond it: 504
  uint32_t read_timeout_ms = 10000;     // a whole request (headers and body) must arrive in this time
  uint32_t idle_timeout_ms = 60000;     // keep-alive connections with no request are closed
  // On a stop (Ctrl-C, SIGTERM): how long the work in hand may take; what is left then is answered 503.
  uint32_t shutdown_drain_ms = 10000;
};

struct Batcher {
  uint32_t max_batch_tokens = 2048;
  uint32_t max_wait_us = 2000;          // how long a batch under budget waits to fill
  uint32_t max_inflight_per_rank = 2;
};

struct Health {
  uint32_t heartbeat_ms = 200;       // worker -> coordinator
  uint32_t dead_after_ms = 1500;     // silence that declares a rank dead
  uint32_t exit_grace_ms = 3000;     // after a death: keep answering (503 on /health), then exit non-zero
  uint32_t startup_timeout_s = 600;  // every worker must report ready (or why not) within this
};

struct Backend {
  std::string name = "cpu";  // "cpu" | "cuda"
  ir::Precision precision = ir::Precision::kF32;
  int device = 0;            // cuda: GPU index on the rank's node
  uint32_t threads = 0;      // cpu: 0 = one per hardware thread
};

struct Model {
  std::string name;       // id in /v1/models; default: the directory's base name
  std::string dir;        // absolute (relative paths are resolved against the YAML's folder)
  std::string tokenizer;  // absolute path of tokenizer.json; default <dir>/tokenizer/tokenizer.json
  // A drafter's `quantization`: "" (not given: as its checkpoint stores it), "none", "int8" or "int4"
  // (docs/quantization.md).
  std::string quantization;
};

struct Rank {
  Role role = Role::kScorer;
  Backend backend;  // the top-level backend with this rank's overrides
  int target = -1;  // a drafter: the MPI rank of the target it drafts for; -1 otherwise
};

// How verify treats temperature > 0 (engine/spec VerifyMode): sample-and-match or rejection sampling.
enum class Verify : uint8_t { kMatch, kReject };
const char* to_string(Verify v);  // "match", "reject"

// One row of the draft-length schedule: from `batch` requests decoding on a target up, rounds draft
// blocks of `block` rows (0: no speculation; serving.md, vLLM #42505).
struct DraftStep {
  uint32_t batch = 1;
  uint32_t block = 0;
};

// The generation service (architecture.md "A speculative round"): per target rank.
struct Generation {
  uint32_t block_size = 0;            // 0: the drafter's config block_size
  uint32_t slots = 8;                 // requests decoding at once per target rank (KV cache slots)
  uint32_t kv_capacity = 0;           // positions per slot; 0: the target's max_position_embeddings
  uint32_t max_queue_requests = 256;  // waiting for a slot; beyond it: 429
  Verify verify = Verify::kMatch;
  bool overlap = true;                // drafters draft round k+1 while their target verifies round k
  bool warm_up = true;                // lower every plan a round can use at load, before serving
  std::vector<DraftStep> draft_schedule;  // ascending batch; empty: block_size at every batch size

  // The block size of a round with `batch` requests (0: plain decoding); `fallback` is block_size resolved.
  uint32_t block_for(uint32_t batch, uint32_t fallback) const;
};

struct Deployment {
  std::string origin;  // the YAML file, for messages
  Listener server;
  Limits limits;
  Batcher batcher;
  Health health;
  std::string buckets = "default";  // "default" or the absolute path of a bucket table
  ir::BucketTable bucket_table;     // loaded and checked: has a "compat" stage
  Generation generation;            // read when a rank runs a target or a drafter
  std::map<Role, Model> models;     // one per role that some rank has (kGenerator uses target and drafter)
  std::vector<Rank> ranks;          // index = MPI rank; ranks[0] is the coordinator

  uint32_t count(Role role) const;
  const Model* model(Role role) const;
  bool serves_generation() const;  // some rank runs a target
  bool serves_scoring() const;     // some rank is a scorer
};

// The compat buckets a scorer deployment serves: each bucket up to and including the first that holds
// batcher.max_batch_tokens tokens. The coordinator and every worker derive the same table from it.
Result<ir::BucketTable> serving_buckets(const Deployment& deployment);

// Reads and validates a deployment file.
Result<Deployment> load_deployment(const std::string& path);
// Same from text; `origin` names it in messages and relative paths resolve against `base_dir`.
Result<Deployment> parse_deployment(std::string_view yaml, const std::string& origin,
                                    const std::string& base_dir);

}  // namespace tandem::config
