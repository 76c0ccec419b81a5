// The data-plane link chooser (engine/comm/data_link.h) that the target and drafter runners use: CPU
// ranks (or a CPU and a CUDA rank) get the host link, two CUDA ranks the NCCL link, set up by both at
// once, carrying a draft ask's header and tap rows bit-exact and the reply back. On two GPUs with real
// NCCL (label gpu; skipped without two devices) and, as comm_data_link_test_emu, on the CUDA and NCCL
// emulators (CI).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/data_link.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;

// The drafter's device: 1 on real GPUs, the emulator's one device otherwise; `skip` says why not.
struct Devices {
  int drafter = 0;
  std::string skip;
};

Devices devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  Devices d;
  cudaDeviceProp prop{};
  if (n > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
      std::string(prop.name).rfind("tandem emulator", 0) == 0) {
    return d;
  }
  if (n < 2) d.skip = "an NCCL link needs 2 CUDA devices, this machine has " + std::to_string(n);
  d.drafter = 1;
  return d;
}

struct Pair {
  std::unique_ptr<Link> target;   // rank 1
  std::unique_ptr<Link> drafter;  // rank 2
};

// Both ends made at once, as the two ranks' runner factories do.
Pair connect(const LinkEnd& target, const LinkEnd& drafter) {
  auto [a, b] = make_local_pipes(1, 2);
  std::optional<Result<std::unique_ptr<Link>>> far;
  std::thread t([&, pipe = std::move(b)]() mutable {
    far.emplace(make_data_link(std::move(pipe), 2, drafter, target, 20s));
  });
  auto near = make_data_link(std::move(a), 1, target, drafter, 20s);
  t.join();
  Pair p;
  EXPECT_TRUE(near.ok()) << near.error().message();
  EXPECT_TRUE(far->ok()) << far->error().message();
  if (near.ok()) p.target = std::move(near).value();
  if (far->ok()) p.drafter = std::move(*far).value();
  return p;
}

// An ask's worth: a header and 3 tap rows of width 5 (a NaN payload, -0 and a denormal among them),
// then the reply without rows.
void exchange(Pair& p) {
  ASSERT_TRUE(p.target && p.drafter);
  std::vector<float> rows(15);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i) * 0.25f - 1.0f;
  const uint32_t nan_bits = 0x7fc01234u, denormal_bits = 0x00000003u;
  std::memcpy(&rows[3], &nan_bits, 4);
  std::memcpy(&rows[7], &denormal_bits, 4);
  rows[11] = -0.0f;
  const std::vector<uint8_t> header = {1, 2, 3, 4};
  ASSERT_TRUE(p.target->send(header, RowsOut::of_host(rows, 5)).ok());
  auto got = p.drafter->recv(Clock::now() + 20s);
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->header, header);
  EXPECT_EQ((*got)->rows, 3u);
  EXPECT_EQ((*got)->width, 5u);
  ASSERT_EQ((*got)->data.size(), rows.size());
  EXPECT_EQ(std::memcmp((*got)->data.data(), rows.data(), rows.size() * sizeof(float)), 0);
  ASSERT_TRUE(p.drafter->send(std::vector<uint8_t>{9}, RowsOut::none()).ok());
  auto reply = p.target->recv(Clock::now() + 20s);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  ASSERT_TRUE(reply->has_value());
  EXPECT_EQ((*reply)->header, std::vector<uint8_t>{9});
  EXPECT_EQ((*reply)->rows, 0u);
}

TEST(DataLink, CpuRanksAndMixedPairsUseTheHostLink) {
  EXPECT_STREQ(data_link_kind({false, 0}, {false, 0}), "mpi");
  EXPECT_STREQ(data_link_kind({true, 0}, {false, 0}), "mpi");
  EXPECT_STREQ(data_link_kind({false, 0}, {true, 1}), "mpi");
  Pair p = connect({false, 0}, {true, 0});
  ASSERT_TRUE(p.target && p.drafter);
  EXPECT_STREQ(p.target->kind(), "mpi");
  EXPECT_STREQ(p.drafter->kind(), "mpi");
  exchange(p);
}

TEST(DataLink, CudaRanksUseNccl) {
  const Devices d = devices();
  if (!d.skip.empty()) GTEST_SKIP() << d.skip;
  EXPECT_STREQ(data_link_kind({true, 0}, {true, d.drafter}), "nccl");
  Pair p = connect({true, 0}, {true, d.drafter});
  ASSERT_TRUE(p.target && p.drafter);
  EXPECT_STREQ(p.target->kind(), "nccl");
  EXPECT_STREQ(p.drafter->kind(), "nccl");
  exchange(p);
}

}  // namespace
}  // namespace tandem::comm
