// The NVRTC module cache (scorer.md §3): a second load takes every kernel file from the disk cache, a
// damaged entry is recompiled and replaced, no cache directory means every file compiles, and every
// listed entry resolves to a kernel.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

namespace fs = std::filesystem;

class ModulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().device, nullptr);
    dir_ = fs::temp_directory_path() / ("tandem-modules-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Result<std::unique_ptr<KernelModules>> load(const std::string& dir) {
    return KernelModules::load(gpu().device->info(), dir);
  }
  fs::path dir_;
};

// One cache directory serves both checks: a full NVRTC compile of every kernel file is what this test costs
// (about a minute on the emulator's machines), so it compiles everything once here.
TEST_F(ModulesTest, ARestartLoadsEveryFileFromTheCacheAndADamagedEntryIsRecompiled) {
  auto first = load(dir_.string());
  ASSERT_TRUE(first.ok()) << first.error().message();
  const size_t files = (*first)->compiled() + (*first)->cached();
  EXPECT_EQ((*first)->cached(), 0u) << (*first)->summary();
  EXPECT_GT(files, 0u);
  for (size_t k = 0; k < kKernelCount; ++k) {
    EXPECT_NE((*first)->kernel(static_cast<KernelId>(k)), nullptr) << kernel_info(static_cast<KernelId>(k)).entry;
  }
  auto second = load(dir_.string());
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ((*second)->cached(), files) << (*second)->summary();
  EXPECT_EQ((*second)->compiled(), 0u);

  // The victim is the smallest entry: any entry shows the recompile, and the smallest is the cheapest to
  // compile again (the largest take NVRTC most of a minute on the emulator's machines).
  fs::path victim;
  uintmax_t victim_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "kernels")) {
    const uintmax_t bytes = fs::file_size(e.path());
    if (victim.empty() || bytes < victim_bytes) {
      victim = e.path();
      victim_bytes = bytes;
    }
  }
  ASSERT_FALSE(victim.empty());
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << "not a cubin";
  auto again = load(dir_.string());
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ((*again)->compiled(), 1u) << (*again)->summary();
  EXPECT_EQ((*again)->cached(), files - 1) << (*again)->summary();
  auto third = load(dir_.string());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->compiled(), 0u) << "the recompiled entry replaced the damaged one";
}

TEST_F(ModulesTest, NoCacheDirectoryCompilesEverything) {
  auto m = load("");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ((*m)->cached(), 0u);
  EXPECT_NE((*m)->summary().find("no cache"), std::string::npos) << (*m)->summary();
}

}  // namespace
}  // namespace tandem::cuda::test
