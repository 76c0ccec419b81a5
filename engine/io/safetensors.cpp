// Safetensors reader (mmap, every header field validated before any view is made), sharded checkpoints,
// combined and in-memory weight sources, and the writer used by tests and tools. Follows the format of
// huggingface/safetensors: u64 LE header length, header JSON, then a data region tensors tile exactly.
#include "engine/io/safetensors.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/io/hf_config.h"  // read_json_file
#include "engine/io/json_parse_impl.h"
#include "engine/io/regular_file_impl.h"

namespace tandem::io {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// A safetensors header is root object -> tensor object -> shape/offset arrays.
constexpr size_t kMaxHeaderDepth = 3;
constexpr std::string_view kMetadataKey = "__metadata__";

// Safetensors dtypes tandem does not read: named as unsupported rather than unknown.
constexpr std::array<std::string_view, 15> kOtherDtypes = {
    "BOOL", "I16", "U16", "I32", "U32", "I64", "U64", "F64",
    "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// numel · element size, or nullopt on overflow (a zero dimension makes the product 0 whatever the rest).
std::optional<uint64_t> byte_size(const std::vector<uint64_t>& shape, size_t element_size) {
  if (std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end()) return uint64_t{0};
  uint64_t n = element_size;
  for (const uint64_t d : shape) {
    if (n > std::numeric_limits<uint64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

Result<DType> parse_dtype(const std::string& s, const std::string& where) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "I8") return DType::kI8;  // int8 codes of a quantized weight (docs/quantization.md)
  if (s == "U8") return DType::kU8;  // int4 codes, two per byte
  if (std::find(kOtherDtypes.begin(), kOtherDtypes.end(), s) != kOtherDtypes.end()) {
    return Error::make(ErrorKind::kUnsupported,
                       "{}: dtype {} is not supported (tandem reads F32, F16, BF16, and I8/U8 codes)", where, s);
  }
  return Error::make(ErrorKind::kFormat, "{}: unknown dtype {}", where, describe_json(json(s)));
}

// A JSON array of unsigned integers (shape or data_offsets).
Result<std::vector<uint64_t>> parse_uint_list(const json& v, const std::string& where, std::string_view key) {
  if (!v.is_array()) {
    return Error::make(ErrorKind::kFormat, "{}: \"{}\" must be a list of integers, found {}", where, key,
                       describe_json(v));
  }
  std::vector<uint64_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& x = v[i];
    if (!x.is_number_unsigned()) {
      return Error::make(ErrorKind::kFormat, "{}: \"{}\"[{}] is {}, not a non-negative integer", where, key, i,
                         describe_json(x));
    }
    out.push_back(x.get<uint64_t>());
  }
  return out;
}

Result<Entry> parse_entry(const std::string& name, const json& v, const std::string& path, uint64_t data_size) {
  const std::string where = fmt::format("{}: tensor \"{}\"", path, name);
  if (!v.is_object()) {
    return Error::make(ErrorKind::kFormat, "{}: expected an object with dtype, shape, data_offsets, found {}",
                       where, describe_json(v));
  }
  for (const auto& [key, value] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Error::make(ErrorKind::kFormat,
                         "{}: unexpected key \"{}\" (a tensor entry has exactly dtype, shape, data_offsets)",
                         where, key);
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(key)) return Error::make(ErrorKind::kFormat, "{}: missing \"{}\"", where, key);
  }
  Entry e;
  e.name = name;
  const json& dtype = v["dtype"];
  if (!dtype.is_string()) {
    return Error::make(ErrorKind::kFormat, "{}: dtype must be a string, found {}", where, describe_json(dtype));
  }
  TANDEM_ASSIGN(e.dtype, parse_dtype(dtype.get<std::string>(), where));
  TANDEM_ASSIGN(e.shape, parse_uint_list(v["shape"], where, "shape"));
  TANDEM_ASSIGN(const std::vector<uint64_t> offsets, parse_uint_list(v["data_offsets"], where, "data_offsets"));
  if (offsets.size() != 2) {
    return Error::make(ErrorKind::kFormat, "{}: data_offsets has {} entries, expected [begin, end]", where,
                       offsets.size());
  }
  e.begin = offsets[0];
  e.end = offsets[1];
  if (e.begin > e.end) {
    return Error::make(ErrorKind::kFormat, "{}: data_offsets [{}, {}]: begin is past end", where, e.begin, e.end);
  }
  if (e.end > data_size) {
    return Error::make(ErrorKind::kFormat, "{}: data_offsets [{}, {}] run past the end of the data ({} bytes)",
                       where, e.begin, e.end, data_size);
  }
  const std::optional<uint64_t> bytes = byte_size(e.shape, dtype_size(e.dtype));
  if (!bytes) {
    return Error::make(ErrorKind::kFormat, "{}: shape {} of {} overflows 64-bit byte size", where,
                       shape_string(e.shape), to_string(e.dtype));
  }
  if (e.end - e.begin != *bytes) {
    return Error::make(ErrorKind::kFormat,
                       "{}: data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {} bytes", where, e.begin,
                       e.end, e.end - e.begin, shape_string(e.shape), to_string(e.dtype), *bytes);
  }
  return e;
}

// The spec requires the tensors to tile the data region: no overlap, no hole, nothing after the last.
Status check_tiling(std::vector<const Entry*> entries, const std::string& path, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;           // bytes [0, covered) belong to tensors seen so far
  const Entry* last = nullptr;    // the tensor that reaches `covered`
  for (const Entry* e : entries) {
    if (e->begin < covered) {
      return Error::make(ErrorKind::kFormat,
                         "{}: tensor \"{}\" data_offsets [{}, {}] overlap tensor \"{}\" data_offsets [{}, {}]", path,
                         e->name, e->begin, e->end, last->name, last->begin, last->end);
    }
    if (e->begin > covered) {
      return Error::make(ErrorKind::kFormat,
                         "{}: hole in the data: bytes [{}, {}) before tensor \"{}\" belong to no tensor", path,
                         covered, e->begin, e->name);
    }
    if (e->end > covered || !last) {
      covered = e->end;
      last = e;
    }
  }
  if (covered != data_size) {
    return Error::make(ErrorKind::kFormat, "{}: hole in the data: bytes [{}, {}) at the end belong to no tensor",
                       path, covered, data_size);
  }
  return ok_status();
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  TANDEM_ASSIGN(const RegularFile opened, RegularFile::open(path));
  const uint64_t size = opened.size();
  if (size < 8) {
    return Error::make(ErrorKind::kFormat, "{}: file is {} bytes, too short for the 8-byte header length", path,
                       size);
  }
  // The mapping keeps the file alive after `opened` closes its descriptor.
  void* map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, opened.fd(), 0);
  const int map_err = errno;
  if (map == MAP_FAILED) {
    return Error::make(ErrorKind::kIo, "{}: mmap of {} bytes failed: {}", path, size, std::strerror(map_err));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = static_cast<size_t>(size);
  const auto* base = static_cast<const unsigned char*>(map);

  const uint64_t header_len = read_u64_le(base);
  if (header_len > kMaxHeaderBytes) {
    return Error::make(ErrorKind::kFormat, "{}: header length {} exceeds the {} byte limit", path, header_len,
                       kMaxHeaderBytes);
  }
  if (header_len > size - 8) {
    return Error::make(ErrorKind::kFormat, "{}: header length {} runs past the end of the file ({} bytes)", path,
                       header_len, size);
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  // INVARIANT: [8, 8 + header_len) lies inside the mapping (checked above).
  const std::string_view header_text(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(header_len));
  TANDEM_ASSIGN(const json header, parse_json_strict(header_text, path + ": header", kMaxHeaderDepth));
  if (!header.is_object()) {
    return Error::make(ErrorKind::kFormat, "{}: header must be a JSON object, found {}", path,
                       describe_json(header));
  }

  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        return Error::make(ErrorKind::kFormat, "{}: __metadata__ must be an object of strings, found {}", path,
                           describe_json(value));
      }
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          return Error::make(ErrorKind::kFormat, "{}: __metadata__ key \"{}\": expected a string, found {}", path,
                             mkey, describe_json(mvalue));
        }
        file->metadata_.emplace(mkey, mvalue.get<std::string>());
      }
      continue;
    }
    TANDEM_ASSIGN(Entry e, parse_entry(key, value, path, data_size));
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> order;
  order.reserve(entries.size());
  for (const Entry& e : entries) order.push_back(&e);
  TANDEM_TRY(check_tiling(std::move(order), path, data_size));

  for (Entry& e : entries) {
    TensorView view;
    view.name = e.name;
    view.dtype = e.dtype;
    view.shape = std::move(e.shape);
    // INVARIANT: begin <= end <= data_size (parse_entry), so the view lies inside the mapping.
    view.data = base + data_start + e.begin;
    file->tensors_.emplace(std::move(e.name), std::move(view));
  }
  return file;
}

