// engine/io safetensors: write/read round trips for every dtype, sharded checkpoints, combined and host
// sources, and malformed files, each rejected with an error that names the file, tensor and fault.
#include "engine/io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "tests/engine/io/safetensors_test_util.h"

namespace tandem::io {
namespace {

using ::testing::HasSubstr;
using testing::raw_safetensors;
using testing::TempDir;
using testing::write_file;

// Values exact in F32, F16 and BF16, so every round trip must be bit-exact.
const std::vector<float> kExact = {0.0f, 1.0f, -2.0f, 0.5f, 1.5f, -0.125f, 3.0f, 1024.0f, -0.0f, 0.25f, 6.0f, -96.0f};

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  std::vector<HostTensor> tensors = {
      HostTensor::from_f32("a.f32", {3, 4}, kExact, DType::kF32),
      HostTensor::from_f32("b.f16", {2, 6}, kExact, DType::kF16),
      HostTensor::from_f32("c.bf16", {12}, kExact, DType::kBF16),
      HostTensor::from_f32("d.odd", {3}, {1.0f, 2.0f, 3.0f}, DType::kF16),  // 6 bytes: later data unaligned
      HostTensor::from_f32("e.empty", {0, 5}, {}, DType::kF32),
      HostTensor::from_f32("f.scalar", {}, {-1.0f}, DType::kF32),
  };
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ((*file)->names(), (std::vector<std::string>{"a.f32", "b.f16", "c.bf16", "d.odd", "e.empty", "f.scalar"}));
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  for (const HostTensor& t : tensors) {
    SCOPED_TRACE(t.name);
    auto view = (*file)->tensor(t.name);
    ASSERT_TRUE(view.ok()) << view.error().message();
    EXPECT_EQ(view->name, t.name);
    EXPECT_EQ(view->dtype, t.dtype);
    EXPECT_EQ(view->shape, t.shape);
    ASSERT_EQ(view->numel() * dtype_size(t.dtype), t.bytes.size());
    if (!t.bytes.empty()) {
      EXPECT_EQ(std::memcmp(view->data, t.bytes.data(), t.bytes.size()), 0);
    }
  }
  EXPECT_EQ((*file)->tensor("a.f32")->to_f32(), kExact);
  EXPECT_EQ((*file)->tensor("b.f16")->to_f32(), kExact);
  EXPECT_EQ((*file)->tensor("c.bf16")->to_f32(), kExact);
  EXPECT_EQ((*file)->tensor("f.scalar")->to_f32(), std::vector<float>{-1.0f});
}

TEST(Safetensors, WriterLayoutFollowsTheFormat) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  // 1.0 is 0x3c00 in IEEE half and 0x3f80 in bfloat16 (little-endian in the file).
  ASSERT_TRUE(write_safetensors(path, {HostTensor::from_f32("h", {1}, {1.0f}, DType::kF16),
                                       HostTensor::from_f32("b", {1}, {1.0f}, DType::kBF16)})
                  .ok());
  const std::string bytes = testing::read_file(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 4);
  const std::string header = bytes.substr(8, n);
  EXPECT_THAT(header, HasSubstr("\"h\":{\"data_offsets\":[0,2],\"dtype\":\"F16\",\"shape\":[1]}"));
  EXPECT_THAT(header, HasSubstr("\"b\":{\"data_offsets\":[2,4],\"dtype\":\"BF16\",\"shape\":[1]}"));
  EXPECT_EQ(bytes.substr(8 + n), std::string("\x00\x3c\x80\x3f", 4));
}

