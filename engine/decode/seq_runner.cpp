// Packing sequences' rows into bucket-sized batches and scattering outputs back per sequence.
#include "engine/decode/seq_runner.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace tandem::decode {

SeqRunner::SeqRunner(ir::Backend& backend, const ir::Weights& weights, const ir::Graph& graph,
                     const ir::BucketTable& table, std::string stage, uint32_t vocab, bool split)
    : exec_(backend, weights, graph, table, stage), table_(table), stage_(std::move(stage)), vocab_(vocab),
      split_(split) {}

uint32_t SeqRunner::rows_of(const SeqRows& s) const {
  if (!s.ids.empty()) return static_cast<uint32_t>(s.ids.size());
  if (s.device_features.data != nullptr) return s.device_features.rows;
  const uint32_t fw = exec_.graph().feature_width;
  return fw == 0 ? 0 : static_cast<uint32_t>(s.features.size() / fw);
}

uint32_t SeqRunner::picks_in(const SeqRows& s, uint32_t begin, uint32_t end) const {
  const auto lo = std::lower_bound(s.picks.begin(), s.picks.end(), begin);
  const auto hi = std::lower_bound(s.picks.begin(), s.picks.end(), end);
  return static_cast<uint32_t>(hi - lo);
}

Result<size_t> SeqRunner::prepare(uint32_t max_seqs, uint32_t max_rows, const std::function<bool()>& stopping) {
  std::set<ir::Bucket> wanted;
  for (uint32_t k = 1; k <= max_seqs; ++k) {
    for (uint32_t t = k; t <= k * max_rows; ++t) {
      for (const uint32_t p : {0u, k, t - k, t}) {
        if (auto b = table_.smallest(stage_, t, k, p); b.ok()) wanted.insert(*b);
      }
    }
  }
  const size_t before = exec_.plans();
  size_t done = 0;
  for (const ir::Bucket& b : wanted) {
    if (stopping && stopping()) {
      return Error::make(ErrorKind::kCancelled, "stopped while warming up stage '{}' ({} of its {} buckets ready)",
                         stage_, done, wanted.size());
    }
    ++done;
    if (Status s = exec_.prepare(b); !s.ok()) {
      return std::move(s).error().context(fmt::format("warming up stage '{}' bucket {}", stage_, ir::to_string(b)));
    }
  }
  return exec_.plans() - before;
}

bool SeqRunner::fits(uint32_t tokens, uint32_t seqs, uint32_t picks) const {
  return table_.smallest(stage_, tokens, seqs, picks).ok();
}

uint32_t SeqRunner::seqs_per_run(uint32_t rows, uint32_t picks) const {
  uint32_t k = 0;
  while (fits((k + 1) * rows, k + 1, (k + 1) * picks)) ++k;
  return k;
}

Status SeqRunner::check_seqs(std::span<const SeqRows> seqs, const CacheSlots& caches) const {
  const uint32_t fw = exec_.graph().feature_width;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqRows& s = seqs[i];
    if (s.slot >= caches.slots()) {
      return Error::make(ErrorKind::kInvalidArgument, "sequence {}: cache slot {} does not exist ({} slots)", i,
                         s.slot, caches.slots());
    }
    for (size_t j = 0; j < i; ++j) {
      if (seqs[j].slot == s.slot) {
        return Error::make(ErrorKind::kInvalidArgument, "sequences {} and {} both use cache slot {}", j, i, s.slot);
      }
    }
    const uint32_t rows = rows_of(s);
    const bool device = s.device_features.data != nullptr;
    if (device && (fw == 0 || !s.features.empty() || s.device_features.rows != rows)) {
      return Error::make(ErrorKind::kInvalidArgument, "sequence {}: {} device feature rows for {} rows{}", i,
                         s.device_features.rows, rows, s.features.empty() ? "" : " and host features too");
    }
    if (fw > 0 && !device && s.features.size() != size_t{rows} * fw) {
      return Error::make(ErrorKind::kInvalidArgument, "sequence {}: {} feature values for {} rows of width {}", i,
                         s.features.size(), rows, fw);
    }
    for (size_t m = 0; m < s.picks.size(); ++m) {
      if (s.picks[m] >= rows || (m > 0 && s.picks[m] <= s.picks[m - 1])) {
        return Error::make(ErrorKind::kInvalidArgument,
                           "sequence {}: pick {} = {} is not an ascending row of its {} rows", i, m, s.picks[m],
                           rows);
      }
    }
    const uint64_t end = uint64_t{caches.length(s.slot)} + rows;
    if (end > caches.capacity()) {
      return Error::make(ErrorKind::kCapacity,
                         "sequence {}: cache slot {} holds {} positions; {} more pass its capacity of {}", i, s.slot,
                         caches.length(s.slot), rows, caches.capacity());
    }
  }
  return {};
}

