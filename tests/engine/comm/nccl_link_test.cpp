// The NCCL link (engine/comm/nccl_link.h) between two ranks played by threads of one process: on two
// GPUs with real NCCL (label gpu; skipped without two devices) and, as comm_nccl_link_test_emu, on the
// CUDA and NCCL emulators (CI). Rows arrive bit-exact and in order, several messages in flight both
// ways, left on the receiver's device when it asks (receive_to_device); 16-bit device rows travel device
// to device in their storage (host receivers get them widened to f32); a peer that never joins or that
// aborts mid-transfer fails the other side with its reason.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "engine/comm/nccl_link.h"
#include "engine/core/dtype.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;

struct Devices {
  int target = 0;
  int drafter = 0;
  std::string skip;  // why the test cannot run here
};

Devices devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  Devices d;
  cudaDeviceProp prop{};
  if (n > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
      std::string(prop.name).rfind("tandem emulator", 0) == 0) {
    return d;  // the emulator: both ranks on its one device
  }
  if (n < 2) d.skip = "an NCCL link needs 2 CUDA devices, this machine has " + std::to_string(n);
  d.drafter = 1;
  return d;
}

#define REQUIRE_TWO_DEVICES(d)                  \
  const Devices d = devices();                  \
  do {                                          \
    if (!d.skip.empty()) GTEST_SKIP() << d.skip; \
  } while (false)

NcclLinkOptions options(int rank, int device) {
  NcclLinkOptions o;
  o.rank = rank;
  o.device = device;
  o.init_timeout = 20s;
  o.rows_timeout = 20s;
  return o;
}

struct Pair {
  std::unique_ptr<NcclLink> target;   // rank 0
  std::unique_ptr<NcclLink> drafter;  // rank 1
};

// Both ends set up at once, as two ranks would.
Pair connect(NcclLinkOptions target_options, NcclLinkOptions drafter_options) {
  auto [a, b] = make_local_pipes(0, 1);
  std::optional<Result<std::unique_ptr<NcclLink>>> far;
  std::thread t([&, pipe = std::move(b)]() mutable { far.emplace(make_nccl_link(std::move(pipe), drafter_options)); });
  auto near = make_nccl_link(std::move(a), target_options);
  t.join();
  Pair p;
  EXPECT_TRUE(near.ok()) << near.error().message();
  EXPECT_TRUE(far->ok()) << far->error().message();
  if (near.ok()) p.target = std::move(near).value();
  if (far->ok()) p.drafter = std::move(*far).value();
  return p;
}

// Message i: 2 + i % 5 rows of width 7, of every bit pattern (NaN payloads, denormals, -0).
std::vector<float> message_rows(int sender, int i, uint32_t rows, uint32_t width) {
  std::mt19937 rng(static_cast<uint32_t>(1000 * sender + i));
  std::vector<float> out(size_t{rows} * width);
  for (float& x : out) {
    const auto bits = static_cast<uint32_t>(rng());
    std::memcpy(&x, &bits, sizeof(x));
  }
  return out;
}

constexpr uint32_t kWidth = 7;
constexpr uint32_t kStride = 9;  // device rows are strided and start past row 0
constexpr uint32_t kFirst = 1;
uint32_t rows_of(int i) { return 2 + static_cast<uint32_t>(i) % 5; }

// Which rows of a device output the link is handed: all of it (padding too; the sender picks the message's
// rows by first and count) or only the message's rows (as a backend hands one request's rows).
enum class Slice { kWhole, kMessage };

