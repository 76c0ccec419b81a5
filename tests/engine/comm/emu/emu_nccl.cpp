// The emulated NCCL (tests only): the subset engine/comm/nccl_link.cpp calls, in one process, with
// threads standing in for ranks, over the CUDA emulator's device memory (tests/engine/cuda/emu).
// Communicators meet by unique id; a non-blocking init stays ncclInProgress until every rank joined.
// ncclSend is eager (the bytes are queued per (sender, receiver) and the call returns); ncclRecv blocks
// until a message is there, or until a communicator of the clique was aborted or destroyed, which real
// NCCL would not notice (it would hang): the emulation answers ncclRemoteError so tests end.
// Groups only count their depth: operations inside one run at once.
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "emu_internal.h"

namespace {

struct Clique {
  int nranks = 0;
  int joined = 0;
  bool broken = false;  // a member aborted or was destroyed
  std::map<std::pair<int, int>, std::deque<std::vector<unsigned char>>> mail;  // (from, to)
};

struct Registry {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, std::shared_ptr<Clique>> cliques;
  unsigned long long next_id = 1;
};

Registry& reg() {
  static Registry r;
  return r;
}

thread_local std::string t_last_error;
thread_local int t_group_depth = 0;

ncclResult_t fail(ncclResult_t r, std::string why) {
  t_last_error = std::move(why);
  return r;
}

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    case ncclNumTypes:
      return 0;
  }
  return 0;
}

}  // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  ncclResult_t async = ncclSuccess;
  std::string last_error;
};

namespace {

// Marks the clique broken and wakes every waiting receive; the comm's handle is freed.
void leave(ncclComm_t comm) {
  {
    std::lock_guard lock(reg().mu);
    comm->clique->broken = true;
  }
  reg().changed.notify_all();
  delete comm;
}

ncclResult_t check_ready(ncclComm_t comm, int peer, const void* buf, size_t bytes, const char* call) {
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(call) + ": null communicator");
  if (comm->clique->joined < comm->clique->nranks) {
    return fail(ncclInvalidUsage, std::string(call) + ": communicator not initialized yet");
  }
  if (peer < 0 || peer >= comm->clique->nranks || peer == comm->rank) {
    return fail(ncclInvalidArgument, std::string(call) + ": peer " + std::to_string(peer) + " is out of range");
  }
  if (bytes > 0 && !tandem::emu::device_readable(buf, bytes)) {
    return fail(ncclInvalidArgument, std::string(call) + ": buffer is not device memory of that size");
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclNumResults:
      return "unknown result code";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return t_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: null id");
  std::memset(id->internal, 0, sizeof(id->internal));
  std::lock_guard lock(reg().mu);
  std::snprintf(id->internal, sizeof(id->internal), "tandem-emu-nccl-%llu", reg().next_id++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "ncclCommInitRank: bad communicator, rank or size");
  }
  const bool blocking = config == nullptr || config->blocking != 0;
  const std::string key(id.internal, sizeof(id.internal));
  std::unique_lock lock(reg().mu);
  std::shared_ptr<Clique>& c = reg().cliques[key];
  if (c == nullptr) {
    c = std::make_shared<Clique>();
    c->nranks = nranks;
  }
  if (c->nranks != nranks || c->joined >= nranks) {
    return fail(ncclInvalidUsage, "ncclCommInitRank: the unique id's clique is full or of another size");
  }
  auto* made = new ncclComm();
  made->clique = c;
  made->rank = rank;
  c->joined += 1;
  *comm = made;
  std::shared_ptr<Clique> clique = c;
  if (clique->joined == nranks) reg().cliques.erase(key);  // ids are single use
  lock.unlock();
  reg().changed.notify_all();
  if (!blocking) return ncclInProgress;
  lock.lock();
  reg().changed.wait(lock, [&] { return clique->joined == clique->nranks; });
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async) {
  if (comm == nullptr || async == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  std::lock_guard lock(reg().mu);
  if (comm->async != ncclSuccess) {
    *async = comm->async;
  } else {
    *async = comm->clique->joined < comm->clique->nranks ? ncclInProgress : ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommFinalize: null communicator");
  return ncclSuccess;  // sends are eager: nothing is left to flush
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  leave(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  leave(comm);
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  t_group_depth += 1;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group");
  t_group_depth -= 1;
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  tandem::emu::DeviceScope scope;
  const size_t bytes = count * type_bytes(type);
  std::unique_lock lock(reg().mu);
  if (ncclResult_t r = check_ready(comm, peer, buf, bytes, "ncclSend"); r != ncclSuccess) return r;
  const auto* p = static_cast<const unsigned char*>(buf);
  comm->clique->mail[{comm->rank, peer}].emplace_back(p, p + bytes);
  lock.unlock();
  reg().changed.notify_all();
  return ncclSuccess;
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  tandem::emu::DeviceScope scope;
  const size_t bytes = count * type_bytes(type);
  std::unique_lock lock(reg().mu);
  if (ncclResult_t r = check_ready(comm, peer, buf, bytes, "ncclRecv"); r != ncclSuccess) return r;
  auto& box = comm->clique->mail[{peer, comm->rank}];
  reg().changed.wait(lock, [&] { return !box.empty() || comm->clique->broken; });
  if (box.empty()) {
    comm->async = ncclRemoteError;
    return fail(ncclRemoteError, "ncclRecv: rank " + std::to_string(peer) + " left the communicator");
  }
  std::vector<unsigned char> msg = std::move(box.front());
  box.pop_front();
  if (msg.size() != bytes) {
    comm->async = ncclInvalidUsage;
    return fail(ncclInvalidUsage, "ncclRecv: " + std::to_string(bytes) + " bytes posted for a message of " +
                                      std::to_string(msg.size()));
  }
  if (bytes > 0) std::memcpy(buf, msg.data(), bytes);
  return ncclSuccess;
}

}  // extern "C"
