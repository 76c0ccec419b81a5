// Rejection sampling on the GPU (issue 10): the reject_sample launchers (kernels/reject_sample.cu) against
// engine/ir/reject.h on the same logits and proposals. One launch holds verify blocks of 1 to 5 drafts with
// v1 proposals (the drafter's logits over the whole vocabulary or a smaller draft vocabulary) and v2 ones
// (16 candidates and their q), temperatures 0.7 to 1.5, top_p 1, 0.9 and 0.5, at their own positions and
// seeds, next to sequences without proposals (which keep the Sample op's tokens, as a prefill's last row
// does). Drafts are drawn from q, and some from outside it, so both outcomes and the residual draw
// happen. Every committed token and ir::kNoToken mark must equal the reference's; padding is untouched.
//
// The kernel sums its f64 masses in a fixed tree and the reference in id order, so they could part only
// where a draw lands within about 1e-15 (relative) of a threshold; with these few hundred draws the
// chance is far below 1e-9, so equality is asserted and a failure names the row to look at.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/ir/reject.h"
#include "engine/ir/sampling.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr uint32_t kNoId = 0xdeadbeefu;  // sentinel of the ids' padding
constexpr uint32_t kTopK = 16;

struct Block {
  uint32_t drafts = 0;     // 0: a sequence without proposals (one pick row)
  bool sparse = false;     // v2 candidates, else v1 logits
  uint32_t width = 0;      // v1: the draft vocabulary
  ir::SamplingParams sampling;
  uint32_t start = 0;
};

struct Case {
  uint32_t vocab;
  std::vector<Block> blocks;
};

// A drafter row near the target's (so drafts are often accepted) with its own noise.
std::vector<float> drafter_row(const std::vector<float>& target, uint32_t width, std::mt19937& rng) {
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> y(width);
  for (uint32_t c = 0; c < width; ++c) y[c] = target[c] + noise(rng);
  return y;
}