// Device rows of a backend output of element type T (f32, or the raw bits of BF16/F16 rows such as a
// 16-bit target's taps): `n` message rows after kFirst padding rows and before one more, kStride apart.
// The padding, -1 in f32 and 0xBEEF in 16 bits, shows when a link reads outside the message's rows.
template <class T>
struct DeviceOutput {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t>);
  void* data = nullptr;
  ir::DeviceRows rows;
  DeviceOutput(int device, const std::vector<T>& packed, uint32_t n, Slice slice,
               ir::Storage storage = ir::Storage::kF32) {
    EXPECT_EQ(ir::storage_bytes(storage), sizeof(T)) << "a fixture whose storage is not its element type";
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    std::vector<T> host(size_t{kFirst + n + 1} * kStride, padding());
    for (uint32_t r = 0; r < n; ++r) {
      std::memcpy(&host[(kFirst + r) * kStride], &packed[size_t{r} * kWidth], kWidth * sizeof(T));
    }
    EXPECT_EQ(cudaMalloc(&data, host.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    const bool whole = slice == Slice::kWhole;
    rows.data = static_cast<const T*>(data) + (whole ? 0 : size_t{kFirst} * kStride);
    rows.rows = whole ? kFirst + n + 1 : n;
    rows.width = kWidth;
    rows.stride = kStride;
    rows.storage = storage;
  }
  ~DeviceOutput() { cudaFree(data); }
  DeviceOutput(const DeviceOutput&) = delete;
  DeviceOutput& operator=(const DeviceOutput&) = delete;

 private:
  static T padding() {
    if constexpr (std::is_same_v<T, float>) {
      return -1.0f;
    } else {
      return 0xBEEF;
    }
  }
};

std::vector<uint8_t> header_of(int sender, int i) {
  return {static_cast<uint8_t>('h'), static_cast<uint8_t>(sender), static_cast<uint8_t>(i)};
}

// Sends message i: device rows, except every third (host rows) and every fifth (no rows).
void send_message(NcclLink& link, int device, int sender, int i) {
  const std::vector<uint8_t> header = header_of(sender, i);
  if (i % 5 == 4) {
    auto st = link.send(header, RowsOut::none());
    ASSERT_TRUE(st.ok()) << st.error().message();
    return;
  }
  const std::vector<float> packed = message_rows(sender, i, rows_of(i), kWidth);
  if (i % 3 == 2) {
    auto st = link.send(header, RowsOut::of_host(packed, kWidth));
    ASSERT_TRUE(st.ok()) << st.error().message();
    return;
  }
  DeviceOutput<float> out(device, packed, rows_of(i), Slice::kWhole);
  RowsOut r;
  r.width = kWidth;
  r.device = &out.rows;
  r.first = kFirst;
  r.count = rows_of(i);
  auto st = link.send(header, r);  // returns once `out` may be freed
  ASSERT_TRUE(st.ok()) << st.error().message();
}

void expect_message(NcclLink& link, int sender, int i) {
  auto got = link.recv(Clock::now() + 20s);
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_TRUE(got->has_value()) << "message " << i << " from rank " << sender << " did not come";
  const Packet& p = **got;
  EXPECT_EQ(p.header, header_of(sender, i)) << "message " << i << " out of order";
  if (i % 5 == 4) {
    EXPECT_EQ(p.rows, 0u);
    EXPECT_TRUE(p.data.empty());
    return;
  }
  ASSERT_EQ(p.rows, rows_of(i));
  ASSERT_EQ(p.width, kWidth);
  const std::vector<float> want = message_rows(sender, i, rows_of(i), kWidth);
  ASSERT_EQ(p.data.size(), want.size());
  EXPECT_EQ(std::memcmp(p.data.data(), want.data(), want.size() * sizeof(float)), 0)
      << "message " << i << " from rank " << sender << " is not bit-exact";
}

TEST(NcclLink, TargetToDrafterInOrderWithMessagesInFlight) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  EXPECT_STREQ(p.target->kind(), "nccl");
  EXPECT_EQ(p.target->peer(), 1);
  EXPECT_EQ(p.drafter->peer(), 0);
  constexpr int kMessages = 12;
  std::thread sender([&] {
    ASSERT_EQ(cudaSetDevice(d.target), cudaSuccess);
    for (int i = 0; i < kMessages; ++i) send_message(*p.target, d.target, 0, i);
  });
  std::this_thread::sleep_for(50ms);  // the first kSendSlots messages are in flight before any receive
  for (int i = 0; i < kMessages; ++i) expect_message(*p.drafter, 0, i);
  sender.join();
  EXPECT_EQ(p.target->stats().messages_sent, uint64_t{kMessages});
  EXPECT_EQ(p.drafter->stats().messages_received, uint64_t{kMessages});
  EXPECT_EQ(p.target->stats().bytes_sent, p.drafter->stats().bytes_received);
  // Every row came to the host: the messages with rows, i % 5 != 4.
  uint64_t staged = 0;
  for (int i = 0; i < kMessages; ++i) staged += i % 5 == 4 ? 0 : uint64_t{rows_of(i)} * kWidth * sizeof(float);
  EXPECT_EQ(p.drafter->stats().rows_to_host_bytes, staged);
}