Result<TensorView> SafetensorsFile::tensor(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return Error::make(ErrorKind::kNotFound, "{}: no tensor named \"{}\"", path_, name);
  }
  return it->second;
}

bool SafetensorsFile::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  return out;
}


// ---- Checkpoint: one file, or shards through model.safetensors.index.json ----

namespace {

constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A shard name must stay inside the checkpoint directory.
bool is_safe_relative_path(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    const std::string_view part(name.data() + start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> Checkpoint::open_file(const std::string& path) {
  TANDEM_ASSIGN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  ckpt->origin_ = path;
  for (const std::string& name : file->names()) ckpt->owner_.emplace(name, file.get());
  ckpt->files_.push_back(std::move(file));
  return ckpt;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::open_dir(const std::string& dir) {
  // Like transformers: the single file wins when both exist.
  const std::string single = fmt::format("{}/{}", dir, kSingleFile);
  if (is_regular_file(single)) return open_file(single);
  const std::string index_path = fmt::format("{}/{}", dir, kIndexFile);
  if (!is_regular_file(index_path)) {
    return Error::make(ErrorKind::kNotFound, "{}: neither {} nor {} exists", dir, kSingleFile, kIndexFile);
  }
  TANDEM_ASSIGN(const json index, read_json_file(index_path));
  if (!index.is_object()) {
    return Error::make(ErrorKind::kFormat, "{}: expected a JSON object, found {}", index_path,
                       describe_json(index));
  }
  const auto map_it = index.find("weight_map");
  if (map_it == index.end()) {
    return Error::make(ErrorKind::kFormat, "{}: missing \"weight_map\"", index_path);
  }
  if (!map_it->is_object()) {
    return Error::make(ErrorKind::kFormat, "{}: \"weight_map\" must be an object (tensor -> shard), found {}",
                       index_path, describe_json(*map_it));
  }
  std::map<std::string, std::string> weight_map;  // tensor -> shard
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string() || !is_safe_relative_path(shard.get<std::string>())) {
      return Error::make(ErrorKind::kFormat,
                         "{}: weight_map[\"{}\"] must name a file inside the checkpoint directory, found {}",
                         index_path, tensor, describe_json(shard));
    }
    weight_map.emplace(tensor, shard.get<std::string>());
  }

  auto ckpt = std::unique_ptr<Checkpoint>(new Checkpoint());
  ckpt->origin_ = index_path;
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [tensor, shard] : weight_map) {
    if (shards.count(shard)) continue;
    const std::string shard_path = fmt::format("{}/{}", dir, shard);
    if (!is_regular_file(shard_path)) {
      return Error::make(ErrorKind::kNotFound, "{}: weight_map[\"{}\"] names shard \"{}\", which does not exist",
                         index_path, tensor, shard);
    }
    TANDEM_ASSIGN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(shard_path));
    shards.emplace(shard, file.get());
    ckpt->files_.push_back(std::move(file));
  }
  // A tensor stored twice is ambiguous even when the map names one of the copies.
  std::map<std::string, const SafetensorsFile*> seen;
  for (const auto& file : ckpt->files_) {
    for (const std::string& name : file->names()) {
      const auto [it, inserted] = seen.emplace(name, file.get());
      if (!inserted) {
        return Error::make(ErrorKind::kFormat, "{}: tensor \"{}\" is in two shards: {} and {}", index_path, name,
                           it->second->path(), file->path());
      }
    }
  }
  // Like transformers, the map decides what the checkpoint holds: extra tensors in a shard are ignored.
  for (const auto& [tensor, shard] : weight_map) {
    const SafetensorsFile* file = shards.at(shard);
    if (!file->contains(tensor)) {
      return Error::make(ErrorKind::kNotFound, "{}: weight_map lists tensor \"{}\" in shard \"{}\", which lacks it",
                         index_path, tensor, shard);
    }
    ckpt->owner_.emplace(tensor, file);
  }
  return ckpt;
}

