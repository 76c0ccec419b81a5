// The control-plane messages between the coordinator and workers (architecture.md "Processes and
// ranks"): a small versioned binary format, little-endian, every length checked against the bytes that
// are really there. decode() turns any malformed frame into an error naming what is wrong; it never
// reads out of bounds or allocates more than the frame could hold.
//
// Frame: u32 magic "TDM1" | u16 version | u16 kind | u32 body bytes | body.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "worker/tags.h"

namespace tandem::worker {

inline constexpr uint32_t kProtocolMagic = 0x314D4454;  // "TDM1" read as little-endian bytes
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 12;
inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

enum class MessageKind : uint16_t {
  // coordinator -> worker
  kRunBatch = 1,
  kShutdown = 2,
  kAbort = 3,
  // worker -> coordinator
  kReady = 16,
  kLoadFailed = 17,
  kBatchDone = 18,
  kBatchFailed = 19,
  kBye = 20,
  // both ways
  kHeartbeat = 32,
};
const char* to_string(MessageKind kind);

struct RunBatch {
  uint64_t batch_id = 0;
  ir::Batch batch;  // ids, cu, markers, pcu, qtype (scorer batches)
};
struct Shutdown {};  // finish, say goodbye, finalize
// The job is failing: exit now, non-zero, without MPI_Finalize (a peer may be dead). Needed because
// under `mpirun --enable-recovery` rank 0's MPI_Abort does not end the other ranks.
struct Abort {
  std::string reason;
};

// What a worker loaded, for /v1/models, /metrics and logs.
struct Ready {
  std::string role;
  std::string model;    // the model's name in the deployment
  std::string backend;  // Caps::name
  std::string device;   // Caps::device
  uint64_t weight_bytes = 0;
  uint64_t plan_bytes = 0;
  uint32_t vocab = 0;
};
struct LoadFailed {
  std::string message;
};
struct BatchDone {
  uint64_t batch_id = 0;
  uint64_t run_us = 0;  // the plan run on the worker, for the per-rank metrics
  ir::Bucket bucket;
  std::vector<float> logits;              // one per marker, batch order
  std::vector<std::array<float, 2>> act;  // one pair per sequence
};
struct BatchFailed {
  uint64_t batch_id = 0;
  std::string message;
};
struct Bye {};
struct Heartbeat {
  uint64_t seq = 0;
};

using Message =
    std::variant<RunBatch, Shutdown, Abort, Ready, LoadFailed, BatchDone, BatchFailed, Bye, Heartbeat>;

MessageKind kind_of(const Message& message);
// The tag a message travels on when `from_coordinator` says who sends it.
Tag tag_for(const Message& message, bool from_coordinator);

std::vector<uint8_t> encode(const Message& message);
// Decodes one frame that arrived on `tag`; a kind that does not belong to the tag is an error.
Result<Message> decode(std::span<const uint8_t> frame, Tag tag);

}  // namespace tandem::worker