// The rank's backend a receiver hands its rows to (Link::receive_to_device): only its address matters to
// the link; fetch() reads device rows back as a backend would.
class RowsOwner final : public ir::Backend {
 public:
  ir::Caps caps() const override { return {"test", "rows owner", false, false}; }
  Status supports(const ir::Graph&, const ir::Op&) const override { return unsupported(); }
  Result<std::unique_ptr<ir::Weights>> upload(const WeightSource&, std::span<const ir::Graph* const>) override {
    return unsupported();
  }
  Result<std::unique_ptr<ir::Plan>> lower(const ir::Weights&, const ir::Graph&, ir::Bucket) override {
    return unsupported();
  }
  Result<std::unique_ptr<ir::State>> create_state(const ir::Graph&, uint32_t, uint32_t) override {
    return unsupported();
  }
  Status run(ir::Plan&, const ir::Batch&, ir::State*, ir::Outputs&) override { return unsupported(); }
  Status fetch(const ir::DeviceRows& rows, uint32_t first, uint32_t count, ir::Tensor2& out) override {
    fetches += 1;
    if (rows.storage != ir::Storage::kF32) return Error(ErrorKind::kUnsupported, "a test's rows owner fetches f32");
    out.rows = count;
    out.width = rows.width;
    out.data.resize(size_t{count} * rows.width);
    for (uint32_t r = 0; r < count; ++r) {
      const auto* src = static_cast<const float*>(rows.data) + size_t{first + r} * rows.stride;
      if (cudaMemcpy(&out.data[size_t{r} * rows.width], src, rows.width * sizeof(float), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
        return Error(ErrorKind::kDevice, "cudaMemcpy");
      }
    }
    return ok_status();
  }
  int fetches = 0;  // a sender's link that fetched its device rows crossed the host

 private:
  static Error unsupported() { return Error(ErrorKind::kUnsupported, "a test's rows owner runs nothing"); }
};

// Device rows in pieces (one request's rows of a run each) go device to device and stay in the receiver's
// buffer as rows of its backend: bit-exact, in the pieces' order, and nothing copied to the host on
// receipt; host rows sent to such a receiver arrive on its device too.
TEST(NcclLink, ReceivedRowsStayOnTheDeviceAsRowsOfTheOwner) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  RowsOwner owner;
  p.drafter->receive_to_device(owner);
  const std::vector<float> a = message_rows(0, 1, 3, kWidth), b = message_rows(0, 2, 4, kWidth);
  std::thread sender([&] {
    ASSERT_EQ(cudaSetDevice(d.target), cudaSuccess);
    DeviceOutput<float> out_a(d.target, a, 3, Slice::kMessage), out_b(d.target, b, 4, Slice::kMessage);
    const std::vector<ir::DeviceRows> pieces = {out_b.rows, out_a.rows};  // b's rows, then a's
    auto st = p.target->send(header_of(0, 0), RowsOut::of_pieces(pieces, kWidth, owner));
    ASSERT_TRUE(st.ok()) << st.error().message();
    st = p.target->send(header_of(0, 1), RowsOut::of_host(a, kWidth));
    ASSERT_TRUE(st.ok()) << st.error().message();
  });
  std::vector<float> want = b;
  want.insert(want.end(), a.begin(), a.end());
  for (int i = 0; i < 2; ++i) {
    auto got = p.drafter->recv(Clock::now() + 20s);
    ASSERT_TRUE(got.ok()) << got.error().message();
    ASSERT_TRUE(got->has_value());
    const Packet& m = **got;
    EXPECT_EQ(m.header, header_of(0, i));
    ASSERT_TRUE(m.on_device());
    EXPECT_TRUE(m.data.empty());
    EXPECT_EQ(m.device.owner, &owner);
    EXPECT_EQ(m.device.storage, ir::Storage::kF32);
    ASSERT_EQ(m.rows, i == 0 ? 7u : 3u);
    EXPECT_EQ(m.device.rows, m.rows);
    EXPECT_EQ(m.device.width, kWidth);
    EXPECT_EQ(m.device.stride, kWidth);
    ir::Tensor2 back;
    ASSERT_TRUE(owner.fetch(m.device, 0, m.rows, back).ok());
    const std::vector<float>& expected = i == 0 ? want : a;
    ASSERT_EQ(back.data.size(), expected.size());
    EXPECT_EQ(std::memcmp(back.data.data(), expected.data(), expected.size() * sizeof(float)), 0) << "message " << i;
  }
  sender.join();
  EXPECT_EQ(p.drafter->stats().rows_to_host_bytes, 0u);
}

