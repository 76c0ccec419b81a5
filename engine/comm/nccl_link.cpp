// make_nccl_link (nccl_link.h): the unique id exchange and non-blocking communicator start-up with a
// deadline, then messages as a header frame on the pipe (kRowsElsewhere, with the rows' storage) followed
// by the rows over NCCL in that storage (f32, f16 or bf16): 16-bit device rows never cross a host.
// Receives poll their completion so that a lost peer (the pipe says so) or a timeout aborts, never hangs.
#include "engine/comm/nccl_link.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstring>
#include <deque>
#include <thread>

#include <fmt/format.h>

#include "engine/core/dtype.h"
#include "engine/core/wire.h"

namespace tandem::comm {
namespace {

constexpr uint32_t kIdMagic = 0x49444E54;  // "TNDI": the NCCL unique ids, the first message on the pipe
constexpr auto kPoll = std::chrono::microseconds(200);

ncclDataType_t nccl_type(ir::Storage s) {
  switch (s) {
    case ir::Storage::kF16: return ncclFloat16;
    case ir::Storage::kBF16: return ncclBfloat16;
    case ir::Storage::kF32:
    case ir::Storage::kU32: break;
  }
  return ncclFloat32;
}

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  if (last != nullptr && last[0] != '\0') return fmt::format("{} ({})", ncclGetErrorString(r), last);
  return ncclGetErrorString(r);
}

// Device memory of the link (rows staged for NCCL) and its pinned host twin for receives.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;
  bool pinned = false;
  ~Buffer() {
    if (data == nullptr) return;
    if (pinned) {
      cudaFreeHost(data);
    } else {
      cudaFree(data);
    }
  }
  Status reserve(size_t want, const char* what) {
    if (want <= bytes) return ok_status();
    if (data != nullptr) {
      if (pinned) {
        cudaFreeHost(data);
      } else {
        cudaFree(data);
      }
      data = nullptr;
      bytes = 0;
    }
    const cudaError_t e = pinned ? cudaMallocHost(&data, want) : cudaMalloc(&data, want);
    if (e != cudaSuccess) {
      data = nullptr;
      return Error::make(ErrorKind::kDevice, "allocating {} bytes for {}: {}", want, what, cudaGetErrorString(e));
    }
    bytes = want;
    return ok_status();
  }
};

struct SendSlot {
  Buffer buffer;
  cudaEvent_t done = nullptr;  // recorded after the slot's ncclSend
};

class NcclLinkImpl final : public NcclLink {
 public:
  NcclLinkImpl(std::unique_ptr<HostPipe> pipe, const NcclLinkOptions& options)
      : pipe_(std::move(pipe)), options_(options), peer_(pipe_->peer()) {
    staged_.pinned = true;
  }
  ~NcclLinkImpl() override { close(); }

  int peer() const override { return peer_; }
  const char* kind() const override { return "nccl"; }
  LinkStats stats() const override { return stats_; }

  Status start();
  Status send(std::span<const uint8_t> header, const RowsOut& rows) override;
  Result<std::optional<Packet>> recv(Clock::time_point deadline) override;
  void receive_to_device(ir::Backend& owner) override { device_owner_ = &owner; }
  void abort() override;

 private:
  std::string where() const { return fmt::format("NCCL link rank {} to rank {}", options_.rank, peer_); }
  Error device_error(cudaError_t e, const char* call) const {
    return Error::make(ErrorKind::kDevice, "{}: {}: {}", where(), call, cudaGetErrorString(e));
  }
  Status exchange_ids(std::array<ncclUniqueId, 2>& ids);
  Status init_comms(const std::array<ncclUniqueId, 2>& ids);
  Status first_transfer();
  // Waits out ncclInProgress from a call on a non-blocking communicator.
  ncclResult_t settle(ncclResult_t r, ncclComm_t comm);
  Status wait_slot(SendSlot& slot, uint64_t message);
  Status wait_rows(cudaEvent_t done, uint64_t message, const Packet& p);
  void close();