Status SeqRunner::device_source(std::span<const SeqRows> seqs, ir::DeviceRows& source,
                                std::vector<uint32_t>& first) const {
  source = {};
  first.assign(seqs.size(), 0);
  const unsigned char* lo = nullptr;
  size_t users = 0;
  for (const SeqRows& s : seqs) {
    const ir::DeviceRows& d = s.device_features;
    if (d.data == nullptr) continue;
    ++users;
    if (source.data == nullptr) source = d;
    if (d.owner != source.owner || d.storage != source.storage || d.stride != source.stride ||
        d.width != source.width) {
      return Error(ErrorKind::kInvalidArgument, "the sequences' device feature rows come from different outputs");
    }
    const auto* p = static_cast<const unsigned char*>(d.data);
    if (lo == nullptr || p < lo) lo = p;
  }
  if (users == 0) return {};
  if (users != seqs.size()) {
    return Error(ErrorKind::kInvalidArgument, "some sequences give device feature rows and others host ones");
  }
  const size_t row_bytes = size_t{source.stride} * ir::storage_bytes(source.storage);
  uint64_t rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(seqs[i].device_features.data);
    const auto offset = static_cast<size_t>(p - lo);
    if (offset % row_bytes != 0) {
      return Error(ErrorKind::kInvalidArgument, "the sequences' device feature rows are not rows of one output");
    }
    first[i] = static_cast<uint32_t>(offset / row_bytes);
    rows = std::max(rows, uint64_t{first[i]} + seqs[i].device_features.rows);
  }
  source.data = lo;
  source.rows = static_cast<uint32_t>(rows);
  return {};
}

Status SeqRunner::run(std::span<const SeqRows> seqs, CacheSlots& caches, std::vector<SeqOutputs>& out,
                      const ChunkSink& sink) {
  TANDEM_TRY(check_seqs(seqs, caches));
  TANDEM_TRY(device_source(seqs, feature_source_, feature_first_));
  const ir::Graph& g = exec_.graph();
  out.assign(seqs.size(), SeqOutputs(g.outputs.size()));
  for (SeqOutputs& so : out) {
    for (size_t o = 0; o < g.outputs.size(); ++o) so[o].width = g.info(g.outputs[o].val).width;
  }
  std::vector<uint32_t> done(seqs.size(), 0);
  std::vector<uint32_t> starts(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) starts[i] = caches.length(seqs[i].slot);
  // Each pass takes at most one chunk per sequence (a slot appears once per batch), in order. A sequence's chunk
  // is what a run of it alone would take (its rows halved until a bucket holds them), never cut to the room the
  // others leave: a chunk that does not fit waits for the next pass. So where a prompt is cut, and with it every
  // row's attention (its key splits follow the chunk's rows), is a function of the sequence alone, and a row's
  // bits do not depend on the batch it was prefilled in (gemm_impl.h's rule for the GEMMs).
  for (;;) {
    std::vector<Chunk> chunks;
    uint32_t tokens = 0, picks = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const uint32_t left = rows_of(seqs[i]) - done[i];
      if (left == 0) continue;
      uint32_t n = left;
      // RejectSample judges a verify block in one run.
      const bool split = split_ && seqs[i].proposals.empty();
      while (n > 0 && !fits(n, 1, picks_in(seqs[i], done[i], done[i] + n))) n = split ? n / 2 : 0;
      if (n == 0) {
        return Error::make(ErrorKind::kCapacity, "no '{}' bucket holds {} rows of sequence {}{}", stage_, left, i,
                           split ? "" : " in one batch");
      }
      const uint32_t chunk_picks = picks_in(seqs[i], done[i], done[i] + n);
      if (!fits(tokens + n, static_cast<uint32_t>(chunks.size() + 1), picks + chunk_picks)) {
        continue;  // the next pass (it fits alone, so a pass that starts with it runs it)
      }
      chunks.push_back({i, done[i], n});
      tokens += n;
      picks += chunk_picks;
    }
    if (chunks.empty()) break;
    for (const Chunk& c : chunks) done[c.seq] += c.rows;
    bool last = true;
    for (size_t i = 0; i < seqs.size(); ++i) last = last && done[i] == rows_of(seqs[i]);
    TANDEM_TRY(run_chunks(seqs, chunks, starts, caches, out, sink, last));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].commit) caches.lengths_[seqs[i].slot] = starts[i] + done[i];
  }
  return {};
}