TEST(Safetensors, EmptyFileAndPaddedHeaderAreValid) {
  TempDir dir;
  write_file(dir.file("e.safetensors"), raw_safetensors("{}      "));
  auto file = SafetensorsFile::open(dir.file("e.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_TRUE((*file)->names().empty());
  EXPECT_FALSE((*file)->contains("x"));
  auto missing = (*file)->tensor("x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("no tensor named \"x\""));
}

struct Malformed {
  const char* label;
  std::string bytes;
  ErrorKind kind;
  std::vector<std::string> needles;  // every one must be in the message
};

std::vector<Malformed> malformed_files() {
  const std::string f32x2 = std::string(8, '\0');
  return {
      {"truncated file", std::string("\x05\x00\x00", 3), ErrorKind::kFormat, {"3 bytes", "too short"}},
      {"header length past the end", raw_safetensors("{}", "", 1000), ErrorKind::kFormat,
       {"header length 1000", "past the end of the file"}},
      {"header length over the cap", raw_safetensors("{}", "", uint64_t{1} << 40), ErrorKind::kFormat,
       {"exceeds the 104857600 byte limit"}},
      {"header length near 2^64", raw_safetensors("{}", "", ~uint64_t{0} - 3), ErrorKind::kFormat, {"exceeds"}},
      {"bad JSON", raw_safetensors("{\"w\": {\"dtype\": "), ErrorKind::kFormat, {"invalid JSON"}},
      {"binary garbage header", raw_safetensors(std::string("\xff\xfe\x00\x01", 4)), ErrorKind::kFormat,
       {"invalid JSON"}},
      {"header not an object", raw_safetensors("[1, 2]"), ErrorKind::kFormat, {"header must be a JSON object"}},
      {"missing dtype", raw_safetensors(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "missing \"dtype\""}},
      {"missing data_offsets", raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "missing \"data_offsets\""}},
      {"unknown dtype", raw_safetensors(R"({"w": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "unknown dtype \"F33\""}},
      {"unsupported dtype I64",
       raw_safetensors(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kUnsupported, {"tensor \"w\"", "dtype I64 is not supported"}},
      {"unsupported dtype F64",
       raw_safetensors(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kUnsupported, {"tensor \"w\"", "dtype F64"}},
      {"dtype not a string", raw_safetensors(R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "dtype must be a string"}},
      {"negative shape", raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})",
                                         f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "\"shape\"[1] is -1, not a non-negative integer"}},
      {"non-integer shape", raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})",
                                            f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "\"shape\"[0] is 2.5"}},
      {"shape not a list", raw_safetensors(R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "\"shape\" must be a list of integers"}},
      {"offsets past the end",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "data_offsets [0, 16] run past the end of the data (8 bytes)"}},
      {"begin after end", raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "data_offsets [8, 0]: begin is past end"}},
      {"offsets not a pair",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "data_offsets has 3 entries"}},
      {"size not matching shape",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "hold 8 bytes, but shape [3] of F32 needs 12 bytes"}},
      {"byte size overflow",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
                       f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "overflows"}},
      {"overlapping tensors",
       raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                       R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                       std::string(12, '\0')),
       ErrorKind::kFormat, {"tensor \"b\" data_offsets [4, 12] overlap tensor \"a\" data_offsets [0, 8]"}},
      {"hole in the data",
       raw_safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                       R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                       std::string(12, '\0')),
       ErrorKind::kFormat, {"hole in the data: bytes [4, 8) before tensor \"b\""}},
      {"trailing bytes", raw_safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", f32x2),
       ErrorKind::kFormat, {"hole in the data: bytes [4, 8) at the end"}},
      {"duplicate tensor name",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                       R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                       f32x2),
       ErrorKind::kFormat, {"duplicate key \"w\""}},
      {"duplicate field in a tensor",
       raw_safetensors(R"({"w": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", f32x2),
       ErrorKind::kFormat, {"duplicate key \"dtype\" in object \"w\""}},
      {"extra field in a tensor",
       raw_safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "note": 1}})", f32x2),
       ErrorKind::kFormat, {"tensor \"w\"", "unexpected key \"note\""}},
      {"tensor entry not an object", raw_safetensors(R"({"w": [1, 2]})"), ErrorKind::kFormat,
       {"tensor \"w\"", "expected an object"}},
      {"metadata value not a string", raw_safetensors(R"({"__metadata__": {"format": 1}})"), ErrorKind::kFormat,
       {"__metadata__ key \"format\": expected a string, found 1"}},
      {"metadata not an object", raw_safetensors(R"({"__metadata__": "pt"})"), ErrorKind::kFormat,
       {"__metadata__ must be an object"}},
      {"nesting deeper than the format", raw_safetensors(R"({"w": {"shape": [[1]]}})"), ErrorKind::kFormat,
       {"nesting deeper than 3 levels"}},
  };
}

TEST(Safetensors, MalformedFilesAreRejectedWithTheFault) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  for (const Malformed& m : malformed_files()) {
    SCOPED_TRACE(m.label);
    write_file(path, m.bytes);
    auto file = SafetensorsFile::open(path);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.error().kind(), m.kind) << file.error().message();
    EXPECT_THAT(file.error().message(), HasSubstr(path)) << "the message names the file";
    for (const std::string& needle : m.needles) EXPECT_THAT(file.error().message(), HasSubstr(needle));
  }
}