  std::unique_ptr<HostPipe> pipe_;
  NcclLinkOptions options_;
  int peer_;
  int nccl_peer_ = 0;                 // the peer's rank in both communicators
  ncclComm_t send_comm_ = nullptr;    // this rank to the peer
  ncclComm_t recv_comm_ = nullptr;    // the peer to this rank
  cudaStream_t send_stream_ = nullptr;
  cudaStream_t recv_stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // rows into a send slot, so send() returns once they are copied
  cudaEvent_t recv_done_ = nullptr;
  std::array<SendSlot, kSendSlots> slots_;
  Buffer received_;  // device
  Buffer staged_;    // pinned host copy of received_ (unused once rows stay on the device)
  ir::Backend* device_owner_ = nullptr;  // receive_to_device: received rows stay in received_, as its rows
  std::deque<std::vector<uint8_t>> early_;  // pipe messages read while waiting for rows
  bool aborted_ = false;
  uint64_t sent_ = 0;
  uint64_t received_count_ = 0;
  LinkStats stats_;
};

ncclResult_t NcclLinkImpl::settle(ncclResult_t r, ncclComm_t comm) {
  const auto until = Clock::now() + options_.rows_timeout;
  while (r == ncclInProgress && Clock::now() < until) {
    std::this_thread::sleep_for(kPoll);
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclInternalError;
  }
  return r;
}

Status NcclLinkImpl::exchange_ids(std::array<ncclUniqueId, 2>& ids) {
  if (options_.rank < peer_) {
    for (ncclUniqueId& id : ids) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) {
        return Error::make(ErrorKind::kDevice, "{}: step unique id: ncclGetUniqueId: {}", where(), nccl_text(r, nullptr));
      }
    }
    WireWriter w;
    w.u32(kIdMagic);
    for (const ncclUniqueId& id : ids) {
      w.u8s(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(id.internal), sizeof(id.internal)));
    }
    return pipe_->send(std::move(w.bytes()));
  }
  const auto deadline = Clock::now() + options_.init_timeout;
  auto got = pipe_->recv(deadline);
  if (!got.ok()) {
    return Error::make(got.error().kind(), "{}: step unique id: {}", where(), got.error().message());
  }
  if (!got->has_value()) {
    return Error::make(ErrorKind::kTimeout, "{}: step unique id: rank {} sent no NCCL unique id within {} ms", where(),
                       peer_, options_.init_timeout.count());
  }
  WireReader r(**got);
  const uint32_t magic = r.u32("magic");
  std::array<std::vector<uint8_t>, 2> raw;
  for (auto& v : raw) v = r.u8s("unique id");
  if (r.failed() || magic != kIdMagic || r.left() != 0 || raw[0].size() != sizeof(ncclUniqueId) ||
      raw[1].size() != sizeof(ncclUniqueId)) {
    return Error::make(ErrorKind::kFormat, "{}: step unique id: the first message ({} bytes) is not two NCCL unique ids",
                       where(), (*got)->size());
  }
  for (size_t i = 0; i < 2; ++i) std::memcpy(ids[i].internal, raw[i].data(), sizeof(ncclUniqueId));
  return ok_status();
}