void run_case(const Case& cs, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint32_t v = cs.vocab;
  ir::Batch batch;
  std::vector<std::vector<float>> rows;            // target logits per pick
  std::vector<std::vector<ir::Distribution>> qs;   // per sequence, per draft
  std::vector<std::vector<float>> values;          // per sequence: proposal rows (v1 logits or v2 q)
  std::vector<std::vector<uint32_t>> cands;        // per sequence: v2 candidate rows
  std::vector<std::vector<uint32_t>> tokens;       // per sequence: [tok, d_1 .. d_n]
  for (const Block& b : cs.blocks) {
    const uint32_t len = b.drafts == 0 ? 3 : b.drafts + 1;
    std::vector<uint32_t> ids(len);
    std::vector<ir::Distribution> q;
    std::vector<float> vals;
    std::vector<uint32_t> cand;
    ids[0] = static_cast<uint32_t>(rng() % v);
    for (uint32_t i = 0; i < len; ++i) {
      if (b.drafts != 0 || i + 1 == len) rows.push_back(random_floats(v, rng, 3.0f));
      if (b.drafts == 0) {
        if (i > 0) ids[i] = static_cast<uint32_t>(rng() % v);
        continue;
      }
      if (i == b.drafts) break;  // the bonus row has no draft after it
      std::vector<float> y = drafter_row(rows.back(), b.sparse ? v : b.width, rng);
      ir::Distribution d;
      if (b.sparse) {
        std::vector<uint32_t> top(kTopK);
        std::vector<float> top_values(kTopK);
        ir::top_k(y, kTopK, top, top_values);
        // The walk's q: a softmax over the candidates, as f32 (what the block plan leaves).
        const ir::Distribution soft = ir::tempered(top_values, b.sampling.temperature, 1.0f);
        for (uint32_t k = 0; k < kTopK; ++k) {
          cand.push_back(top[k]);
          vals.push_back(static_cast<float>(soft.probs[k]));
          d.ids.push_back(top[k]);
          d.probs.push_back(static_cast<double>(static_cast<float>(soft.probs[k])));
        }
      } else {
        vals.insert(vals.end(), y.begin(), y.end());
        d = ir::tempered(y, b.sampling.temperature, 1.0f);
      }
      // Mostly a draw from q; one draft in five outside it (q(d) = 0: accepted whenever p(d) > 0).
      uint32_t draft = ir::sample(d, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
      if (rng() % 5 == 0) draft = b.sparse ? static_cast<uint32_t>(rng() % v) : v - 1;
      ids[i + 1] = draft;
      q.push_back(std::move(d));
    }
    std::vector<uint32_t> picks;
    if (b.drafts == 0) {
      picks.push_back(len - 1);
    } else {
      picks.resize(len);
      std::iota(picks.begin(), picks.end(), 0u);
    }
    batch.add_sequence(ids, picks, 0);
    batch.start.push_back(b.start);
    batch.slot.push_back(static_cast<uint32_t>(batch.slot.size()));
    batch.sampling.push_back(b.sampling);
    tokens.push_back(std::move(ids));
    qs.push_back(std::move(q));
    values.push_back(std::move(vals));
    cands.push_back(std::move(cand));
  }
  // Proposal rows on the device, where a block plan would have left them.
  std::vector<DeviceBuffer> value_bufs, cand_bufs;
  for (size_t s = 0; s < cs.blocks.size(); ++s) {
    const Block& b = cs.blocks[s];
    value_bufs.push_back(to_device(values[s]));
    cand_bufs.push_back(to_device(cands[s]));
    ir::ProposalRows p;
    if (b.drafts > 0) {
      const uint32_t w = b.sparse ? kTopK : b.width;
      p.values = {value_bufs.back().data(), b.drafts, w, w, ir::Storage::kF32, nullptr};
      if (b.sparse) p.ids = {cand_bufs.back().data(), b.drafts, kTopK, kTopK, ir::Storage::kU32, nullptr};
    }
    batch.proposals.push_back(p);
  }
  const ir::BatchLimits limits{v, 3, 0, static_cast<uint32_t>(cs.blocks.size()), 1u << 20};
  const Status checked = ir::check(batch, limits);
  ASSERT_TRUE(checked.ok()) << checked.error().message();

  const uint32_t bucket_picks = batch.num_picks() + 3;
  const ir::Bucket bucket{batch.tokens() + 4, batch.seqs() + 1, bucket_picks};
  DeviceBatch db;
  db.batch = batch;
  db.bucket = bucket;
  db.layout = IndexLayout::for_bucket(bucket);
  std::vector<uint32_t> words(db.layout.words, 0xdeadbeefu);
  fill_index(db.layout, batch, words.data());
  fill_proposals(db.layout, batch, words.data());
  db.index = to_device(words);
  db.ctx.bucket = bucket;
  db.ctx.ix = index_pointers(db.layout, db.index.as<const unsigned>());
  db.ctx.tiles_max = db.layout.tiles_max;
  db.ctx.sms = static_cast<uint32_t>(gpu().device->info().sms);

  std::vector<float> x(size_t{bucket_picks} * v, kSentinel);
  for (size_t r = 0; r < rows.size(); ++r) std::copy(rows[r].begin(), rows[r].end(), x.begin() + r * v);
  DeviceBuffer xd = to_device(x), ids = to_device(std::vector<uint32_t>(bucket_picks, kNoId));
  const Loc xl = make_loc(xd, ir::Rows::kPicks, v, Dt::kF32, "logits");
  const Loc il = make_loc(ids, ir::Rows::kPicks, 1, Dt::kU32, "ids");
  run_step(sample_step(db.ctx, xl, v, il));
  auto steps = reject_sample_steps(db.ctx, xl, v, il);
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  ASSERT_EQ(steps->size(), 2u);
  for (const KernelStep& s : *steps) run_step(s);
  const std::vector<uint32_t> got = to_host<uint32_t>(ids, bucket_picks);

  uint32_t accepted = 0, rejected = 0;
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    const Block& b = cs.blocks[s];
    const uint32_t p0 = batch.pcu[s];
    if (b.drafts == 0) {  // Sample's token, untouched
      const uint32_t want = ir::sample_token(rows[p0], b.sampling, b.start + batch.seq_len(s));
      EXPECT_EQ(got[p0], want) << "sequence " << s << " without proposals";
      continue;
    }
    std::vector<float> logits;
    for (uint32_t i = 0; i <= b.drafts; ++i) logits.insert(logits.end(), rows[p0 + i].begin(), rows[p0 + i].end());
    const std::span<const uint32_t> drafts(tokens[s].data() + 1, b.drafts);
    const ir::RejectVerdict want = ir::reject_block(logits, v, v, drafts, qs[s], b.sampling, b.start);
    accepted += want.accepted;
    rejected += want.accepted < b.drafts ? 1 : 0;
    for (uint32_t i = 0; i <= b.drafts; ++i) {
      const uint32_t w = i < want.committed.size() ? want.committed[i] : ir::kNoToken;
      EXPECT_EQ(got[p0 + i], w) << "sequence " << s << " (" << (b.sparse ? "v2" : "v1") << ", " << b.drafts
                                << " drafts, T " << b.sampling.temperature << ", top_p " << b.sampling.top_p
                                << ") row " << i << "; the reference accepted " << want.accepted;
    }
  }
  for (uint32_t p = batch.num_picks(); p < bucket_picks; ++p) EXPECT_EQ(got[p], kNoId) << "padding pick " << p;
  // Both outcomes happened, so the comparison covers the accept test and the residual draw.
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(rejected, 0u);
}