TEST(NcclLink, BothDirectionsAtOnce) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  // Each side puts kSendSlots messages with rows and one without in flight, then receives the other's.
  const std::vector<int> ids = {0, 1, 2, 3, 4};
  auto side = [&](NcclLink& link, int device, int me) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    for (int i : ids) send_message(link, device, me, i);
    for (int i : ids) expect_message(link, 1 - me, i);
  };
  std::thread drafter([&] { side(*p.drafter, d.drafter, 1); });
  side(*p.target, d.target, 0);
  drafter.join();
}

TEST(NcclLink, PeerThatNeverJoinsFailsInitWithinTheTimeout) {
  REQUIRE_TWO_DEVICES(d);
  {
    auto [a, b] = make_local_pipes(0, 1);  // rank 1 holds its end but never sets the link up
    NcclLinkOptions o = options(0, d.target);
    o.init_timeout = 300ms;
    const auto start = Clock::now();
    auto link = make_nccl_link(std::move(a), o);
    const auto took = Clock::now() - start;
    ASSERT_FALSE(link.ok());
    EXPECT_EQ(link.error().kind(), ErrorKind::kTimeout);
    EXPECT_EQ(link.error().message(),
              "NCCL link rank 0 to rank 1: step ncclCommInitRank did not finish within 300 ms (0 of 2 communicators "
              "ready); the communicators were aborted");
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 10s);
  }
  {
    auto [a, b] = make_local_pipes(0, 1);  // rank 0 never sends the unique ids
    NcclLinkOptions o = options(1, d.drafter);
    o.init_timeout = 300ms;
    const auto start = Clock::now();
    auto link = make_nccl_link(std::move(b), o);
    const auto took = Clock::now() - start;
    ASSERT_FALSE(link.ok());
    EXPECT_EQ(link.error().kind(), ErrorKind::kTimeout);
    EXPECT_EQ(link.error().message(),
              "NCCL link rank 1 to rank 0: step unique id: rank 0 sent no NCCL unique id within 300 ms");
    EXPECT_LT(took, 10s);
  }
}

TEST(NcclLink, PeerThatAbortsMidTransferFailsTheReceive) {
  REQUIRE_TWO_DEVICES(d);
  NcclLinkOptions faulty = options(1, d.drafter);
  faulty.abort_after_header = true;
  Pair p = connect(options(0, d.target), faulty);
  ASSERT_TRUE(p.target && p.drafter);
  std::thread drafter([&] {
    ASSERT_EQ(cudaSetDevice(d.drafter), cudaSuccess);
    auto st = p.drafter->send(header_of(1, 0), RowsOut::of_host(message_rows(1, 0, 3, kWidth), kWidth));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(), "NCCL link rank 1 to rank 0: aborted after the header of message 0 (fault injection)");
  });
  drafter.join();
  const auto start = Clock::now();
  auto got = p.target->recv(Clock::now() + 20s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().kind(), ErrorKind::kUnavailable) << got.error().message();
  const std::string& m = got.error().message();
  const std::string prefix = "NCCL link rank 0 to rank 1: message 0 (3 rows of width 7) did not arrive: ";
  EXPECT_EQ(m.substr(0, prefix.size()), prefix) << m;
  EXPECT_NE(m.find("; the link was aborted"), std::string::npos) << m;
  EXPECT_LT(Clock::now() - start, 10s);  // not the rows timeout
  auto again = p.target->recv(Clock::now() + 1s);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message(), "NCCL link rank 0 to rank 1: the link was aborted");
}