Status NcclLinkImpl::init_comms(const std::array<ncclUniqueId, 2>& ids) {
  // ids[0]: lower rank to higher; ids[1]: higher to lower. The lower rank is rank 0 in both.
  const bool lower = options_.rank < peer_;
  const int me = lower ? 0 : 1;
  nccl_peer_ = 1 - me;
  ncclComm_t* comms[2] = {lower ? &send_comm_ : &recv_comm_, lower ? &recv_comm_ : &send_comm_};
  for (size_t i = 0; i < 2; ++i) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // returns at once; readiness is polled below, so a missing peer cannot hang us
    const ncclResult_t r = ncclCommInitRankConfig(comms[i], 2, ids[i], me, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      return Error::make(ErrorKind::kDevice, "{}: step ncclCommInitRank: {}", where(), nccl_text(r, *comms[i]));
    }
  }
  const auto deadline = Clock::now() + options_.init_timeout;
  for (;;) {
    int ready = 0;
    for (ncclComm_t* c : comms) {
      ncclResult_t state = ncclInProgress;
      const ncclResult_t q = ncclCommGetAsyncError(*c, &state);
      if (q != ncclSuccess) state = q;
      if (state == ncclSuccess) {
        ready += 1;
      } else if (state != ncclInProgress) {
        return Error::make(ErrorKind::kDevice, "{}: step ncclCommInitRank: {}", where(), nccl_text(state, *c));
      }
    }
    if (ready == 2) return ok_status();
    if (Clock::now() >= deadline) {
      return Error::make(ErrorKind::kTimeout,
                         "{}: step ncclCommInitRank did not finish within {} ms ({} of 2 communicators ready); the "
                         "communicators were aborted",
                         where(), options_.init_timeout.count(), ready);
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Status NcclLinkImpl::start() {
  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) return device_error(e, "cudaSetDevice");
  for (cudaStream_t* s : {&send_stream_, &recv_stream_, &copy_stream_}) {
    if (cudaError_t e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); e != cudaSuccess) {
      return device_error(e, "cudaStreamCreateWithFlags");
    }
  }
  if (cudaError_t e = cudaEventCreate(&recv_done_); e != cudaSuccess) return device_error(e, "cudaEventCreate");
  for (SendSlot& slot : slots_) {
    if (cudaError_t e = cudaEventCreate(&slot.done); e != cudaSuccess) return device_error(e, "cudaEventCreate");
  }
  std::array<ncclUniqueId, 2> ids{};
  TANDEM_TRY(exchange_ids(ids));
  Status st = init_comms(ids);
  if (st.ok()) st = first_transfer();
  if (!st.ok()) abort();
  return st;
}

// NCCL connects two ranks at their first transfer, which can block or fail like the init: one value
// each way now, within the start-up deadline, so the messages' transfers find the connections made.
Status NcclLinkImpl::first_transfer() {
  SendSlot& slot = slots_[0];
  TANDEM_TRY(slot.buffer.reserve(sizeof(float), "a send slot of the NCCL link"));
  TANDEM_TRY(received_.reserve(sizeof(float), "received rows of the NCCL link"));
  if (cudaError_t e = cudaMemsetAsync(slot.buffer.data, 0, sizeof(float), send_stream_); e != cudaSuccess) {
    return device_error(e, "cudaMemsetAsync");
  }
  const auto fail = [&](ncclResult_t r, const char* call, ncclComm_t comm) {
    return Error::make(ErrorKind::kDevice, "{}: step first transfer: {}: {}", where(), call, nccl_text(r, comm));
  };
  // One group: each rank's connect waits for its peer's, so a send and then a receive would deadlock.
  ncclGroupStart();
  const ncclResult_t rs = ncclSend(slot.buffer.data, 1, ncclFloat32, nccl_peer_, send_comm_, send_stream_);
  const ncclResult_t rr = ncclRecv(received_.data, 1, ncclFloat32, nccl_peer_, recv_comm_, recv_stream_);
  const ncclResult_t rg = ncclGroupEnd();
  if (rs != ncclSuccess && rs != ncclInProgress) return fail(rs, "ncclSend", send_comm_);
  if (rr != ncclSuccess && rr != ncclInProgress) return fail(rr, "ncclRecv", recv_comm_);
  if (rg != ncclSuccess && rg != ncclInProgress) return fail(rg, "ncclGroupEnd", send_comm_);
  // With non-blocking communicators the group may still be connecting: its work is queued once both
  // communicators leave ncclInProgress (polled below with the events).
  const auto deadline = Clock::now() + options_.init_timeout;
  for (;;) {
    int ready = 0;
    for (ncclComm_t c : {send_comm_, recv_comm_}) {
      ncclResult_t state = ncclInProgress;
      if (ncclCommGetAsyncError(c, &state) != ncclSuccess) state = ncclInternalError;
      if (state == ncclSuccess) {
        ready += 1;
      } else if (state != ncclInProgress) {
        return fail(state, "ncclCommGetAsyncError", c);
      }
    }
    if (ready == 2) break;
    if (Clock::now() >= deadline) {
      return Error::make(ErrorKind::kTimeout,
                         "{}: step first transfer did not finish within {} ms; the communicators were aborted",
                         where(), options_.init_timeout.count());
    }
    std::this_thread::sleep_for(kPoll);
  }
  if (cudaError_t e = cudaEventRecord(slot.done, send_stream_); e != cudaSuccess) return device_error(e, "cudaEventRecord");
  if (cudaError_t e = cudaEventRecord(recv_done_, recv_stream_); e != cudaSuccess) return device_error(e, "cudaEventRecord");
  for (cudaEvent_t ev : {slot.done, recv_done_}) {
    for (;;) {
      const cudaError_t e = cudaEventQuery(ev);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) return device_error(e, "cudaEventQuery");
      for (ncclComm_t c : {send_comm_, recv_comm_}) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(c, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
          return fail(state, "ncclCommGetAsyncError", c);
        }
      }
      if (Clock::now() >= deadline) {
        return Error::make(ErrorKind::kTimeout,
                           "{}: step first transfer did not finish within {} ms; the communicators were aborted",
                           where(), options_.init_timeout.count());
      }
      std::this_thread::sleep_for(kPoll);
    }
  }
  return ok_status();
}