TEST(Safetensors, MissingFileIsNotFound) {
  TempDir dir;
  auto file = SafetensorsFile::open(dir.file("absent.safetensors"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(file.error().message(), HasSubstr("absent.safetensors"));
}

TEST(Safetensors, ZeroSizeTensorsMayShareAnOffset) {
  TempDir dir;
  write_file(dir.file("z.safetensors"),
             raw_safetensors(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},)"
                             R"( "b": {"dtype": "F16", "shape": [2, 0], "data_offsets": [4, 4]},)"
                             R"( "c": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "d": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                             std::string(8, '\0')));
  auto file = SafetensorsFile::open(dir.file("z.safetensors"));
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ((*file)->tensor("b")->numel(), 0u);
}

TEST(Safetensors, WriterRejectsBadTensors) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  auto short_bytes = write_safetensors(path, {HostTensor::from_f32("w", {2, 3}, {1.0f, 2.0f})});
  ASSERT_FALSE(short_bytes.ok());
  EXPECT_EQ(short_bytes.error().kind(), ErrorKind::kShape);
  EXPECT_THAT(short_bytes.error().message(), HasSubstr("tensor \"w\": shape [2, 3] of F32 needs 24 bytes, holds 8"));
  const HostTensor w = HostTensor::from_f32("w", {1}, {1.0f});
  auto twice = write_safetensors(path, {w, w});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.error().message(), HasSubstr("tensor \"w\" given twice"));
  auto reserved = write_safetensors(path, {HostTensor::from_f32("__metadata__", {1}, {1.0f})});
  ASSERT_FALSE(reserved.ok());
  auto bad_dir = write_safetensors(dir.file("no/such/dir.safetensors"), {});
  ASSERT_FALSE(bad_dir.ok());
  EXPECT_EQ(bad_dir.error().kind(), ErrorKind::kIo);
}

// ---- Checkpoints ----

class CheckpointTest : public ::testing::Test {
 protected:
  void write_shards() {
    ASSERT_TRUE(write_safetensors(dir_.file("model-00001-of-00002.safetensors"),
                                  {HostTensor::from_f32("a", {2}, {1.0f, 2.0f}),
                                   HostTensor::from_f32("unlisted", {1}, {7.0f})})
                    .ok());
    ASSERT_TRUE(write_safetensors(dir_.file("model-00002-of-00002.safetensors"),
                                  {HostTensor::from_f32("b", {3}, {3.0f, 4.0f, 5.0f}, DType::kBF16)})
                    .ok());
  }
  void write_index(const std::string& weight_map) {
    write_file(dir_.file("model.safetensors.index.json"),
               R"({"metadata": {"total_size": 14}, "weight_map": )" + weight_map + "}");
  }
  TempDir dir_;
};

TEST_F(CheckpointTest, ShardedCheckpointFollowsTheWeightMap) {
  write_shards();
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message();
  EXPECT_EQ((*ckpt)->names(), (std::vector<std::string>{"a", "b"}));  // "unlisted" is ignored, like HF
  EXPECT_FALSE((*ckpt)->contains("unlisted"));
  EXPECT_EQ((*ckpt)->tensor("a")->to_f32(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ((*ckpt)->tensor("b")->to_f32(), (std::vector<float>{3.0f, 4.0f, 5.0f}));
  EXPECT_EQ((*ckpt)->tensor("b")->dtype, DType::kBF16);
  auto missing = (*ckpt)->tensor("c");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("model.safetensors.index.json: no tensor named \"c\""));
}

TEST_F(CheckpointTest, SingleFileWinsOverAnIndex) {
  write_index(R"({"a": "missing.safetensors"})");
  ASSERT_TRUE(write_safetensors(dir_.file("model.safetensors"), {HostTensor::from_f32("x", {1}, {9.0f})}).ok());
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message();
  EXPECT_EQ((*ckpt)->names(), std::vector<std::string>{"x"});
  auto file = Checkpoint::open_file(dir_.file("model.safetensors"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->tensor("x")->to_f32(), std::vector<float>{9.0f});
}

TEST_F(CheckpointTest, EmptyDirectoryNamesBothFiles) {
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(ckpt.error().message(), HasSubstr("neither model.safetensors nor model.safetensors.index.json"));
}

TEST_F(CheckpointTest, IndexNamingAMissingShard) {
  write_shards();
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00003-of-00003.safetensors"})");
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(ckpt.error().message(),
              HasSubstr("weight_map[\"b\"] names shard \"model-00003-of-00003.safetensors\", which does not exist"));
}

TEST_F(CheckpointTest, IndexListingATensorItsShardLacks) {
  write_shards();
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors"})");
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.error().message(),
              HasSubstr("weight_map lists tensor \"b\" in shard \"model-00001-of-00002.safetensors\", which lacks it"));
}