Result<TensorView> Checkpoint::tensor(std::string_view name) const {
  const auto it = owner_.find(name);
  if (it == owner_.end()) {
    return Error::make(ErrorKind::kNotFound, "{}: no tensor named \"{}\"", origin_, name);
  }
  return it->second->tensor(name);
}

bool Checkpoint::contains(std::string_view name) const { return owner_.find(name) != owner_.end(); }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& [name, file] : owner_) out.push_back(name);
  return out;
}

// ---- CombinedSource ----

void CombinedSource::add(const WeightSource* source, std::string prefix) {
  sources_.emplace_back(source, std::move(prefix));
}

Result<TensorView> CombinedSource::tensor(std::string_view name) const {
  for (const auto& [source, prefix] : sources_) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view inner = name.substr(prefix.size());
    if (!source->contains(inner)) continue;
    TANDEM_ASSIGN(TensorView view, source->tensor(inner));
    view.name = std::string(name);
    return view;
  }
  std::string prefixes;
  for (const auto& [source, prefix] : sources_) {
    prefixes += fmt::format("{}\"{}\"", prefixes.empty() ? "" : ", ", prefix);
  }
  return Error::make(ErrorKind::kNotFound, "no tensor named \"{}\" in {} combined sources (prefixes {})", name,
                     sources_.size(), prefixes);
}