Status NcclLinkImpl::wait_slot(SendSlot& slot, uint64_t message) {
  const auto until = Clock::now() + options_.rows_timeout;
  for (;;) {
    const cudaError_t e = cudaEventQuery(slot.done);
    if (e == cudaSuccess) return ok_status();
    if (e != cudaErrorNotReady) return device_error(e, "cudaEventQuery");
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(send_comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      abort();
      return Error::make(ErrorKind::kDevice, "{}: sending message {}: {}", where(), message - kSendSlots,
                         ncclGetErrorString(state));
    }
    if (Clock::now() >= until) {
      abort();
      return Error::make(ErrorKind::kTimeout,
                         "{}: rank {} has not received message {} within {} ms ({} messages in flight); the link "
                         "was aborted",
                         where(), peer_, message - kSendSlots, options_.rows_timeout.count(), kSendSlots);
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Status NcclLinkImpl::send(std::span<const uint8_t> header, const RowsOut& rows) {
  if (aborted_) return Error::make(ErrorKind::kUnavailable, "{}: the link was aborted", where());
  const uint32_t n = rows.rows();
  const size_t values = size_t{n} * rows.width;
  std::vector<ir::DeviceRows> parts;
  ir::Storage storage = ir::Storage::kF32;  // host rows are f32
  if (rows.on_device()) {
    auto got = rows.device_parts();
    if (!got.ok()) return std::move(got).error().context(where());
    parts = std::move(got).value();
    // One message has one storage on the wire, so the receiver can read it as one row set.
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].storage == ir::Storage::kU32) {
        return Error::make(ErrorKind::kUnsupported,
                           "{}: device piece {} holds u32 ids; the link sends f32, f16 or bf16 rows", where(), i);
      }
      if (parts[i].storage != parts[0].storage) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "{}: one message mixes device rows of storage {} (piece 0) and {} (piece {}); all rows "
                           "of a message must share one storage",
                           where(), ir::to_string(parts[0].storage), ir::to_string(parts[i].storage), i);
      }
    }
    if (!parts.empty()) storage = parts[0].storage;
  } else if (rows.host.size() != values) {
    return Error::make(ErrorKind::kInternal, "{}: {} values for {} rows of width {}", where(), rows.host.size(), n,
                       rows.width);
  }
  const size_t elem = ir::storage_bytes(storage);
  const uint64_t message = sent_;
  std::vector<uint8_t> frame =
      encode_frame(header, n, rows.width, std::span<const uint8_t>(), storage, values > 0 ? kRowsElsewhere : 0);
  stats_.bytes_sent += frame.size() + values * elem;
  stats_.messages_sent += 1;
  sent_ += 1;
  if (values == 0) return pipe_->send(std::move(frame));

  SendSlot& slot = slots_[message % kSendSlots];
  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) return device_error(e, "cudaSetDevice");
  TANDEM_TRY(wait_slot(slot, message));
  TANDEM_TRY(slot.buffer.reserve(values * elem, "a send slot of the NCCL link"));
  const size_t row_bytes = size_t{rows.width} * elem;
  cudaError_t e = cudaSuccess;
  if (!rows.on_device()) {
    e = cudaMemcpyAsync(slot.buffer.data, rows.host.data(), values * sizeof(float), cudaMemcpyHostToDevice,
                        copy_stream_);
  }
  auto* to = static_cast<uint8_t*>(slot.buffer.data);
  for (const ir::DeviceRows& d : parts) {
    if (d.rows == 0 || e != cudaSuccess) continue;
    e = cudaMemcpy2DAsync(to, row_bytes, d.data, size_t{d.stride} * elem, row_bytes, d.rows,
                          cudaMemcpyDeviceToDevice, copy_stream_);
    to += size_t{d.rows} * row_bytes;
  }
  if (e != cudaSuccess) return device_error(e, "staging rows to send");
  if (e = cudaStreamSynchronize(copy_stream_); e != cudaSuccess) return device_error(e, "cudaStreamSynchronize");
  TANDEM_TRY(pipe_->send(std::move(frame)));
  if (options_.abort_after_header) {
    abort();
    return Error::make(ErrorKind::kCancelled, "{}: aborted after the header of message {} (fault injection)", where(),
                       message);
  }
  const ncclResult_t r = settle(
      ncclSend(slot.buffer.data, values, nccl_type(storage), nccl_peer_, send_comm_, send_stream_), send_comm_);
  if (r != ncclSuccess) {
    Status st = Error::make(ErrorKind::kDevice, "{}: ncclSend of message {} ({} {} rows of width {}): {}", where(),
                            message, n, ir::to_string(storage), rows.width, nccl_text(r, send_comm_));
    abort();
    return st;
  }
  if (e = cudaEventRecord(slot.done, send_stream_); e != cudaSuccess) return device_error(e, "cudaEventRecord");
  return ok_status();
}

