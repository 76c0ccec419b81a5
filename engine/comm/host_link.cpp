// The link frame (comm.h) and the host link: rows ride with their header over the pipe, so between CPU
// ranks a message is one MPI send. Device rows are fetched to the host first.
#include <cstring>

#include <fmt/format.h>

#include "engine/comm/comm.h"
#include "engine/core/dtype.h"
#include "engine/core/wire.h"

namespace tandem::comm {

uint32_t RowsOut::rows() const {
  if (device != nullptr) return count;
  if (!pieces.empty()) {
    uint32_t n = 0;
    for (const ir::DeviceRows& p : pieces) n += p.rows;
    return n;
  }
  return static_cast<uint32_t>(width ? host.size() / width : 0);
}

Result<std::vector<ir::DeviceRows>> RowsOut::device_parts() const {
  std::vector<ir::DeviceRows> parts;
  if (device != nullptr) {
    const ir::DeviceRows& d = *device;
    if (uint64_t{first} + count > d.rows || width != d.width || d.stride < d.width) {
      return Error::make(ErrorKind::kInternal, "rows [{}, {}) of width {} from a device output of {} rows, width {}, "
                         "stride {}", first, uint64_t{first} + count, width, d.rows, d.width, d.stride);
    }
    ir::DeviceRows slice = d;
    slice.data = static_cast<const uint8_t*>(d.data) + size_t{first} * d.stride * ir::storage_bytes(d.storage);
    slice.rows = count;
    parts.push_back(slice);
    return parts;
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ir::DeviceRows& d = pieces[i];
    if (d.width != width || d.stride < d.width || (d.rows > 0 && d.data == nullptr)) {
      return Error::make(ErrorKind::kInternal, "device piece {}: {} rows of width {} (stride {}) to send as rows of {}",
                         i, d.rows, d.width, d.stride, width);
    }
    parts.push_back(d);
  }
  return parts;
}

std::vector<uint8_t> encode_frame(std::span<const uint8_t> header, uint32_t rows, uint32_t width,
                                  std::span<const uint8_t> data, ir::Storage storage, uint16_t flags) {
  WireWriter w;
  w.u32(kLinkMagic);
  w.u16(kLinkVersion);
  w.u16(static_cast<uint16_t>((flags & ~kRowsStorageMask) |
                              (static_cast<uint16_t>(storage) << kRowsStorageShift & kRowsStorageMask)));
  w.u8s(header);
  w.u32(rows);
  w.u32(width);
  std::vector<uint8_t>& out = w.bytes();
  if ((flags & kRowsElsewhere) == 0 && !data.empty()) {
    // Little-endian hosts only (x86-64, aarch64), as every rank of a job is.
    out.insert(out.end(), data.begin(), data.end());
  }
  return std::move(out);
}

Result<Frame> decode_frame(std::span<const uint8_t> bytes, int peer) {
  auto bad = [&](const std::string& what) {
    return Error::make(ErrorKind::kFormat, "malformed data-plane frame from rank {} ({} bytes): {}", peer,
                       bytes.size(), what);
  };
  WireReader r(bytes);
  const uint32_t magic = r.u32("magic");
  const uint16_t version = r.u16("version");
  Frame f;
  f.flags = r.u16("flags");
  f.packet.header = r.u8s("header");
  f.packet.rows = r.u32("rows");
  f.packet.width = r.u32("width");
  if (r.failed()) return bad(r.error());
  if (magic != kLinkMagic) return bad(fmt::format("magic {:#010x} is not {:#010x}", magic, kLinkMagic));
  if (version != kLinkVersion) return bad(fmt::format("version {} is not this build's {}", version, kLinkVersion));
  if ((f.flags & ~(kRowsElsewhere | kRowsStorageMask)) != 0) return bad(fmt::format("unknown flags {:#x}", f.flags));
  f.storage = static_cast<ir::Storage>((f.flags & kRowsStorageMask) >> kRowsStorageShift);
  f.flags &= static_cast<uint16_t>(~kRowsStorageMask);
  if (f.storage == ir::Storage::kU32) return bad("rows stored as u32 ids; a link carries f32, f16 or bf16 rows");
  const uint64_t values = uint64_t{f.packet.rows} * f.packet.width;
  const uint64_t want = (f.flags & kRowsElsewhere) ? 0 : values * ir::storage_bytes(f.storage);
  if (r.left() != want) {
    // f32 rows unnamed, as frames said before 16-bit rows existed.
    const std::string kind = f.storage == ir::Storage::kF32 ? "" : fmt::format("{} ", ir::to_string(f.storage));
    return bad(fmt::format("{} {}rows of width {} need {} bytes after the header, the frame has {}", f.packet.rows,
                           kind, f.packet.width, want, r.left()));
  }
  if (want > 0) {
    f.packet.data.resize(values);
    // INVARIANT: exactly `want` bytes remain (checked above): `values` elements of the storage.
    const uint8_t* at = bytes.data() + (bytes.size() - want);
    if (f.storage == ir::Storage::kF32) {
      std::memcpy(f.packet.data.data(), at, want);
    } else {
      convert_to_f32(f.storage == ir::Storage::kF16 ? DType::kF16 : DType::kBF16, at, values, f.packet.data.data());
    }
  }
  return f;
}

namespace {

class HostLink final : public Link {
 public:
  explicit HostLink(std::unique_ptr<HostPipe> pipe) : pipe_(std::move(pipe)) {}
  int peer() const override { return pipe_->peer(); }
  const char* kind() const override { return "mpi"; }