// Every 16-bit pattern kind: random bits (NaNs, infinities, subnormals, -0 among them).
std::vector<uint16_t> message_bits(int seed, uint32_t rows) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<uint16_t> out(size_t{rows} * kWidth);
  for (uint16_t& x : out) x = static_cast<uint16_t>(rng());
  return out;
}

std::vector<uint16_t> device_bits(const ir::DeviceRows& d) {
  std::vector<uint16_t> out(size_t{d.rows} * d.width);
  for (uint32_t r = 0; r < d.rows; ++r) {
    EXPECT_EQ(cudaMemcpy(&out[size_t{r} * d.width], static_cast<const uint16_t*>(d.data) + size_t{r} * d.stride,
                         d.width * sizeof(uint16_t), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return out;
}

// A BF16/F16 target's tap rows go device to device in their own storage, in pieces, and arrive as device
// rows of that storage, bit for bit: the sender never fetched them and the receiver copied nothing to
// its host.
TEST(NcclLink, SixteenBitDeviceRowsStayOnTheDevicesInTheirStorage) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  RowsOwner sender_backend, owner;
  p.drafter->receive_to_device(owner);
  const std::vector<ir::Storage> storages = {ir::Storage::kBF16, ir::Storage::kF16};
  std::thread sender([&] {
    ASSERT_EQ(cudaSetDevice(d.target), cudaSuccess);
    for (size_t k = 0; k < storages.size(); ++k) {
      const int seed = 10 * static_cast<int>(k);
      DeviceOutput<uint16_t> a(d.target, message_bits(seed, 3), 3, Slice::kMessage, storages[k]);
      DeviceOutput<uint16_t> b(d.target, message_bits(seed + 1, 4), 4, Slice::kMessage, storages[k]);
      const std::vector<ir::DeviceRows> pieces = {a.rows, b.rows};
      auto st = p.target->send(header_of(0, static_cast<int>(k)), RowsOut::of_pieces(pieces, kWidth, sender_backend));
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
    // One of a device output's rows (of_device), past its first.
    DeviceOutput<uint16_t> c(d.target, message_bits(99, 5), 5, Slice::kMessage, ir::Storage::kBF16);
    auto st = p.target->send(header_of(0, 2), RowsOut::of_device(c.rows, 1, 3, sender_backend));
    ASSERT_TRUE(st.ok()) << st.error().message();
  });
  for (int i = 0; i < 3; ++i) {
    auto got = p.drafter->recv(Clock::now() + 20s);
    ASSERT_TRUE(got.ok()) << got.error().message();
    ASSERT_TRUE(got->has_value());
    const Packet& m = **got;
    EXPECT_EQ(m.header, header_of(0, i));
    ASSERT_TRUE(m.on_device());
    EXPECT_TRUE(m.data.empty());
    EXPECT_EQ(m.device.owner, &owner);
    EXPECT_EQ(m.device.storage, i == 1 ? ir::Storage::kF16 : ir::Storage::kBF16) << "message " << i;
    EXPECT_EQ(m.device.width, kWidth);
    EXPECT_EQ(m.device.stride, kWidth);
    std::vector<uint16_t> want;
    if (i < 2) {
      want = message_bits(10 * i, 3);
      const std::vector<uint16_t> b = message_bits(10 * i + 1, 4);
      want.insert(want.end(), b.begin(), b.end());
    } else {
      const std::vector<uint16_t> all = message_bits(99, 5);
      want.assign(all.begin() + kWidth, all.begin() + 4 * kWidth);
    }
    ASSERT_EQ(m.rows, want.size() / kWidth);
    EXPECT_EQ(m.device.rows, m.rows);
    EXPECT_EQ(device_bits(m.device), want) << "message " << i << " is not bit-exact";
  }
  sender.join();
  EXPECT_EQ(sender_backend.fetches, 0) << "the sender fetched its device rows to the host";
  EXPECT_EQ(owner.fetches, 0);
  EXPECT_EQ(p.drafter->stats().rows_to_host_bytes, 0u);
  // 16-bit rows are half the bytes of f32 ones on the wire.
  EXPECT_EQ(p.target->stats().bytes_sent, p.drafter->stats().bytes_received);
}

// A receiver that did not ask for device rows gets 16-bit rows as host f32, widened exactly.
TEST(NcclLink, SixteenBitRowsToAHostReceiverArriveAsF32) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  RowsOwner sender_backend;
  const std::vector<uint16_t> bits = message_bits(7, 4);
  std::thread sender([&] {
    ASSERT_EQ(cudaSetDevice(d.target), cudaSuccess);
    for (ir::Storage s : {ir::Storage::kBF16, ir::Storage::kF16}) {
      DeviceOutput<uint16_t> out(d.target, bits, 4, Slice::kMessage, s);
      auto st = p.target->send(header_of(0, s == ir::Storage::kBF16 ? 0 : 1),
                               RowsOut::of_device(out.rows, 0, 4, sender_backend));
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
  });
  for (int i = 0; i < 2; ++i) {
    auto got = p.drafter->recv(Clock::now() + 20s);
    ASSERT_TRUE(got.ok()) << got.error().message();
    ASSERT_TRUE(got->has_value());
    const Packet& m = **got;
    EXPECT_EQ(m.header, header_of(0, i));
    EXPECT_FALSE(m.on_device());
    ASSERT_EQ(m.rows, 4u);
    ASSERT_EQ(m.width, kWidth);
    std::vector<float> want(bits.size());
    for (size_t k = 0; k < bits.size(); ++k) want[k] = i == 0 ? bf16_to_float(bits[k]) : half_to_float(bits[k]);
    ASSERT_EQ(m.data.size(), want.size());
    EXPECT_EQ(std::memcmp(m.data.data(), want.data(), want.size() * sizeof(float)), 0) << "message " << i;
  }
  sender.join();
  EXPECT_EQ(sender_backend.fetches, 0);
  EXPECT_EQ(p.drafter->stats().rows_to_host_bytes, uint64_t{2} * bits.size() * sizeof(uint16_t));
}

// One message has one storage on the wire: pieces of two storages are refused before anything is sent.
TEST(NcclLink, PiecesOfMixedStorageAreRefused) {
  REQUIRE_TWO_DEVICES(d);
  Pair p = connect(options(0, d.target), options(1, d.drafter));
  ASSERT_TRUE(p.target && p.drafter);
  RowsOwner sender_backend;
  ASSERT_EQ(cudaSetDevice(d.target), cudaSuccess);
  DeviceOutput<uint16_t> a(d.target, message_bits(1, 2), 2, Slice::kMessage, ir::Storage::kBF16);
  DeviceOutput<uint16_t> b(d.target, message_bits(2, 2), 2, Slice::kMessage, ir::Storage::kF16);
  const std::vector<ir::DeviceRows> pieces = {a.rows, b.rows};
  auto st = p.target->send(header_of(0, 0), RowsOut::of_pieces(pieces, kWidth, sender_backend));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(st.error().message(),
            "NCCL link rank 0 to rank 1: one message mixes device rows of storage bf16 (piece 0) and f16 (piece 1); "
            "all rows of a message must share one storage");
  EXPECT_EQ(p.target->stats().messages_sent, 0u);
  // The link still works after the refusal.
  st = p.target->send(header_of(0, 1), RowsOut::of_pieces(std::span(pieces).first(1), kWidth, sender_backend));
  ASSERT_TRUE(st.ok()) << st.error().message();
  ASSERT_EQ(cudaSetDevice(d.drafter), cudaSuccess);
  auto got = p.drafter->recv(Clock::now() + 20s);
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->header, header_of(0, 1));
  EXPECT_EQ((*got)->rows, 2u);
}

}  // namespace
}  // namespace tandem::comm
