// Safetensors checkpoints: a memory-mapped reader that validates the header JSON, every dtype, shape,
// offset and size (a truncated, overlapping or lying file is an error naming the tensor, never a read
// out of bounds), sharded checkpoints through model.safetensors.index.json, and a writer for tests.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"

namespace tandem::io {

// One mapped .safetensors file. Tensors of other dtypes than F32/F16/BF16/I8/U8 are rejected at open, naming
// the tensor and its dtype. The mapping lives as long as the object; views point into it.
class SafetensorsFile final : public WeightSource {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile() override;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  Result<TensorView> tensor(std::string_view name) const override;
  bool contains(std::string_view name) const override;
  std::vector<std::string> names() const override;  // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory's weights: model.safetensors, or the shards listed by
// model.safetensors.index.json ("weight_map": tensor -> shard file). A tensor in two shards, a shard
// missing, or an index entry naming a tensor its shard lacks is an error.
class Checkpoint final : public WeightSource {
 public:
  // `dir` holds model.safetensors (preferred, as in transformers) or model.safetensors.index.json;
  // open_file opens one .safetensors file of any name.
  static Result<std::unique_ptr<Checkpoint>> open_dir(const std::string& dir);
  static Result<std::unique_ptr<Checkpoint>> open_file(const std::string& path);

  Result<TensorView> tensor(std::string_view name) const override;
  bool contains(std::string_view name) const override;
  std::vector<std::string> names() const override;

 private:
  std::string origin_;  // the file or index it was opened from, for messages
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*, std::less<>> owner_;
};

// Presents another source's tensors under a prefix ("target." + name), and several sources as one:
// a drafter graph reads its own tensors and the target's embedding and LM head.
class CombinedSource final : public WeightSource {
 public:
  void add(const WeightSource* source, std::string prefix);
  Result<TensorView> tensor(std::string_view name) const override;
  bool contains(std::string_view name) const override;
  std::vector<std::string> names() const override;

 private:
  std::vector<std::pair<const WeightSource*, std::string>> sources_;
};

// Tensors held in memory (tests, tools): also a WeightSource.
struct HostTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  std::vector<unsigned char> bytes;
  static HostTensor from_f32(std::string name, std::vector<uint64_t> shape, const std::vector<float>& values,
                             DType dtype = DType::kF32);
};

class HostTensors final : public WeightSource {
 public:
  void add(HostTensor t);
  Result<TensorView> tensor(std::string_view name) const override;
  bool contains(std::string_view name) const override;
  std::vector<std::string> names() const override;

 private:
  std::map<std::string, HostTensor, std::less<>> tensors_;
};

// Writes tensors (in the given order, 8-byte aligned data) and optional metadata.
Status write_safetensors(const std::string& path, const std::vector<HostTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace tandem::io
