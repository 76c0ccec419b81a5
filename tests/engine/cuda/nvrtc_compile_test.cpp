// Every kernels/*.cu compiles with NVRTC for sm_90 (and sm_80) with an empty log: no error, no warning,
// no register spill. NVRTC needs no GPU, so this runs in CI. The entries NVRTC produces are exactly the
// ones engine/cuda lists (kernels_impl.h), file by file, and each kernel file includes only the prelude
// (which includes the other headers).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "engine/core/embedded.h"
#include "engine/cuda/kernels_impl.h"
#include "engine/cuda/nvrtc_impl.h"

namespace tandem::cuda {
namespace {

std::set<std::string> ptx_entries(const std::vector<char>& ptx) {
  const std::string text(ptx.data());
  std::set<std::string> out;
  const std::regex entry(R"(\.entry\s+([A-Za-z_0-9]+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

std::vector<const embedded::File*> sources() {
  std::vector<const embedded::File*> out;
  for (const embedded::File& f : embedded::kernels()) {
    if (is_kernel_source(f.name)) out.push_back(&f);
  }
  return out;
}

TEST(NvrtcCompile, EveryKernelFileCompilesCleanlyForSm90AndSm80) {
  ASSERT_FALSE(sources().empty()) << "no kernels are embedded";
  for (int arch : {90, 80}) {
    for (const embedded::File* f : sources()) {
      auto compiled = compile_kernel_file(*f, embedded::kernels(), NvrtcTarget{arch, false});
      ASSERT_TRUE(compiled.ok()) << compiled.error().message();
      EXPECT_EQ(compiled->log, "") << "kernels/" << f->name << " for sm_" << arch << " is not clean";
      EXPECT_GT(compiled->image.size(), 0u) << f->name;
    }
  }
}

TEST(NvrtcCompile, ProducedEntriesAreExactlyTheListedOnes) {
  std::map<std::string, std::set<std::string>> listed;  // file -> entries
  for (size_t k = 0; k < kKernelCount; ++k) {
    const KernelInfo& info = kernel_info(static_cast<KernelId>(k));
    listed[info.file].insert(info.entry);
  }
  std::set<std::string> files;
  for (const embedded::File* f : sources()) {
    files.insert(std::string(f->name));
    auto compiled = compile_kernel_file(*f, embedded::kernels(), NvrtcTarget{90, true});
    ASSERT_TRUE(compiled.ok()) << compiled.error().message();
    const std::set<std::string> produced = ptx_entries(compiled->image);
    EXPECT_EQ(produced, listed[std::string(f->name)]) << "kernels/" << f->name;
  }
  for (const auto& [file, entries] : listed) EXPECT_TRUE(files.count(file)) << file << " is listed but not embedded";
}

TEST(NvrtcCompile, KernelFilesIncludeOnlyThePrelude) {
  const std::regex include(R"(#\s*include\s*[<"]([^>"]+)[>"])");
  for (const embedded::File& f : embedded::kernels()) {
    const std::string text(f.text);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), include); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (f.name == "prelude.cuh") {
        EXPECT_TRUE(target == "args.cuh" || target == "emu_device.h" || target == "tensor_core.cuh" ||
                    target == "attention.cuh" || target == "choice_keys.cuh" || target == "nucleus.cuh" ||
                    target == "qgemm.cuh" || target == "qgemm_tc.cuh" || target == "head_norm_rope.cuh")
            << "prelude.cuh includes " << target;
      } else if (f.name.size() > 4 && f.name.substr(f.name.size() - 4) == ".cuh") {
        ADD_FAILURE() << "kernels/" << f.name << " includes " << target << " (only prelude.cuh includes headers)";
      } else {
        EXPECT_EQ(target, "prelude.cuh") << "kernels/" << f.name << " includes " << target;
      }
    }
  }
}

TEST(NvrtcCompile, BrokenSourceIsAnErrorCarryingTheLog) {
  const embedded::File bad{"broken.cu", "#include \"prelude.cuh\"\nextern \"C\" __global__ void k() { undefined_call(); }\n"};
  auto compiled = compile_kernel_file(bad, embedded::kernels(), NvrtcTarget{90, false});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind(), ErrorKind::kInternal);
  EXPECT_NE(compiled.error().message().find("broken.cu"), std::string::npos) << compiled.error().message();
  EXPECT_NE(compiled.error().message().find("undefined_call"), std::string::npos) << compiled.error().message();
}

TEST(NvrtcCompile, TargetFallsBackToPtxForArchitecturesNewerThanNvrtc) {
  auto exact = nvrtc_target(90);
  ASSERT_TRUE(exact.ok()) << exact.error().message();
  EXPECT_EQ(exact->arch, 90);
  EXPECT_FALSE(exact->ptx);
  auto future = nvrtc_target(990);
  ASSERT_TRUE(future.ok()) << future.error().message();
  EXPECT_TRUE(future->ptx);
  EXPECT_LT(future->arch, 990);
  auto ancient = nvrtc_target(10);
  EXPECT_FALSE(ancient.ok());
}

}  // namespace
}  // namespace tandem::cuda
