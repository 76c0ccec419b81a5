// The backend interface (scorer.md §2): upload weights once, lower a graph per bucket into a Plan (all
// allocation happens there), and run plans on batches. Decoder graphs also take a State: persistent
// caches (KV, drafter context) that outlive a run. The CPU backend is the reference; CUDA is the fast one.
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
#include "engine/ir/graph.h"

namespace tandem::ir {

enum class Precision : uint8_t { kF32, kF16 };
const char* to_string(Precision p);
Result<Precision> parse_precision(std::string_view text);

struct Caps {
  std::string name;       // "cpu", "cuda"
  std::string device;     // "2 threads", "NVIDIA H200 (sm_90)"
  bool graphs = false;    // plans replay a captured CUDA graph
  bool decoders = false;  // runs decoder ops (caches)
};

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
};

// One output of a run: the real rows (never the bucket's) times the value's width.
struct Tensor2 {
  uint32_t rows = 0;
  uint32_t width = 0;
  std::vector<float> data;
  float at(uint32_t r, uint32_t c) const { return data[size_t{r} * width + c]; }
};

// Outputs of a run, in the order of Graph::outputs.
struct Outputs {
  std::vector<Tensor2> values;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Caps caps() const = 0;
  // Uploads every weight the graphs reference (the union by name), checking shapes against WeightRef.
  virtual Result<std::unique_ptr<Weights>> upload(const WeightSource& source,
                                                  std::span<const Graph* const> graphs) = 0;
  virtual Result<std::unique_ptr<Plan>> lower(const Weights& weights, const Graph& graph, Bucket bucket) = 0;
  // Persistent caches for the graph's CacheInfo list: `slots` sequences of `capacity` positions each.
  virtual Result<std::unique_ptr<State>> create_state(const Graph& graph, uint32_t slots, uint32_t capacity) = 0;
  // Runs a plan on a batch that fits its bucket and passed check(). `state` is required iff the graph
  // has caches. Reuses `out`'s storage.
  virtual Status run(Plan& plan, const Batch& batch, State* state, Outputs& out) = 0;
};

}  // namespace tandem::ir
