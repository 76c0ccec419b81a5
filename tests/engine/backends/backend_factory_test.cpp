// The backend factory: cpu at f32 only, cuda an error that says why where it cannot run, others named.
#include <gtest/gtest.h>

#include "engine/backends/backend_factory.h"

namespace tandem::backends {
namespace {

TEST(BackendFactory, ByName) {
  BackendOptions cpu_options;
  cpu_options.threads = 2;
  auto cpu = make_backend(cpu_options);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->caps().name, "cpu");
  EXPECT_NE((*cpu)->caps().device.find("2 threads"), std::string::npos);

  cpu_options.precision = ir::Precision::kF16;
  auto half = make_backend(cpu_options);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.error().message().find("f32 only"), std::string::npos);

  // Without CUDA in the build, or without a device, "cuda" is an error that says so; with both, a backend.
  BackendOptions cuda_options;
  cuda_options.name = "cuda";
  auto cuda = make_backend(cuda_options);
  if (cuda.ok()) {
    EXPECT_EQ((*cuda)->caps().name, "cuda");
  } else {
    EXPECT_NE(cuda.error().message().find("backend cuda: "), std::string::npos) << cuda.error().message();
  }

  BackendOptions other;
  other.name = "tpu";
  auto tpu = make_backend(other);
  ASSERT_FALSE(tpu.ok());
  EXPECT_NE(tpu.error().message().find("'tpu' is not one of cpu, cuda"), std::string::npos);
}

}  // namespace
}  // namespace tandem::backends