Status NcclLinkImpl::wait_rows(cudaEvent_t done, uint64_t message, const Packet& p) {
  const auto until = Clock::now() + options_.rows_timeout;
  auto lost = [&](ErrorKind kind, const std::string& why) {
    abort();
    return Error::make(kind, "{}: message {} ({} rows of width {}) did not arrive: {}; the link was aborted", where(),
                       message, p.rows, p.width, why);
  };
  for (;;) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return ok_status();
    if (e != cudaErrorNotReady) return device_error(e, "cudaEventQuery");
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(recv_comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      return lost(ErrorKind::kUnavailable, nccl_text(state, recv_comm_));
    }
    // The peer may be gone with the transfer half done; its pipe says so (NCCL itself would wait forever).
    auto more = pipe_->recv(Clock::now() + std::chrono::milliseconds(1));
    if (!more.ok()) return lost(more.error().kind(), more.error().message());
    if (more->has_value()) early_.push_back(std::move(**more));
    if (Clock::now() >= until) {
      return lost(ErrorKind::kTimeout, fmt::format("no rows within {} ms", options_.rows_timeout.count()));
    }
  }
}

Result<std::optional<Packet>> NcclLinkImpl::recv(Clock::time_point deadline) {
  if (aborted_) return Error::make(ErrorKind::kUnavailable, "{}: the link was aborted", where());
  std::vector<uint8_t> bytes;
  if (!early_.empty()) {
    bytes = std::move(early_.front());
    early_.pop_front();
  } else {
    TANDEM_ASSIGN(std::optional<std::vector<uint8_t>> got, pipe_->recv(deadline));
    if (!got) return std::optional<Packet>();
    bytes = std::move(*got);
  }
  TANDEM_ASSIGN(Frame f, decode_frame(bytes, peer_));
  const uint64_t message = received_count_;
  const size_t values = size_t{f.packet.rows} * f.packet.width;
  if (values > 0 && (f.flags & kRowsElsewhere) == 0) {
    return Error::make(ErrorKind::kFormat, "{}: message {} carries its rows inline; an NCCL link sends them over NCCL",
                       where(), message);
  }
  received_count_ += 1;
  stats_.messages_received += 1;
  const size_t elem = ir::storage_bytes(f.storage);
  const size_t row_bytes = values * elem;
  stats_.bytes_received += bytes.size() + row_bytes;
  if (values == 0) return std::optional<Packet>(std::move(f.packet));

  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) return device_error(e, "cudaSetDevice");
  TANDEM_TRY(received_.reserve(row_bytes, "received rows of the NCCL link"));
  if (device_owner_ == nullptr) {
    TANDEM_TRY(staged_.reserve(row_bytes, "received rows of the NCCL link (host)"));
  }
  const ncclResult_t r = settle(
      ncclRecv(received_.data, values, nccl_type(f.storage), nccl_peer_, recv_comm_, recv_stream_), recv_comm_);
  if (r != ncclSuccess) {
    Status st = Error::make(r == ncclRemoteError ? ErrorKind::kUnavailable : ErrorKind::kDevice,
                            "{}: message {} ({} rows of width {}) did not arrive: ncclRecv: {}; the link was aborted",
                            where(), message, f.packet.rows, f.packet.width, nccl_text(r, recv_comm_));
    abort();
    return st.error();
  }
  cudaError_t e = cudaSuccess;
  if (device_owner_ == nullptr) {
    // A pinned target, so the copy is queued behind the receive and the host thread stays free to poll.
    e = cudaMemcpyAsync(staged_.data, received_.data, row_bytes, cudaMemcpyDeviceToHost, recv_stream_);
    if (e != cudaSuccess) return device_error(e, "cudaMemcpyAsync");
  }
  if (e = cudaEventRecord(recv_done_, recv_stream_); e != cudaSuccess) return device_error(e, "cudaEventRecord");
  TANDEM_TRY(wait_rows(recv_done_, message, f.packet));
  if (device_owner_ != nullptr) {
    // The receive has finished (polled above), so the owner's stream reads the rows in its own order; its
    // runs synchronize before returning, so the next receive cannot overwrite rows still being read.
    f.packet.device = {received_.data, f.packet.rows, f.packet.width, f.packet.width, f.storage, device_owner_};
    return std::optional<Packet>(std::move(f.packet));
  }
  // Host packets are f32 whatever the rows travelled as, so every host reader keeps working.
  stats_.rows_to_host_bytes += row_bytes;
  f.packet.data.resize(values);
  if (f.storage == ir::Storage::kF32) {
    std::memcpy(f.packet.data.data(), staged_.data, row_bytes);
  } else {
    convert_to_f32(f.storage == ir::Storage::kF16 ? DType::kF16 : DType::kBF16, staged_.data, values,
                   f.packet.data.data());
  }
  return std::optional<Packet>(std::move(f.packet));
}