TEST_F(CheckpointTest, TensorInTwoShards) {
  write_shards();
  ASSERT_TRUE(write_safetensors(dir_.file("model-00002-of-00002.safetensors"),
                                {HostTensor::from_f32("a", {2}, {1.0f, 2.0f}), HostTensor::from_f32("b", {1}, {1.0f})})
                  .ok());
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.error().message(), HasSubstr("tensor \"a\" is in two shards"));
  EXPECT_THAT(ckpt.error().message(), HasSubstr("model-00001-of-00002.safetensors"));
  EXPECT_THAT(ckpt.error().message(), HasSubstr("model-00002-of-00002.safetensors"));
}

TEST_F(CheckpointTest, MalformedIndexFiles) {
  write_shards();
  const struct {
    const char* label;
    std::string text;
    std::string needle;
  } cases[] = {
      {"no weight_map", R"({"metadata": {}})", "missing \"weight_map\""},
      {"weight_map not an object", R"({"weight_map": ["a"]})", "\"weight_map\" must be an object"},
      {"shard not a string", R"({"weight_map": {"a": 1}})", "weight_map[\"a\"] must name a file"},
      {"shard escaping the directory", R"({"weight_map": {"a": "../model.safetensors"}})",
       "weight_map[\"a\"] must name a file inside the checkpoint directory"},
      {"absolute shard path", R"({"weight_map": {"a": "/etc/passwd"}})", "must name a file inside"},
      {"duplicate tensor in the map", R"({"weight_map": {"a": "x", "a": "y"}})", "duplicate key \"a\""},
      {"not JSON", "{weight_map}", "invalid JSON"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    write_file(dir_.file("model.safetensors.index.json"), c.text);
    auto ckpt = Checkpoint::open_dir(dir_.path());
    ASSERT_FALSE(ckpt.ok());
    EXPECT_THAT(ckpt.error().message(), HasSubstr("model.safetensors.index.json"));
    EXPECT_THAT(ckpt.error().message(), HasSubstr(c.needle));
  }
}

TEST_F(CheckpointTest, CorruptShardNamesTheShard) {
  write_shards();
  write_file(dir_.file("model-00002-of-00002.safetensors"), raw_safetensors("{", ""));
  write_index(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  auto ckpt = Checkpoint::open_dir(dir_.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.error().message(), HasSubstr("model-00002-of-00002.safetensors: header: invalid JSON"));
}

// ---- Combined and host sources ----

TEST(CombinedSource, PrefixesAndOrder) {
  HostTensors drafter;
  drafter.add(HostTensor::from_f32("fc.weight", {1}, {1.0f}));
  drafter.add(HostTensor::from_f32("embed_tokens.weight", {1}, {2.0f}));
  HostTensors target;
  target.add(HostTensor::from_f32("embed_tokens.weight", {1}, {3.0f}));
  target.add(HostTensor::from_f32("lm_head.weight", {1}, {4.0f}));
  CombinedSource combined;
  combined.add(&drafter, "");
  combined.add(&target, "target.");

  EXPECT_EQ(combined.tensor("fc.weight")->to_f32(), std::vector<float>{1.0f});
  EXPECT_EQ(combined.tensor("embed_tokens.weight")->to_f32(), std::vector<float>{2.0f});
  auto target_embed = combined.tensor("target.embed_tokens.weight");
  ASSERT_TRUE(target_embed.ok());
  EXPECT_EQ(target_embed->name, "target.embed_tokens.weight");
  EXPECT_EQ(target_embed->to_f32(), std::vector<float>{3.0f});
  EXPECT_TRUE(combined.contains("target.lm_head.weight"));
  EXPECT_FALSE(combined.contains("lm_head.weight"));
  EXPECT_EQ(combined.names(), (std::vector<std::string>{"embed_tokens.weight", "fc.weight",
                                                        "target.embed_tokens.weight", "target.lm_head.weight"}));
  auto missing = combined.tensor("target.fc.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("no tensor named \"target.fc.weight\""));
}

TEST(HostTensors, ViewsAndSizeChecks) {
  HostTensors host;
  host.add(HostTensor::from_f32("w", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}, DType::kF16));
  host.add(HostTensor::from_f32("short", {2, 2}, {1.0f}));
  auto w = host.tensor("w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->to_f32(), (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  auto bad = host.tensor("short");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kShape);
  EXPECT_THAT(bad.error().message(), HasSubstr("tensor \"short\": shape [2, 2] of F32 needs 16 bytes, holds 4"));
  EXPECT_EQ(host.names(), (std::vector<std::string>{"short", "w"}));
}

}  // namespace
}  // namespace tandem::io