bool CombinedSource::contains(std::string_view name) const {
  for (const auto& [source, prefix] : sources_) {
    if (name.substr(0, prefix.size()) == prefix && source->contains(name.substr(prefix.size()))) return true;
  }
  return false;
}

std::vector<std::string> CombinedSource::names() const {
  std::set<std::string> all;
  for (const auto& [source, prefix] : sources_) {
    for (const std::string& name : source->names()) all.insert(prefix + name);
  }
  return {all.begin(), all.end()};
}

// ---- In-memory tensors and the writer ----

HostTensor HostTensor::from_f32(std::string name, std::vector<uint64_t> shape, const std::vector<float>& values,
                                DType dtype) {
  HostTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* dst = t.bytes.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kF32:
        std::memcpy(dst, &values[i], 4);
        break;
      case DType::kF16: {
        const uint16_t h = float_to_half(values[i]);
        std::memcpy(dst, &h, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t b = float_to_bf16(values[i]);
        std::memcpy(dst, &b, 2);
        break;
      }
      case DType::kI8:
        *dst = static_cast<unsigned char>(static_cast<int8_t>(std::lrint(values[i])));
        break;
      case DType::kU8:
        *dst = static_cast<unsigned char>(std::lrint(values[i]));
        break;
    }
  }
  return t;
}

namespace {

// The bytes a host tensor must hold, or an error naming it (from_f32 does not check the value count).
Status check_host_tensor(const HostTensor& t) {
  const std::optional<uint64_t> bytes = byte_size(t.shape, dtype_size(t.dtype));
  if (!bytes || *bytes != t.bytes.size()) {
    return Error::make(ErrorKind::kShape, "tensor \"{}\": shape {} of {} needs {} bytes, holds {}", t.name,
                       shape_string(t.shape), to_string(t.dtype),
                       bytes ? fmt::format("{}", *bytes) : std::string("more than 2^64"), t.bytes.size());
  }
  return ok_status();
}

}  // namespace

void HostTensors::add(HostTensor t) {
  std::string name = t.name;
  tensors_.insert_or_assign(std::move(name), std::move(t));
}

Result<TensorView> HostTensors::tensor(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return Error::make(ErrorKind::kNotFound, "host tensors: no tensor named \"{}\"", name);
  const HostTensor& t = it->second;
  TANDEM_TRY(check_host_tensor(t));
  TensorView view;
  view.name = t.name;
  view.dtype = t.dtype;
  view.shape = t.shape;
  view.data = t.bytes.data();
  return view;
}

bool HostTensors::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

std::vector<std::string> HostTensors::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

Status write_safetensors(const std::string& path, const std::vector<HostTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const HostTensor& t : tensors) {
    if (t.name == kMetadataKey) {
      return Error::make(ErrorKind::kInvalidArgument, "{}: a tensor cannot be named __metadata__", path);
    }
    if (header.contains(t.name)) {
      return Error::make(ErrorKind::kInvalidArgument, "{}: tensor \"{}\" given twice", path, t.name);
    }
    TANDEM_TRY(check_host_tensor(t).context(path));
    header[t.name] = {{"dtype", std::string(to_string(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: header not serializable (names must be UTF-8): {}", path,
                       e.what());
  }
  // Spaces pad the header so the data region starts 8-byte aligned, as the reference writer does.
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::array<unsigned char, 8> len{};
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((uint64_t{text.size()} >> (8 * i)) & 0xffu);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Error::make(ErrorKind::kIo, "{}: cannot create: {}", path, std::strerror(errno));
  bool ok = std::fwrite(len.data(), 1, len.size(), f) == len.size() &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const HostTensor& t : tensors) {
    if (!ok) break;
    ok = t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) == t.bytes.size();
  }
  const int err = errno;
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Error::make(ErrorKind::kIo, "{}: write failed: {}", path, std::strerror(err));
  return ok_status();
}

}  // namespace tandem::io