Status SeqRunner::run_chunks(std::span<const SeqRows> seqs, const std::vector<Chunk>& chunks,
                             const std::vector<uint32_t>& starts, CacheSlots& caches, std::vector<SeqOutputs>& out,
                             const ChunkSink& sink, bool last) {
  const ir::Graph& g = exec_.graph();
  const uint32_t fw = g.feature_width;
  batch_.clear();
  bool proposals = false;
  for (const Chunk& c : chunks) proposals = proposals || !seqs[c.seq].proposals.empty();
  std::vector<uint32_t> ids, picked;
  for (const Chunk& c : chunks) {
    const SeqRows& s = seqs[c.seq];
    ids.assign(c.rows, 0);
    if (!s.ids.empty()) std::copy_n(s.ids.begin() + c.begin, c.rows, ids.begin());
    picked.clear();
    for (uint32_t m : s.picks) {
      if (m >= c.begin && m < c.begin + c.rows) picked.push_back(m - c.begin);
    }
    batch_.add_sequence(ids, picked, 0);
    batch_.start.push_back(starts[c.seq] + c.begin);
    batch_.slot.push_back(s.slot);
    batch_.sampling.push_back(s.sampling);
    if (proposals) batch_.proposals.push_back(s.proposals);
    if (fw > 0 && s.device_features.data != nullptr) {
      for (uint32_t r = 0; r < c.rows; ++r) batch_.feature_rows.push_back(feature_first_[c.seq] + c.begin + r);
      batch_.feature_source = feature_source_;
    } else if (fw > 0) {
      const auto f = s.features.subspan(size_t{c.begin} * fw, size_t{c.rows} * fw);
      batch_.features.insert(batch_.features.end(), f.begin(), f.end());
    }
  }
  const ir::BatchLimits limits{vocab_, 3, fw, caches.slots(), caches.capacity()};
  TANDEM_TRY(ir::check(batch_, limits));
  TANDEM_TRY(exec_.run(batch_, &caches.state(), outputs_));
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (g.outputs[o].placement == ir::Placement::kDevice) continue;
    const ir::Tensor2& t = outputs_.values[o];
    const bool id_rows = g.info(g.outputs[o].val).elem == ir::Elem::kU32;
    // Decoder graphs output token rows or pick rows, never sequence rows.
    const bool by_pick = g.info(g.outputs[o].val).rows == ir::Rows::kPicks;
    for (size_t b = 0; b < chunks.size(); ++b) {
      const uint32_t lo = by_pick ? batch_.pcu[b] : batch_.cu[b];
      const uint32_t hi = by_pick ? batch_.pcu[b + 1] : batch_.cu[b + 1];
      ir::Tensor2& dst = out[chunks[b].seq][o];
      dst.rows += hi - lo;
      if (id_rows) {
        dst.ids.insert(dst.ids.end(), t.ids.begin() + ptrdiff_t{lo} * t.width, t.ids.begin() + ptrdiff_t{hi} * t.width);
      } else {
        dst.data.insert(dst.data.end(), t.data.begin() + ptrdiff_t{lo} * t.width,
                        t.data.begin() + ptrdiff_t{hi} * t.width);
      }
    }
  }
  if (!sink) return {};
  device_rows_.assign(g.outputs.size(), ir::DeviceRows{});
  for (size_t b = 0; b < chunks.size(); ++b) {
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      if (g.outputs[o].placement != ir::Placement::kDevice) continue;
      const ir::DeviceRows& all = outputs_.values[o].device;
      const bool by_pick = g.info(g.outputs[o].val).rows == ir::Rows::kPicks;
      const uint32_t lo = by_pick ? batch_.pcu[b] : batch_.cu[b];
      const uint32_t hi = by_pick ? batch_.pcu[b + 1] : batch_.cu[b + 1];
      ir::DeviceRows& d = device_rows_[o];
      d = all;
      // INVARIANT: rows lo..hi of the run lie inside `all` (the run's real rows); the view keeps its stride.
      d.data = static_cast<const unsigned char*>(all.data) + size_t{lo} * all.stride * ir::storage_bytes(all.storage);
      d.rows = hi - lo;
    }
    TANDEM_TRY(sink(DeviceChunk{chunks[b].seq, chunks[b].begin, chunks[b].rows, device_rows_, last}));
  }
  return {};
}

}  // namespace tandem::decode
