// The data plane (architecture.md "Processes and ranks", "A speculative round"): messages between two
// peer ranks, each a small host header plus optional f32 rows (tap rows, context rows). A Link moves
// the rows over MPI with the header (make_host_link: CPU ranks, and any pair without NCCL) or over NCCL
// (nccl_link.h: CUDA ranks); both take the same calls, so one code path runs either. Headers, and the
// NCCL unique id, travel over a HostPipe: the rank's MPI transport, or a queue within one process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/core/result.h"
#include "engine/ir/backend.h"

namespace tandem::comm {

using Clock = std::chrono::steady_clock;

// Small host messages to one peer, in order. Neither call blocks past its deadline, and a peer that is
// gone never stalls the caller: its messages are dropped and recv() answers kUnavailable.
class HostPipe {
 public:
  virtual ~HostPipe() = default;
  virtual int peer() const = 0;
  // Starts sending; returns at once.
  virtual Status send(std::vector<uint8_t> bytes) = 0;
  // The next message from the peer: nullopt when `deadline` passes first; kUnavailable once the peer is
  // lost (the rank's control plane says so) or the pipe is closed, kCancelled when the caller is stopping.
  virtual Result<std::optional<std::vector<uint8_t>>> recv(Clock::time_point deadline) = 0;
};

// Two connected pipe ends within one process (a generator's target and drafter halves, tests).
std::pair<std::unique_ptr<HostPipe>, std::unique_ptr<HostPipe>> make_local_pipes(int rank_a, int rank_b);

// Rows to send with a header: host rows, or rows [first, first + count) of a device output of
// `backend`, or several device row sets of `backend` one after another (pieces: each request's rows of
// one run). A host link fetches device rows (as f32); an NCCL link sends device rows device to device in
// their own storage (f32, f16 or bf16; all of one message must share it). Host rows are f32.
struct RowsOut {
  uint32_t width = 0;
  std::span<const float> host;              // rows × width
  const ir::DeviceRows* device = nullptr;   // instead of host
  uint32_t first = 0;
  uint32_t count = 0;
  std::span<const ir::DeviceRows> pieces;   // instead of host and device: each whole, of `width`
  ir::Backend* backend = nullptr;           // the owner of `device` or `pieces`

  static RowsOut none() { return {}; }
  static RowsOut of_host(std::span<const float> rows, uint32_t width) {
    RowsOut r;
    r.width = width;
    r.host = rows;
    return r;
  }
  static RowsOut of_device(const ir::DeviceRows& rows, uint32_t first, uint32_t count, ir::Backend& backend) {
    RowsOut r;
    r.width = rows.width;
    r.device = &rows;
    r.first = first;
    r.count = count;
    r.backend = &backend;
    return r;
  }
  static RowsOut of_pieces(std::span<const ir::DeviceRows> pieces, uint32_t width, ir::Backend& backend) {
    RowsOut r;
    r.width = width;
    r.pieces = pieces;
    r.backend = &backend;
    return r;
  }
  uint32_t rows() const;
  bool on_device() const { return device != nullptr || !pieces.empty(); }
  // The device rows as whole row sets (device: rows [first, first + count) of it; pieces: as they are),
  // each checked against `width` and its own rows; an error names the piece.
  Result<std::vector<ir::DeviceRows>> device_parts() const;
};

// A received message: its header and its rows, on the host (data, always f32: 16-bit rows are widened on
// receipt), or where an NCCL link received them (device, after Link::receive_to_device: rows in the
// storage they were sent in, owned by that backend, valid until the next recv).
struct Packet {
  std::vector<uint8_t> header;
  uint32_t rows = 0;
  uint32_t width = 0;
  std::vector<float> data;  // rows × width; empty when the rows are on the device
  ir::DeviceRows device;    // rows × width, `width` apart
  bool on_device() const { return device.data != nullptr; }
};

struct LinkStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;      // headers and rows
  uint64_t bytes_received = 0;
  uint64_t rows_to_host_bytes = 0;  // received rows the link copied from its device to the host
};

class Link {
 public:
  virtual ~Link() = default;
  virtual int peer() const = 0;
  virtual const char* kind() const = 0;  // "mpi" (rows with the header), "nccl"
  // Sends a header and its rows (none: RowsOut::none()). Messages arrive in order. Returns once the
  // rows' source may be reused (device rows: copied to the link's own buffer or sent).
  virtual Status send(std::span<const uint8_t> header, const RowsOut& rows) = 0;
  // The next message, as HostPipe::recv (nullopt at the deadline; kUnavailable for a lost peer).
  virtual Result<std::optional<Packet>> recv(Clock::time_point deadline) = 0;
  // From here on, received rows stay where the link received them, as rows `owner` (this rank's backend,
  // on the link's device) reads without a host copy: an NCCL link's own buffer (Packet::device). A host
  // link has them on the host anyway and keeps delivering Packet::data.
  virtual void receive_to_device(ir::Backend& owner) = 0;
  virtual LinkStats stats() const = 0;
};

// Rows inline with their header over the pipe (MPI between CPU ranks).
std::unique_ptr<Link> make_host_link(std::unique_ptr<HostPipe> pipe);

// The frame a link puts on its pipe: u32 magic "TDL1" | u16 version | u16 flags | u32 header bytes |
// header | u32 rows | u32 width | rows × width elements of the rows' storage (absent with
// kRowsElsewhere). The storage rides in flags bits 8-9 (kRowsStorageMask: 0 f32, 1 f16, 2 bf16, as
// ir::Storage; u32 is refused), so an f32 frame is the same bytes as before 16-bit rows existed and a
// build that predates them refuses a 16-bit frame as "unknown flags". decode_frame checks every length
// against the bytes there and the storage's element size, and widens inline 16-bit rows to f32.
inline constexpr uint32_t kLinkMagic = 0x314C4454;  // "TDL1" read as little-endian bytes
inline constexpr uint16_t kLinkVersion = 1;
inline constexpr uint16_t kRowsElsewhere = 1;  // the rows follow on another channel (NCCL)
inline constexpr uint16_t kRowsStorageShift = 8;
inline constexpr uint16_t kRowsStorageMask = 0x3 << kRowsStorageShift;
// `flags` holds kRowsElsewhere or not; the storage bits come from `storage`. Inline rows (`data`, without
// kRowsElsewhere) are rows × width elements of `storage`, raw bytes.
std::vector<uint8_t> encode_frame(std::span<const uint8_t> header, uint32_t rows, uint32_t width,
                                  std::span<const uint8_t> data, ir::Storage storage, uint16_t flags);
// Inline f32 rows.
inline std::vector<uint8_t> encode_frame(std::span<const uint8_t> header, uint32_t rows, uint32_t width,
                                         std::span<const float> data, uint16_t flags) {
  return encode_frame(header, rows, width,
                      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size_bytes()),
                      ir::Storage::kF32, flags);
}
struct Frame {
  uint16_t flags = 0;                        // without the storage bits
  ir::Storage storage = ir::Storage::kF32;   // of the rows, inline or elsewhere
  Packet packet;  // data empty with kRowsElsewhere; inline rows widened to f32
};
Result<Frame> decode_frame(std::span<const uint8_t> bytes, int peer);

}  // namespace tandem::comm
