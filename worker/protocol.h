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
inline constexpr uint16_t kProtocolVersion = 4;
inline constexpr size_t kFrameHeaderBytes = 12;
inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

enum class MessageKind : uint16_t {
  // coordinator -> worker
  kRunBatch = 1,
  kShutdown = 2,
  kAbort = 3,
  kRound = 4,
  kPeerLost = 5,
  // worker -> coordinator
  kReady = 16,
  kLoadFailed = 17,
  kBatchDone = 18,
  kBatchFailed = 19,
  kBye = 20,
  kRoundDone = 21,
  kRoundFailed = 22,
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

// The generation rounds (architecture.md "A speculative round"): the coordinator sends each target
// (or generator) rank what changed since its last round; the target tells its drafters over the data
// plane (worker/gen_messages.h) and reports what each request committed.
struct GenAdmit {
  uint64_t request = 0;           // the coordinator's id
  uint32_t slot = 0;              // the target's KV slot (and the drafter's context slot)
  int32_t drafter = -1;           // the rank drafting for it (a generator: itself); -1: plain decoding
  uint32_t max_tokens = 1;
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::vector<uint32_t> prompt;
  std::vector<uint32_t> stop_ids;
};
// A request changes drafter (its drafter died or is drained): the target rebuilds its drafter context
// on `drafter` from tap rows it recomputes on the free slot `scratch` (taken, or none given: the first
// free slot; none free: plain decoding); -1 leaves it plain decoding. A request whose drafter is in the
// round's `drains` has its context handed over instead (Round::drains).
struct GenMove {
  uint32_t slot = 0;
  int32_t drafter = -1;
  uint32_t scratch = 0;
};
struct Round {
  uint64_t round = 0;              // per target rank, from 1
  uint32_t block = 0;              // rows of this round's draft blocks; < 2: plain decoding for all
  std::vector<uint32_t> releases;  // slots freed before the round (cancelled requests)
  std::vector<GenMove> moves;
  std::vector<GenAdmit> admits;    // prefilled this round; they join the verify rounds after it
  // Drafter ranks drained before the round (POST /admin/drain): the moves of their requests hand each
  // context over as it is (the drained drafter sends its K/V rows and frees them, the new drafter takes
  // them in; nothing recomputed; the rebuild above only where that fails), and the target reports each
  // one's context slots afterwards.
  std::vector<int32_t> drains;
};
// A peer rank is gone (declared dead by the coordinator): stop waiting for it, send it nothing more.
struct PeerLost {
  int32_t rank = -1;
  std::string why;
};

enum class GenFinish : uint8_t { kNone = 0, kLength = 1, kStop = 2 };
struct GenResult {
  uint64_t request = 0;
  uint32_t slot = 0;
  std::vector<uint32_t> tokens;  // committed this round, in order
  GenFinish finish = GenFinish::kNone;
  uint32_t drafted = 0;          // drafts verified this round
  uint32_t accepted = 0;         // of which accepted (the leading ones)
};
// A drafter's share of a round, as its target saw it.
struct DrafterReport {
  int32_t rank = -1;
  uint32_t slots_used = 0;  // context slots holding a request
  uint64_t settle_us = 0;
  uint64_t draft_us = 0;
  uint64_t device_to_host_bytes = 0;  // what the drafter rank copied from its GPU to the host since its last report
};
struct RoundDone {
  uint64_t round = 0;
  std::vector<GenResult> results;  // admitted (first token) and verified requests
  uint32_t slots_used = 0;         // the target's KV slots holding a request after the round
  uint64_t prefill_us = 0;
  uint64_t wait_us = 0;            // waiting for drafts (draft and transfer)
  uint64_t verify_us = 0;
  uint64_t send_us = 0;            // handing taps to the drafters
  uint64_t bytes_sent = 0;         // data plane, this round
  uint64_t bytes_received = 0;
  uint32_t guesses = 0;       // overlap: next-round guesses the drafters sent back during this round
  uint32_t guesses_used = 0;  // this round's requests verified on a guess (the outcome it expected)
  std::vector<DrafterReport> drafters;
  uint32_t handoffs = 0;      // drain moves whose context crossed whole to the new drafter
  uint64_t device_to_host_bytes = 0;  // what the round copied from the rank's GPU to the host (0 on the CPU)
};
struct RoundFailed {
  uint64_t round = 0;
  std::string message;
};

// What a worker loaded, for /v1/models, /metrics and logs; a target also what requests it takes.
struct Ready {
  std::string role;
  std::string model;    // the model's name in the deployment
  std::string backend;  // Caps::name
  std::string device;   // Caps::device
  uint64_t weight_bytes = 0;
  uint64_t plan_bytes = 0;
  uint32_t vocab = 0;
  uint32_t slots = 0;        // target: KV slots; drafter: context slots
  uint32_t capacity = 0;     // positions per slot
  uint32_t block = 0;        // the block size rounds draft (target and drafter)
  uint32_t max_context = 0;  // target: prompt + max_tokens of one request at most
  uint64_t state_bytes = 0;  // KV cache (target) and context cache (drafter) bytes
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

using Message = std::variant<RunBatch, Shutdown, Abort, Round, PeerLost, Ready, LoadFailed, BatchDone, BatchFailed,
                             Bye, RoundDone, RoundFailed, Heartbeat>;

MessageKind kind_of(const Message& message);
// The tag a message travels on when `from_coordinator` says who sends it.
Tag tag_for(const Message& message, bool from_coordinator);

std::vector<uint8_t> encode(const Message& message);
// Decodes one frame that arrived on `tag`; a kind that does not belong to the tag is an error.
Result<Message> decode(std::span<const uint8_t> frame, Tag tag);

}  // namespace tandem::worker