void NcclLinkImpl::abort() {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t* c : {&send_comm_, &recv_comm_}) {
    if (*c != nullptr) ncclCommAbort(*c);
    *c = nullptr;
  }
  pipe_.reset();  // the peer's pipe reports this rank gone
}

void NcclLinkImpl::close() {
  cudaSetDevice(options_.device);  // the destructor may run on any thread
  if (!aborted_ && send_comm_ != nullptr) {
    // A clean end once the peer has taken every message (wait_slot aborts when it does not).
    for (SendSlot& slot : slots_) {
      if (aborted_ || !wait_slot(slot, sent_ + kSendSlots).ok()) break;
    }
    for (ncclComm_t* c : {&send_comm_, &recv_comm_}) {
      if (aborted_ || *c == nullptr) continue;
      if (settle(ncclCommFinalize(*c), *c) == ncclSuccess) {
        ncclCommDestroy(*c);
      } else {
        ncclCommAbort(*c);
      }
      *c = nullptr;
    }
  }
  abort();
  for (SendSlot& slot : slots_) {
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
  }
  if (recv_done_ != nullptr) cudaEventDestroy(recv_done_);
  for (cudaStream_t s : {send_stream_, recv_stream_, copy_stream_}) {
    if (s != nullptr) cudaStreamDestroy(s);
  }
}

}  // namespace

Result<std::unique_ptr<NcclLink>> make_nccl_link(std::unique_ptr<HostPipe> pipe, const NcclLinkOptions& options) {
  if (pipe == nullptr) return Error(ErrorKind::kInternal, "an NCCL link needs a host pipe");
  if (pipe->peer() == options.rank) {
    return Error::make(ErrorKind::kInvalidArgument, "an NCCL link from rank {} to itself", options.rank);
  }
  auto link = std::make_unique<NcclLinkImpl>(std::move(pipe), options);
  TANDEM_TRY(link->start());
  return std::unique_ptr<NcclLink>(std::move(link));
}

}  // namespace tandem::comm
