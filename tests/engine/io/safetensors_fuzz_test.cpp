// engine/io safetensors under random corruption: byte flips, truncations and header-length edits of a
// valid file must give either a clean error or a file whose every view lies inside it (the sanitizer
// run checks memory safety); the mutations are seeded, so a failure reproduces.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "engine/io/safetensors.h"
#include "tests/engine/io/safetensors_test_util.h"

namespace tandem::io {
namespace {

using testing::TempDir;

std::string valid_file_bytes(const TempDir& dir) {
  const std::string path = dir.file("seed.safetensors");
  const auto values = [](size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
    return v;
  };
  const Status status = write_safetensors(
      path,
      {HostTensor::from_f32("encoder.layers.0.attn.Wqkv.weight", {3, 4}, values(12)),
       HostTensor::from_f32("encoder.final_norm.weight", {5}, values(5), DType::kF16),
       HostTensor::from_f32("temperature", {3}, values(3), DType::kBF16), HostTensor::from_f32("empty", {0}, {})},
      {{"format", "pt"}});
  EXPECT_TRUE(status.ok()) << status.error().message();
  return testing::read_file(path);
}

// Reads every byte of every view, so an out-of-bounds view trips AddressSanitizer.
void touch_all(const SafetensorsFile& file) {
  for (const std::string& name : file.names()) {
    auto view = file.tensor(name);
    ASSERT_TRUE(view.ok());
    const uint64_t bytes = view->numel() * dtype_size(view->dtype);
    const auto* p = static_cast<const unsigned char*>(view->data);
    const std::vector<unsigned char> copy(p, p + bytes);  // ASan checks the copy's reads
    EXPECT_EQ(copy.size(), bytes);
    // to_f32 only for non-empty views: convert_to_f32 calls memcpy with a null destination when n is 0.
    if (bytes > 0) {
      EXPECT_EQ(view->to_f32().size(), view->numel());
    }
  }
}

TEST(SafetensorsFuzz, RandomMutationsNeverCrash) {
  TempDir dir;
  const std::string seed = valid_file_bytes(dir);
  ASSERT_GT(seed.size(), 64u);
  uint64_t header_len = 0;
  for (size_t i = 8; i-- > 0;) header_len = (header_len << 8) | static_cast<unsigned char>(seed[i]);

  std::mt19937_64 rng(20240611);
  const std::string path = dir.file("mutant.safetensors");
  int opened = 0, rejected = 0;
  constexpr int kRounds = 3000;
  for (int round = 0; round < kRounds; ++round) {
    std::string bytes = seed;
    const int kind = static_cast<int>(rng() % 6);
    switch (kind) {
      case 0:  // flip bits anywhere
      case 1: {
        const int flips = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      }
      case 2: {  // replace a header byte with a JSON-significant one
        const char tokens[] = "{}[],:\"-.0123456789eE \\";
        bytes[8 + rng() % header_len] = tokens[rng() % (sizeof(tokens) - 1)];
        break;
      }
      case 3:  // truncate
        bytes.resize(rng() % bytes.size());
        break;
      case 4: {  // a new header length, near the real one or anywhere
        uint64_t n = (rng() % 2) ? header_len + (rng() % 33) - 16 : rng();
        for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xffu);
        break;
      }
      case 5:  // change a digit inside the header (shapes and offsets)
        for (int tries = 0; tries < 64; ++tries) {
          const size_t at = 8 + rng() % header_len;
          if (bytes[at] >= '0' && bytes[at] <= '9') {
            bytes[at] = static_cast<char>('0' + rng() % 10);
            break;
          }
        }
        break;
      default:
        break;
    }
    // A fresh inode each round: truncating a file that was just mapped can wait on writeback.
    std::remove(path.c_str());
    testing::write_file(path, bytes);
    auto file = SafetensorsFile::open(path);
    if (file.ok()) {
      ++opened;
      touch_all(**file);
    } else {
      ++rejected;
      EXPECT_FALSE(file.error().message().empty());
      EXPECT_NE(file.error().message().find(path), std::string::npos) << file.error().message();
    }
  }
  std::printf("%d mutants opened, %d rejected\n", opened, rejected);
  // Both outcomes must occur, or the mutations are not exercising the checks.
  EXPECT_GT(opened, 0);
  EXPECT_GT(rejected, kRounds / 4);
}

}  // namespace
}  // namespace tandem::io