std::vector<Block> blocks(uint32_t vocab, uint32_t copies) {
  std::vector<Block> out;
  uint64_t seed = 0x51ed2701ull;
  uint32_t start = 3;
  for (uint32_t c = 0; c < copies; ++c) {
    for (float t : {0.7f, 1.0f, 1.5f}) {
      for (float top_p : {1.0f, 0.9f, 0.5f}) {
        for (bool sparse : {false, true}) {
          const uint32_t drafts = 1 + static_cast<uint32_t>(out.size() % 5);
          const uint32_t width = out.size() % 3 == 0 ? vocab - 3 : vocab;  // v1 over a smaller draft vocabulary
          out.push_back({drafts, sparse, width, {t, top_p, seed}, start});
          seed = ir::mix64(seed);
          start += 7;
        }
      }
    }
    out.push_back({0, false, 0, {1.0f, 0.9f, seed}, start});  // a prefill-like row: no proposals
  }
  return out;
}

TEST(RejectSample, CommitsTheReferenceTokens) {
  TANDEM_REQUIRE_GPU();
  // 1,027 columns walk the scalar path (rows not 16-byte multiples), 4,096 the vector path; the emulator
  // runs each once, the GPU also Qwen3's vocabulary and more blocks.
  std::vector<Case> cases = {{1027, blocks(1027, 1)}, {4096, blocks(4096, 1)}};
  if (!emulated()) {
    cases.push_back({4096, blocks(4096, 4)});
    cases.push_back({151936, blocks(151936, 1)});
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(::testing::Message() << "vocab " << cases[c].vocab << ", " << cases[c].blocks.size() << " blocks");
    run_case(cases[c], static_cast<uint32_t>(100 + c));
  }
}

TEST(RejectSample, LowersOnlyFp32PickRowsWithOneWideIds) {
  TANDEM_REQUIRE_GPU();
  ir::Batch b;
  b.add_sequence({1, 2}, {0, 1}, 0);
  const ir::Bucket bucket{4, 2, 4};
  auto db = device_batch(b, bucket);
  DeviceBuffer buf = to_device(std::vector<float>(64, 0.0f));
  const Loc ids = make_loc(buf, ir::Rows::kPicks, 1, Dt::kU32, "ids");
  EXPECT_FALSE(reject_sample_steps(db->ctx, make_loc(buf, ir::Rows::kTokens, 8, Dt::kF32, "tok"), 8, ids).ok());
  EXPECT_FALSE(reject_sample_steps(db->ctx, make_loc(buf, ir::Rows::kPicks, 8, Dt::kF16, "half"), 8, ids).ok());
  EXPECT_FALSE(reject_sample_steps(db->ctx, make_loc(buf, ir::Rows::kPicks, 8, Dt::kF32, "x"), 9, ids).ok());
  EXPECT_TRUE(reject_sample_steps(db->ctx, make_loc(buf, ir::Rows::kPicks, 8, Dt::kF32, "x"), 8, ids).ok());
}

}  // namespace
}  // namespace tandem::cuda::test
