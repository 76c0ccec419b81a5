// The backend interface (scorer.md §2): upload weights once, lower a graph per bucket into a Plan (all
// allocation happens there), and run plans on batches. Decoder graphs also take a State: persistent
// caches (KV, drafter context) that outlive a run. Outputs come back to the host only where the graph
// asks (Placement::kHost); device outputs stay where the run left them. The CPU backend is the
// reference; CUDA is the fast one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/ir/batch.h"
#include "engine/ir/bucket.h"
#include "engine/ir/device_rows.h"
#include "engine/ir/graph.h"

namespace tandem::ir {

// What a plan computes in: FP32 everywhere (the reference), or 16-bit weights and activations with FP32
// accumulation (FP16, or BF16 as Qwen3 checkpoints ship). The CPU backend always runs FP32.
enum class Precision : uint8_t { kF32, kF16, kBF16 };
const char* to_string(Precision p);
Result<Precision> parse_precision(std::string_view text);  // f32, f16 or bf16

struct Caps {
  std::string name;       // "cpu", "cuda"
  std::string device;     // "2 threads", "NVIDIA H200 (sm_90)"
  bool graphs = false;    // plans replay a captured CUDA graph
  bool decoders = false;  // runs decoder ops (caches)
};

class Backend;

class Weights {
 public:
  virtual ~Weights() = default;
  virtual size_t bytes() const = 0;
};

class Plan {
 public:
  virtual ~Plan() = default;
  virtual Bucket bucket() const = 0;
  virtual size_t bytes() const = 0;  // arena and staging memory
};

class State {
 public:
  virtual ~State() = default;
  virtual uint32_t slots() const = 0;
  virtual uint32_t capacity() const = 0;
  virtual size_t bytes() const = 0;
  // Bytes one cached position of one slot takes over every cache of the graph (K and V).
  virtual size_t bytes_per_position() const = 0;
  // A slot's cached positions as f32 rows, to move a sequence's caches to another State of the same
  // graph (a drafter context handed to another rank): per position, each cache's K row then its V row
  // in graph order, row_width() floats. Exact both ways: a 16-bit cache widens to f32 and narrows back
  // to the same bits. The caller checks slot and positions against slots() and capacity().
  virtual uint32_t row_width() const = 0;
  virtual Status read_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<float> out) const = 0;
  virtual Status write_rows(uint32_t slot, uint32_t first, uint32_t count, std::span<const float> rows) = 0;
};

// One output of a run, over the real rows (never the bucket's): f32 values or u32 ids on the host
// (Placement::kHost), or where the run left them (Placement::kDevice; data and ids stay empty).
struct Tensor2 {
  uint32_t rows = 0;
  uint32_t width = 0;
  std::vector<float> data;
  std::vector<uint32_t> ids;
  DeviceRows device;
  float at(uint32_t r, uint32_t c) const { return data[size_t{r} * width + c]; }
  uint32_t id(uint32_t r, uint32_t c) const { return ids[size_t{r} * width + c]; }
  // Host f32 rows (tests and host-side steps build them).
  static Tensor2 of(uint32_t rows, uint32_t width, std::vector<float> data) {
    Tensor2 t;
    t.rows = rows;
    t.width = width;
    t.data = std::move(data);
    return t;
  }
};

// Outputs of a run, in the order of Graph::outputs.
struct Outputs {
  std::vector<Tensor2> values;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Caps caps() const = 0;
  // Whether this backend runs the op (with these operands' shapes): ok, or kUnsupported saying why.
  // lower() refuses a graph with an op it does not run, naming it.
  virtual Status supports(const Graph& graph, const Op& op) const = 0;
  // Uploads every weight the graphs reference (the union by name), checking shapes against WeightRef.
  virtual Result<std::unique_ptr<Weights>> upload(const WeightSource& source,
                                                  std::span<const Graph* const> graphs) = 0;
  virtual Result<std::unique_ptr<Plan>> lower(const Weights& weights, const Graph& graph, Bucket bucket) = 0;
  // Persistent caches for the graph's CacheInfo list: `slots` sequences of `capacity` positions each.
  virtual Result<std::unique_ptr<State>> create_state(const Graph& graph, uint32_t slots, uint32_t capacity) = 0;
  // Runs a plan on a batch that fits its bucket and passed check(). `state` is required iff the graph
  // has caches. Reuses `out`'s storage.
  virtual Status run(Plan& plan, const Batch& batch, State* state, Outputs& out) = 0;
  // Copies rows [first, first + count) of a device output of this backend to the host: f32 storage of any
  // width as floats into out.data, u32 as out.ids. The one way device data leaves on request.
  virtual Status fetch(const DeviceRows& rows, uint32_t first, uint32_t count, Tensor2& out) = 0;
};

// The first op of the graph the backend does not run, named with its index and the reason.
Status check_supported(const Backend& backend, const Graph& graph);

}  // namespace tandem::ir
