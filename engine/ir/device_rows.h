// Rows a run left on a backend's device (backend.h): what Tensor2::device holds and what a Batch may read
// its feature rows from (batch.h), so a drafter settles from the target's taps without a host copy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::ir {

class Backend;

// How a device output's elements are stored (a 16-bit plan keeps its activations in 16 bits).
enum class Storage : uint8_t { kF32, kF16, kBF16, kU32 };
size_t storage_bytes(Storage s);
const char* to_string(Storage s);

// An output a run left on its backend's device (a host address on the CPU backend): `rows` rows of
// `width` elements, `stride` elements apart. Valid until the plan runs again or is destroyed; only the
// backend that made it (or a transport of the same device) may read it, and others fetch() from it.
struct DeviceRows {
  const void* data = nullptr;
  uint32_t rows = 0;
  uint32_t width = 0;
  uint32_t stride = 0;
  Storage storage = Storage::kF32;
  Backend* owner = nullptr;
};

// A verify block's draft proposals where the drafter's block run left them, for rejection sampling on the
// target's device (graph.h RejectSample), one row per draft row: v1 (`ids` empty) `values` holds the
// drafter's logits over its draft vocabulary (its width), q = softmax(values / T); v2 `ids` holds the
// selector's candidates (u32) and `values` q over them (f32), both top-k wide.
struct ProposalRows {
  DeviceRows values;
  DeviceRows ids;
  bool empty() const { return values.data == nullptr; }
  bool dense() const { return ids.data == nullptr; }
};

}  // namespace tandem::ir
