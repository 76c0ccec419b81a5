// A drafter rank's proposals q placed where the target's rejection sampling reads them (remote_drafting_impl.h
// place_proposals; graph.h RejectSample): the target rejects on its own device, as a generator does, and
// copies no logits row to the host. A v1 drafter's q rows stay where the link received them (an NCCL link's
// buffer, untouched until the link's next receive, which comes after this round's verify); rows a host
// link brought, and listed (id, q) proposals (a v2 selector's candidates), are written to the target's
// backend, in buffers kept per drafter rank and grown as needed.
#include <algorithm>

#include "engine/backends/row_buffers.h"
#include "worker/remote_drafting_impl.h"

namespace tandem::worker {
namespace {

// `buffer` holds at least `rows` rows of exactly `width` elements of `storage`, remade when it does not.
Status reserve(ir::Backend& backend, std::unique_ptr<ir::RowBuffer>& buffer, uint32_t rows, uint32_t width,
               ir::Storage storage) {
  if (buffer) {
    const ir::DeviceRows v = buffer->view();
    if (v.rows >= rows && v.width == width && v.storage == storage) return ok_status();
  }
  TANDEM_ASSIGN(buffer, backends::make_row_buffer(backend, rows, width, storage));
  return ok_status();
}

// Rows [at, at + n) of `rows`.
ir::DeviceRows slice(ir::DeviceRows rows, uint32_t at, uint32_t n) {
  // INVARIANT: at + n <= rows.rows (the callers count them out of it).
  rows.data = static_cast<const uint8_t*>(rows.data) + size_t{at} * rows.stride * ir::storage_bytes(rows.storage);
  rows.rows = n;
  return rows;
}

}  // namespace

Status RemoteDrafting::place_proposals(int rank, const DraftReply& reply, const comm::Packet& rows,
                                       std::span<const size_t> idx, std::vector<spec::Draft>& out) {
  Placed& placed = placed_[rank];
  // Row proposals: decode_reply counted them against the link's rows, in entry order.
  ir::DeviceRows q_rows = rows.device;
  if (rows.rows > 0 && !rows.on_device()) {
    TANDEM_TRY(reserve(backend_, placed.rows, rows.rows, rows.width, ir::Storage::kF32));
    TANDEM_TRY(placed.rows->write(0, rows.data));
    q_rows = placed.rows->view();
  }
  if (rows.rows > 0 && q_rows.storage != ir::Storage::kF32) {
    return Error::make(ErrorKind::kFormat, "drafter rank {}: proposal rows of {}: rejection sampling reads f32 rows",
                       rank, ir::to_string(q_rows.storage));
  }
  // Listed proposals: one row each, as wide as the widest.
  uint32_t listed = 0, widest = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    const spec::Draft& d = out[idx[k]];
    if (reply.row_proposals[k] > 0 || d.proposals.empty()) continue;
    listed += static_cast<uint32_t>(d.proposals.size());
    for (const ir::Distribution& q : d.proposals) widest = std::max(widest, static_cast<uint32_t>(q.ids.size()));
  }
  if (listed > 0) {
    placed.host_ids.assign(size_t{listed} * widest, 0);
    placed.host_q.assign(size_t{listed} * widest, 0.0f);
    uint32_t row = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const spec::Draft& d = out[idx[k]];
      if (reply.row_proposals[k] > 0) continue;
      for (const ir::Distribution& q : d.proposals) {
        uint32_t* ids = placed.host_ids.data() + size_t{row} * widest;
        float* probs = placed.host_q.data() + size_t{row} * widest;
        std::copy(q.ids.begin(), q.ids.end(), ids);
        // INVARIANT: check_proposals saw every q exact in f32.
        std::transform(q.probs.begin(), q.probs.end(), probs, [](double p) { return static_cast<float>(p); });
        // A shorter list is padded with ids it lacks, at q 0 (what a missing id has anyway): candidates
        // stay distinct, as RejectSample reads them.
        std::vector<uint32_t> have(q.ids.begin(), q.ids.end());
        std::sort(have.begin(), have.end());
        uint32_t next = 0;
        for (size_t j = q.ids.size(); j < widest; ++j) {
          while (std::binary_search(have.begin(), have.end(), next)) ++next;
          ids[j] = next++;
        }
        ++row;
      }
    }
    TANDEM_TRY(reserve(backend_, placed.ids, listed, widest, ir::Storage::kU32));
    TANDEM_TRY(reserve(backend_, placed.q, listed, widest, ir::Storage::kF32));
    TANDEM_TRY(placed.ids->write(0, placed.host_ids));
    TANDEM_TRY(placed.q->write(0, placed.host_q));
  }
  uint32_t at_rows = 0, at_listed = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    spec::Draft& d = out[idx[k]];
    if (const uint32_t n = reply.row_proposals[k]; n > 0) {
      d.device = {slice(q_rows, at_rows, n), {}};
      at_rows += n;
    } else if (!d.proposals.empty()) {
      const auto listed_here = static_cast<uint32_t>(d.proposals.size());
      d.device = {slice(placed.q->view(), at_listed, listed_here), slice(placed.ids->view(), at_listed, listed_here)};
      at_listed += listed_here;
    }
  }
  return ok_status();
}

}  // namespace tandem::worker