  Status send(std::span<const uint8_t> header, const RowsOut& rows) override {
    std::span<const float> data = rows.host;
    uint32_t n = rows.rows();
    if (rows.on_device()) {
      if (rows.backend == nullptr) return Error(ErrorKind::kInternal, "device rows to send without their backend");
      TANDEM_ASSIGN(const std::vector<ir::DeviceRows> parts, rows.device_parts());
      fetched_.clear();
      for (const ir::DeviceRows& part : parts) {
        piece_.data.clear();
        TANDEM_TRY(rows.backend->fetch(part, 0, part.rows, piece_));
        fetched_.insert(fetched_.end(), piece_.data.begin(), piece_.data.end());
      }
      data = fetched_;
    }
    if (data.size() != size_t{n} * rows.width) {
      return Error::make(ErrorKind::kInternal, "{} values for {} rows of width {} to rank {}", data.size(), n,
                         rows.width, peer());
    }
    std::vector<uint8_t> frame = encode_frame(header, n, rows.width, data, 0);
    stats_.messages_sent += 1;
    stats_.bytes_sent += frame.size();
    return pipe_->send(std::move(frame));
  }

  Result<std::optional<Packet>> recv(Clock::time_point deadline) override {
    TANDEM_ASSIGN(std::optional<std::vector<uint8_t>> bytes, pipe_->recv(deadline));
    if (!bytes) return std::optional<Packet>();
    TANDEM_ASSIGN(Frame f, decode_frame(*bytes, peer()));
    if (f.flags & kRowsElsewhere) {
      return Error::make(ErrorKind::kFormat, "rank {} sent rows over NCCL to a host link", peer());
    }
    stats_.messages_received += 1;
    stats_.bytes_received += bytes->size();
    return std::optional<Packet>(std::move(f.packet));
  }

  void receive_to_device(ir::Backend&) override {}  // rows come inline with the header, on the host
  LinkStats stats() const override { return stats_; }

 private:
  std::unique_ptr<HostPipe> pipe_;
  ir::Tensor2 piece_;
  std::vector<float> fetched_;
  LinkStats stats_;
};

}  // namespace

std::unique_ptr<Link> make_host_link(std::unique_ptr<HostPipe> pipe) {
  return std::make_unique<HostLink>(std::move(pipe));
}

}  // namespace tandem::comm
