// Token choice on the GPU (issue 9): the argmax, top_k and sample kernels through their launchers against
// engine/ir/sampling.h on the same logits: random rows, rows of exact ties, ±inf and huge values, 1 to
// 151,936 columns, several sequences at their own positions, seeds and parameters in one launch. Ids and
// top-k values must be equal; a sampled token may differ only where the reference's own rounding decides
// it (the draw or the nucleus mass within kRoundingMargin of a boundary). Bucket rows
// past the real ones keep their sentinel; a row alone and inside a batch gives the same bits; sampled ids
// follow the tempered top-p distribution (chi-square); the ops lower into plans and match the CPU backend.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <numeric>

#include "engine/cpu/cpu_backend.h"
#include "engine/io/safetensors.h"
#include "engine/ir/executor.h"
#include "engine/ir/sampling.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr uint32_t kNoId = 0xdeadbeefu;  // sentinel of id outputs
constexpr uint32_t kWide = 151936;       // Qwen3's vocabulary
constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Kind { kNormal, kTies, kFlat, kExtreme, kCrowded, kDense, kGeometric, kZeros, kNegInf, kPosInf, kNan };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNormal: return "normal";
    case Kind::kTies: return "ties";
    case Kind::kFlat: return "flat";
    case Kind::kExtreme: return "extreme";
    case Kind::kCrowded: return "crowded";
    case Kind::kDense: return "dense";
    case Kind::kGeometric: return "geometric";
    case Kind::kZeros: return "zeros";
    case Kind::kNegInf: return "all -inf";
    case Kind::kPosInf: return "+inf";
    case Kind::kNan: return "nan";
  }
  return "?";
}

// One logits row of `columns` values of a kind.
std::vector<float> make_row(Kind kind, uint32_t columns, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(columns);
  for (uint32_t i = 0; i < columns; ++i) {
    switch (kind) {
      case Kind::kNormal: x[i] = normal(rng); break;
      case Kind::kTies: x[i] = std::round(normal(rng) * 0.5f); break;  // a few integers, each many times
      case Kind::kFlat: x[i] = 1.5f; break;
      case Kind::kExtreme: {
        const uint32_t r = rng() % 8;
        const float pick[] = {-kInf, -kInf, 3e38f, -3e38f, 0.0f, -0.0f, 1e-30f, normal(rng)};
        x[i] = pick[r];
        break;
      }
      case Kind::kCrowded: x[i] = static_cast<float>(columns - i); break;  // the top in the first few threads
      case Kind::kDense: x[i] = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng); break;  // all distinct, close
      case Kind::kGeometric: x[i] = std::ldexp(1.0f, -static_cast<int>(rng() % 100)); break;   // 2^-k, k < 100
      case Kind::kZeros: x[i] = i % 3 == 0 ? -1.0f : (i % 3 == 1 ? -0.0f : 0.0f); break;  // -0 and +0 are equal
      case Kind::kNegInf: x[i] = -kInf; break;
      case Kind::kPosInf: x[i] = i % 5 == 3 ? kInf : normal(rng); break;
      case Kind::kNan: x[i] = i % 7 == 2 ? std::numeric_limits<float>::quiet_NaN() : normal(rng); break;
    }
  }
  return x;
}

// A launch's rows laid out `ld` apart in a bucket of `rows` rows (padding rows hold sentinels).
std::vector<float> pad_rows(const std::vector<std::vector<float>>& rows, uint32_t ld, uint32_t bucket_rows) {
  std::vector<float> out(size_t{bucket_rows} * ld, kSentinel);
  for (size_t r = 0; r < rows.size(); ++r) std::copy(rows[r].begin(), rows[r].end(), out.begin() + r * ld);
  return out;
}

DeviceBuffer id_buffer(size_t n) { return to_device(std::vector<uint32_t>(n, kNoId)); }

// A batch of sequences with `picks[s]` logit rows each, starting at `start[s]`, sampled with `params[s]`.
ir::Batch choice_batch(const std::vector<uint32_t>& picks, const std::vector<uint32_t>& start,
                       const std::vector<ir::SamplingParams>& params) {
  ir::Batch b;
  for (size_t s = 0; s < picks.size(); ++s) {
    const uint32_t len = picks[s] + 2;
    std::vector<uint32_t> rows(picks[s]);
    std::iota(rows.begin(), rows.end(), 2u);  // the last picks[s] rows of the sequence
    b.add_sequence(std::vector<uint32_t>(len, 0), rows, 0);
  }
  b.start = start;
  b.slot.resize(picks.size());
  std::iota(b.slot.begin(), b.slot.end(), 0u);
  b.sampling = params;
  return b;
}

// The device sums FP32 probabilities with the GPU's expf in its own order, so a draw within ~32 float
// ulps of a CDF step or of the nucleus boundary may land on the neighbour (the H200 showed 1.9e-7 on a
// 151,936-column row; the emulator, with the host's expf, none).
constexpr double kRoundingMargin = 2e-6;

// How close the reference's decision for this row came to going the other way, relative to the mass:
// the nucleus mass against top_p · sum at its boundary, and the draw against the CDF. NaN for rows the
// reference settles without rounding (greedy, non-finite logits).
double rounding_margin(const std::vector<float>& row, const ir::SamplingParams& p, uint32_t position) {
  if (p.temperature == 0.0f) return std::nan("");
  const float top = *std::max_element(row.begin(), row.end());
  std::vector<double> q(row.size());
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) sum += q[i] = std::exp((double{row[i]} - top) / p.temperature);
  if (!std::isfinite(sum)) return std::nan("");
  double margin = std::numeric_limits<double>::infinity();
  if (p.top_p < 1.0f) {
    std::vector<uint32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return q[a] > q[b]; });
    double mass = 0.0;
    for (uint32_t id : order) {
      margin = std::min(margin, std::abs(mass - p.top_p * sum) / sum);
      mass += q[id];
    }
  }
  const ir::Distribution d = ir::tempered(row, p.temperature, p.top_p);
  const double u = ir::uniform(p.seed, position, ir::Stream::kTarget);
  double cdf = 0.0;
  for (double pr : d.probs) margin = std::min(margin, std::abs(u - (cdf += pr)));
  return margin;
}

class ChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(20240917);
  }
  // Rows of the wide vocabulary the emulator can afford in one test.
  uint32_t wide_rows() const { return emulated() ? 2 : 24; }
  // Argmax, TopK and Sample lowered into one plan over rows `width` wide, against the CPU backend.
  void check_choice_plan(uint32_t width);
  std::mt19937 rng_;
};

const Kind kKinds[] = {Kind::kNormal, Kind::kTies,      Kind::kFlat,  Kind::kExtreme,
                       Kind::kCrowded, Kind::kDense, Kind::kGeometric, Kind::kZeros};

TEST_F(ChoiceTest, ArgmaxIsTheReferencesIdOnEveryKindOfRow) {
  for (uint32_t columns : {1u, 7u, 1000u, kWide}) {
    for (uint32_t extra : {0u, 5u}) {  // ld = columns (4-wide loads where columns allows) and wider rows
      const uint32_t ld = columns + extra;
      std::vector<std::vector<float>> rows;
      const std::vector<Kind> kinds = {Kind::kNormal,    Kind::kTies,      Kind::kFlat,   Kind::kExtreme,
                                       Kind::kCrowded,   Kind::kDense,     Kind::kGeometric, Kind::kZeros,
                                       Kind::kNegInf,    Kind::kPosInf,    Kind::kNan};
      for (size_t r = 0; r < (columns == kWide ? wide_rows() : 2 * kinds.size()); ++r) {
        rows.push_back(make_row(kinds[r % kinds.size()], columns, rng_));
      }
      rows.push_back(make_row(Kind::kNan, columns, rng_));
      rows.back()[0] = std::numeric_limits<float>::quiet_NaN();  // the reference never leaves index 0
      const uint32_t bucket_rows = static_cast<uint32_t>(rows.size()) + 3;
      ir::Batch batch;
      for (size_t r = 0; r < rows.size(); ++r) batch.add_sequence({0}, {0}, 0);
      auto db = device_batch(std::move(batch), ir::Bucket{bucket_rows, bucket_rows, bucket_rows});
      DeviceBuffer x = to_device(pad_rows(rows, ld, bucket_rows)), out = id_buffer(bucket_rows);
      run_step(argmax_step(db->ctx, make_loc(x, ir::Rows::kPicks, ld, Dt::kF32, "logits"), columns,
                           make_loc(out, ir::Rows::kPicks, 1, Dt::kU32, "ids")));
      const std::vector<uint32_t> got = to_host<uint32_t>(out, bucket_rows);
      for (size_t r = 0; r < rows.size(); ++r) {
        ASSERT_EQ(got[r], ir::argmax(rows[r])) << "row " << r << " (" << kind_name(kinds[r % kinds.size()]) << ") of "
                                               << columns << " columns, ld " << ld;
      }
      for (size_t r = rows.size(); r < bucket_rows; ++r) ASSERT_EQ(got[r], kNoId) << "padding row " << r;
    }
  }
}

TEST_F(ChoiceTest, TopKIsTheReferencesIdsAndValues) {
  for (uint32_t columns : {1u, 7u, 1000u, kWide}) {
    for (uint32_t k : {1u, 7u, 16u, 64u}) {
      if (k > columns) continue;
      const uint32_t ld = columns % 4 == 0 ? columns : columns + 1;  // 7 columns: 4-wide loads and a tail
      std::vector<std::vector<float>> rows;
      std::vector<Kind> kinds;
      for (size_t r = 0; r < (columns == kWide ? wide_rows() + 1 : 3 * std::size(kKinds)); ++r) {
        kinds.push_back(kKinds[r % std::size(kKinds)]);
        rows.push_back(make_row(kinds.back(), columns, rng_));
      }
      const uint32_t bucket_rows = static_cast<uint32_t>(rows.size()) + 2;
      ir::Batch batch;
      for (size_t r = 0; r < rows.size(); ++r) batch.add_sequence({0}, {}, 0);
      auto db = device_batch(std::move(batch), ir::Bucket{bucket_rows, bucket_rows, bucket_rows});
      DeviceBuffer x = to_device(pad_rows(rows, ld, bucket_rows));
      DeviceBuffer ids = id_buffer(size_t{bucket_rows} * k), values = sentinel_buffer(bucket_rows, k, Dt::kF32);
      run_step(top_k_step(db->ctx, make_loc(x, ir::Rows::kTokens, ld, Dt::kF32, "logits"), columns, k,
                          make_loc(ids, ir::Rows::kTokens, k, Dt::kU32, "top_ids"),
                          make_loc(values, ir::Rows::kTokens, k, Dt::kF32, "top_values")));
      const std::vector<uint32_t> got_ids = to_host<uint32_t>(ids, size_t{bucket_rows} * k);
      const std::vector<float> got_values = to_host<float>(values, size_t{bucket_rows} * k);
      for (size_t r = 0; r < rows.size(); ++r) {
        std::vector<uint32_t> want_ids(k);
        std::vector<float> want_values(k);
        ir::top_k(rows[r], k, want_ids, want_values);
        for (uint32_t i = 0; i < k; ++i) {
          const size_t at = r * k + i;
          ASSERT_EQ(got_ids[at], want_ids[i]) << "rank " << i << " of row " << r << " (" << kind_name(kinds[r])
                                              << "), " << columns << " columns, k " << k;
          ASSERT_EQ(std::memcmp(&got_values[at], &want_values[i], sizeof(float)), 0)
              << "value at rank " << i << " of row " << r << ": " << got_values[at] << " vs " << want_values[i];
        }
      }
      for (size_t i = rows.size() * k; i < size_t{bucket_rows} * k; ++i) {
        ASSERT_EQ(got_ids[i], kNoId) << "padding id " << i;
        ASSERT_EQ(got_values[i], kSentinel) << "padding value " << i;
      }
    }
  }
}

// The params every sampling test cycles through: greedy, tempered, and tempered top-p down to a nucleus
// of one id.
std::vector<ir::SamplingParams> param_cycle() {
  std::vector<ir::SamplingParams> out;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (float t : {0.0f, 0.7f, 1.5f}) {
    for (float top_p : {1.0f, 0.9f, 0.5f, 1e-6f}) {
      out.push_back({t, top_p, seed});
      seed = ir::mix64(seed);
    }
  }
  return out;
}

struct SampleRun {
  ir::Batch batch;
  std::vector<std::vector<float>> rows;  // one per pick
  std::vector<uint32_t> got;             // the device's ids, bucket picks long
};

// Runs the sample kernel over a batch whose picks are the given rows; split: through sample_steps, its rows
// split across blocks where the bucket asks for it (the split must then happen).
SampleRun run_sample(ir::Batch batch, std::vector<std::vector<float>> rows, uint32_t columns, uint32_t ld,
                     uint32_t extra_picks, bool split = false) {
  SampleRun run;
  const uint32_t bucket_picks = batch.num_picks() + extra_picks;
  const ir::Bucket bucket{batch.tokens() + 8, batch.seqs() + 2, bucket_picks};
  auto db = device_batch(batch, bucket);
  DeviceBuffer x = to_device(pad_rows(rows, ld, bucket_picks)), out = id_buffer(bucket_picks);
  const Loc xl = make_loc(x, ir::Rows::kPicks, ld, Dt::kF32, "logits");
  const Loc ol = make_loc(out, ir::Rows::kPicks, 1, Dt::kU32, "ids");
  if (split) {
    const uint32_t parts = choice_parts(bucket_picks, columns);
    EXPECT_GT(parts, 1u) << bucket_picks << " picks of " << columns << " columns";
    auto scratch = DeviceBuffer::make(size_t{bucket_picks} * parts * 2 * 8, "scan partials");
    EXPECT_TRUE(scratch.ok());
    auto steps = sample_steps(db->ctx, xl, columns, ol, ir::Stream::kTarget, scratch->data(), scratch->bytes());
    EXPECT_TRUE(steps.ok() && steps->size() == 2u);
    run_steps(steps);
  } else {
    run_step(sample_step(db->ctx, xl, columns, ol));
  }
  run.got = to_host<uint32_t>(out, bucket_picks);
  run.batch = std::move(batch);
  run.rows = std::move(rows);
  return run;
}

// Every pick's id equals the reference's, or rounding decided it. Padding untouched.
void expect_reference_tokens(const SampleRun& run, const std::string& what) {
  const ir::Batch& b = run.batch;
  for (uint32_t s = 0; s < b.seqs(); ++s) {
    for (uint32_t p = b.pcu[s]; p < b.pcu[s + 1]; ++p) {
      const uint32_t position = b.seq_start(s) + b.picks[p] + 1;
      const uint32_t want = ir::sample_token(run.rows[p], b.sampling[s], position);
      if (run.got[p] == want) continue;
      const double margin = rounding_margin(run.rows[p], b.sampling[s], position);
      ASSERT_LT(margin, kRoundingMargin) << what << ": pick " << p << " of sequence " << s << " (temperature "
                              << b.sampling[s].temperature << ", top_p " << b.sampling[s].top_p << ", position "
                              << position << ") is " << run.got[p] << ", the reference " << want;
    }
  }
  for (size_t p = b.num_picks(); p < run.got.size(); ++p) {
    ASSERT_EQ(run.got[p], kNoId) << what << ": padding pick " << p;
  }
}

TEST_F(ChoiceTest, SampleIsTheReferencesTokenForEveryParameterAndPosition) {
  const std::vector<ir::SamplingParams> params = param_cycle();
  for (uint32_t columns : {1u, 7u, 1000u}) {
    for (Kind kind : {Kind::kNormal, Kind::kTies, Kind::kFlat, Kind::kExtreme, Kind::kCrowded, Kind::kDense,
                      Kind::kGeometric, Kind::kZeros, Kind::kNegInf, Kind::kPosInf}) {
      // Every parameter set is one sequence with 1 to 4 picks at its own start position.
      std::vector<uint32_t> picks, start;
      std::vector<std::vector<float>> rows;
      for (size_t s = 0; s < params.size(); ++s) {
        picks.push_back(1 + static_cast<uint32_t>(s % 4));
        start.push_back(static_cast<uint32_t>(17 * s + 3));
        for (uint32_t p = 0; p < picks.back(); ++p) rows.push_back(make_row(kind, columns, rng_));
      }
      const uint32_t ld = columns % 4 == 0 ? columns : columns + 3;
      const SampleRun run = run_sample(choice_batch(picks, start, params), rows, columns, ld, 3);
      expect_reference_tokens(run, std::string(kind_name(kind)) + " rows of " + std::to_string(columns));
    }
  }
}

// Every kind under every parameter set on the GPU; on the emulator the cases that take each path of the
// nucleus search at least once: gathered at once, an exact tie settled by rank, ranges split by value
// (dense rows) and by key (geometric rows), and top_p = 1 (no search).
TEST_F(ChoiceTest, SampleOnQwenSizedRows) {
  const std::vector<ir::SamplingParams> all = param_cycle();  // [4 · t + p]: t 0, 0.7, 1.5; top_p 1, .9, .5, 1e-6
  std::vector<std::pair<Kind, ir::SamplingParams>> cases;
  if (emulated()) {
    cases = {{Kind::kNormal, all[5]}, {Kind::kTies, all[6]},  {Kind::kFlat, all[9]},      {Kind::kExtreme, all[10]},
             {Kind::kDense, all[9]},  {Kind::kDense, all[6]}, {Kind::kGeometric, all[10]}, {Kind::kNormal, all[7]},
             {Kind::kNormal, all[4]}};
  } else {
    for (Kind kind : kKinds) {
      for (const ir::SamplingParams& p : all) cases.emplace_back(kind, p);
    }
  }
  std::vector<ir::SamplingParams> params;
  std::vector<uint32_t> start;
  std::vector<std::vector<float>> rows;
  for (size_t s = 0; s < cases.size(); ++s) {
    rows.push_back(make_row(cases[s].first, kWide, rng_));
    params.push_back(cases[s].second);
    start.push_back(1000 + 31 * static_cast<uint32_t>(s));
  }
  const SampleRun run = run_sample(choice_batch(std::vector<uint32_t>(cases.size(), 1), start, params), rows, kWide,
                                   kWide, 1);
  expect_reference_tokens(run, "151,936-column rows");
}

TEST_F(ChoiceTest, SampleWithNanLogitsFallsBackAsTheReferenceDoes) {
  // top_p = 1: the reference's p are NaN, no CDF entry is reached, and it returns the last id; greedy
  // rows still take the argmax. (Under a nucleus the reference's sort of NaN is undefined.)
  const std::vector<ir::SamplingParams> params = {{0.0f, 1.0f, 1}, {0.7f, 1.0f, 2}, {1.5f, 1.0f, 3}};
  std::vector<std::vector<float>> rows;
  for (size_t s = 0; s < params.size(); ++s) rows.push_back(make_row(Kind::kNan, 1000, rng_));
  const SampleRun run = run_sample(choice_batch({1, 1, 1}, {0, 5, 9}, params), rows, 1000, 1000, 0);
  expect_reference_tokens(run, "rows with NaN");
  EXPECT_EQ(run.got[1], 999u);
}

// Sampled ids over many seeds follow softmax(x / T) cut to the top-p nucleus: a chi-square test of the
// counts (cells merged to expected counts >= 5) at p = 0.001, and no id outside the nucleus.
TEST_F(ChoiceTest, SampledIdsFollowTheTemperedTopPDistribution) {
  const uint32_t columns = 64, draws = emulated() ? 1024 : 8192;
  const std::vector<float> row = make_row(Kind::kNormal, columns, rng_);
  for (const auto& [t, top_p] : {std::pair{0.8f, 0.9f}, std::pair{1.5f, 1.0f}}) {
    std::vector<ir::SamplingParams> params;
    std::vector<uint32_t> start;
    for (uint32_t s = 0; s < draws; ++s) {
      params.push_back({t, top_p, 0x1234567ull * (s + 1)});
      start.push_back(s % 97);
    }
    const SampleRun run =
        run_sample(choice_batch(std::vector<uint32_t>(draws, 1), start, params),
                   std::vector<std::vector<float>>(draws, row), columns, columns, 0);
    const ir::Distribution d = ir::tempered(row, t, top_p);
    std::vector<double> count(columns, 0.0);
    for (uint32_t s = 0; s < draws; ++s) {
      ASSERT_LT(run.got[s], columns);
      ASSERT_GT(d.prob(run.got[s]), 0.0) << "id " << run.got[s] << " is outside the nucleus";
      count[run.got[s]] += 1.0;
    }
    // Cells in descending probability, merged until each expects at least 5 draws.
    std::vector<uint32_t> order(d.ids.begin(), d.ids.end());
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return d.prob(a) > d.prob(b); });
    double chi2 = 0.0, want = 0.0, seen = 0.0;
    int cells = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      want += d.prob(order[i]) * draws;
      seen += count[order[i]];
      if (want >= 5.0 || i + 1 == order.size()) {
        chi2 += (seen - want) * (seen - want) / want;
        want = seen = 0.0;
        ++cells;
      }
    }
    const double df = cells - 1;
    ASSERT_GE(df, 3.0) << "too few cells to test";
    const double z = 3.09;  // p = 0.001, Wilson–Hilferty
    const double limit = df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3.0);
    EXPECT_LT(chi2, limit) << "temperature " << t << ", top_p " << top_p << ": chi-square " << chi2 << " over "
                           << df << " degrees of freedom";
  }
}

// A row's result depends on the row alone: the same row, parameters and position give the same bits
// alone in a bucket of one and among many rows of a larger bucket.
TEST_F(ChoiceTest, ARowAloneAndInABatchGiveTheSameBits) {
  const uint32_t columns = emulated() ? 4000 : kWide;
  const std::vector<ir::SamplingParams> params = param_cycle();
  std::vector<std::vector<float>> rows;
  for (size_t s = 0; s < params.size(); ++s) rows.push_back(make_row(kKinds[s % 4], columns, rng_));
  std::vector<uint32_t> start(params.size());
  for (size_t s = 0; s < start.size(); ++s) start[s] = 7 * static_cast<uint32_t>(s);
  const SampleRun batched =
      run_sample(choice_batch(std::vector<uint32_t>(params.size(), 1), start, params), rows, columns, columns, 5);
  for (size_t s = 0; s < params.size(); ++s) {
    const SampleRun alone = run_sample(choice_batch({1}, {start[s]}, {params[s]}), {rows[s]}, columns, columns, 0);
    EXPECT_EQ(alone.got[0], batched.got[s]) << "sample of row " << s;
  }
  const uint32_t k = 16;
  ir::Batch batch;
  for (size_t r = 0; r < rows.size(); ++r) batch.add_sequence({0}, {}, 0);
  const uint32_t n = static_cast<uint32_t>(rows.size());
  auto many = device_batch(batch, ir::Bucket{n, n, n});
  DeviceBuffer x = to_device(pad_rows(rows, columns, static_cast<uint32_t>(rows.size())));
  DeviceBuffer ids = id_buffer(rows.size() * k), values = sentinel_buffer(rows.size(), k, Dt::kF32),
               am = id_buffer(rows.size());
  const Loc xl = make_loc(x, ir::Rows::kTokens, columns, Dt::kF32, "logits");
  run_step(top_k_step(many->ctx, xl, columns, k, make_loc(ids, ir::Rows::kTokens, k, Dt::kU32, "ids"),
                      make_loc(values, ir::Rows::kTokens, k, Dt::kF32, "values")));
  run_step(argmax_step(many->ctx, xl, columns, make_loc(am, ir::Rows::kTokens, 1, Dt::kU32, "am")));
  const std::vector<uint32_t> all_ids = to_host<uint32_t>(ids, rows.size() * k);
  const std::vector<uint32_t> all_am = to_host<uint32_t>(am, rows.size());
  for (size_t r = 0; r < rows.size(); r += 5) {
    ir::Batch one;
    one.add_sequence({0}, {}, 0);
    auto single = device_batch(one, ir::Bucket{1, 1, 1});
    DeviceBuffer x1 = to_device(rows[r]), ids1 = id_buffer(k), values1 = sentinel_buffer(1, k, Dt::kF32),
                 am1 = id_buffer(1);
    const Loc x1l = make_loc(x1, ir::Rows::kTokens, columns, Dt::kF32, "logits");
    run_step(top_k_step(single->ctx, x1l, columns, k, make_loc(ids1, ir::Rows::kTokens, k, Dt::kU32, "ids"),
                        make_loc(values1, ir::Rows::kTokens, k, Dt::kF32, "values")));
    run_step(argmax_step(single->ctx, x1l, columns, make_loc(am1, ir::Rows::kTokens, 1, Dt::kU32, "am")));
    const std::vector<uint32_t> one_ids = to_host<uint32_t>(ids1, k);
    EXPECT_TRUE(std::equal(one_ids.begin(), one_ids.end(), all_ids.begin() + r * k)) << "top_k of row " << r;
    EXPECT_EQ(to_host<uint32_t>(am1, 1)[0], all_am[r]) << "argmax of row " << r;
  }
}

// Where a bucket has few long rows they split across blocks (args.cuh kChoiceMaxParts): as many parts as
// kChoiceTargetBlocks asks for, each of at least kChoicePartColumns columns, at most kChoiceMaxParts.
TEST(ChoiceParts, FewLongRowsSplitAndManyShortOnesDoNot) {
  EXPECT_EQ(choice_parts(1, kWide), 32u);
  EXPECT_EQ(choice_parts(16, kWide), 17u);
  EXPECT_EQ(choice_parts(132, kWide), 2u);
  EXPECT_EQ(choice_parts(264, kWide), 1u);
  EXPECT_EQ(choice_parts(1024, kWide), 1u);
  EXPECT_EQ(choice_parts(1, 4095), 1u);
  EXPECT_EQ(choice_parts(1, 4096), 2u);
  EXPECT_EQ(choice_parts(0, kWide), 32u);
}

// Split rows give the single-block kernels' results and the reference's: top-k ids and values, and sampled
// tokens under every parameter set (the scan is exact, so even the draws agree), with 16-byte loads (ld a
// multiple of 4) and without, on parts that end inside a vector.
TEST_F(ChoiceTest, SplitRowsGiveTheSingleBlockResults) {
  const std::vector<ir::SamplingParams> params = param_cycle();
  for (uint32_t columns : {kWide, 10007u}) {
    for (uint32_t ld : {(columns + 3) & ~3u, columns % 4 == 0 ? columns + 1 : columns}) {
      for (uint32_t n : {1u, emulated() ? 2u : 5u}) {
        const std::string what = fmt::format("{} rows of {} columns, ld {}", n, columns, ld);
        std::vector<std::vector<float>> rows;
        std::vector<Kind> kinds;
        for (uint32_t r = 0; r < n; ++r) {
          kinds.push_back(kKinds[(r + columns) % std::size(kKinds)]);
          rows.push_back(make_row(kinds.back(), columns, rng_));
        }
        ir::Batch batch;
        for (uint32_t r = 0; r < n; ++r) batch.add_sequence({0}, {}, 0);
        auto db = device_batch(batch, ir::Bucket{n, n, n});
        DeviceBuffer x = to_device(pad_rows(rows, ld, n));
        const Loc xl = make_loc(x, ir::Rows::kTokens, ld, Dt::kF32, "logits");
        const uint32_t parts = choice_parts(n, columns);
        ASSERT_GT(parts, 1u) << what;
        for (uint32_t k : {1u, 64u}) {
          auto scratch = DeviceBuffer::make(size_t{n} * parts * k * 8, "top-k partials");
          ASSERT_TRUE(scratch.ok());
          DeviceBuffer ids = id_buffer(size_t{n} * k), values = sentinel_buffer(n, k, Dt::kF32);
          const Loc il = make_loc(ids, ir::Rows::kTokens, k, Dt::kU32, "ids");
          const Loc vl = make_loc(values, ir::Rows::kTokens, k, Dt::kF32, "values");
          auto steps = top_k_steps(db->ctx, xl, columns, k, il, vl, scratch->data(), scratch->bytes());
          ASSERT_TRUE(steps.ok() && steps->size() == 2u) << what;
          run_steps(steps);
          const std::vector<uint32_t> got_ids = to_host<uint32_t>(ids, size_t{n} * k);
          const std::vector<float> got_values = to_host<float>(values, size_t{n} * k);
          for (uint32_t r = 0; r < n; ++r) {
            std::vector<uint32_t> want_ids(k);
            std::vector<float> want_values(k);
            ir::top_k(rows[r], k, want_ids, want_values);
            for (uint32_t i = 0; i < k; ++i) {
              ASSERT_EQ(got_ids[r * k + i], want_ids[i]) << what << ": rank " << i << " of row " << r << " ("
                                                         << kind_name(kinds[r]) << "), k " << k;
              ASSERT_EQ(std::memcmp(&got_values[r * k + i], &want_values[i], sizeof(float)), 0) << what;
            }
          }
          // Too little scratch is refused at lowering, naming what the split needs.
          auto small = top_k_steps(db->ctx, xl, columns, k, il, vl, scratch->data(), scratch->bytes() - 8);
          ASSERT_FALSE(small.ok());
          EXPECT_NE(small.error().message().find("split rows need " + std::to_string(scratch->bytes())),
                    std::string::npos)
              << small.error().message();
        }
      }
    }
    // Sampling: one pick a sequence, every parameter set, alone and split.
    std::vector<std::vector<float>> rows;
    std::vector<uint32_t> start;
    const size_t n = emulated() ? 3 : params.size();
    std::vector<ir::SamplingParams> ps(params.begin(), params.begin() + static_cast<long>(n));
    if (emulated()) ps = {params[0], params[5], params[10]};
    for (size_t s = 0; s < ps.size(); ++s) {
      rows.push_back(make_row(kKinds[s % std::size(kKinds)], columns, rng_));
      start.push_back(100 + 9 * static_cast<uint32_t>(s));
    }
    const ir::Batch batch = choice_batch(std::vector<uint32_t>(ps.size(), 1), start, ps);
    const SampleRun one = run_sample(batch, rows, columns, columns, 0);
    const SampleRun split = run_sample(batch, rows, columns, columns, 0, true);
    EXPECT_EQ(one.got, split.got) << columns << " columns";
    expect_reference_tokens(split, fmt::format("split rows of {} columns", columns));
  }
}

// A full decoder bucket of Qwen3 logits (64 sequences × 16 picks of 151,936 columns), GPU only: every
// kernel checked against the reference (sampling on every 16th pick, which the host sorts slowly) and
// timed, microseconds per launch printed for BENCHMARKS.md.
TEST_F(ChoiceTest, QwenBucketIsCorrectAndTimed) {
  if (emulated()) GTEST_SKIP() << "1,024 rows of 151,936 columns take minutes on the emulator";
  constexpr uint32_t kSeqs = 64, kPer = 16, kRows = kSeqs * kPer, k = 64;
  std::vector<std::vector<float>> rows;
  for (uint32_t r = 0; r < kRows; ++r) rows.push_back(make_row(Kind::kNormal, kWide, rng_));
  DeviceBuffer x = to_device(pad_rows(rows, kWide, kRows)), ids = id_buffer(size_t{kRows} * k),
               values = sentinel_buffer(kRows, k, Dt::kF32), out = id_buffer(kRows);
  const auto time_us = [&](const Result<KernelStep>& step) {
    run_step(step);  // warm
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kRuns = 10;
    for (int i = 0; i < kRuns; ++i) EXPECT_TRUE(launch(*gpu().modules, *step, gpu().device->stream()).ok());
    EXPECT_EQ(cudaStreamSynchronize(gpu().device->stream()), cudaSuccess);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kRuns;
  };
  const std::vector<uint32_t> picks(kSeqs, kPer);
  std::vector<uint32_t> start(kSeqs);
  for (uint32_t s = 0; s < kSeqs; ++s) start[s] = 100 * s;
  const Loc xl = make_loc(x, ir::Rows::kPicks, kWide, Dt::kF32, "logits");
  {
    auto db = device_batch(choice_batch(picks, start, std::vector<ir::SamplingParams>(kSeqs)),
                           ir::Bucket{kSeqs * (kPer + 2), kSeqs, kRows});
    const double am = time_us(argmax_step(db->ctx, xl, kWide, make_loc(out, ir::Rows::kPicks, 1, Dt::kU32, "ids")));
    const std::vector<uint32_t> got = to_host<uint32_t>(out, kRows);
    for (uint32_t r = 0; r < kRows; ++r) ASSERT_EQ(got[r], ir::argmax(rows[r])) << "argmax of row " << r;
    const double tk = time_us(top_k_step(db->ctx, xl, kWide, k, make_loc(ids, ir::Rows::kPicks, k, Dt::kU32, "ids"),
                                         make_loc(values, ir::Rows::kPicks, k, Dt::kF32, "values")));
    const std::vector<uint32_t> got_ids = to_host<uint32_t>(ids, size_t{kRows} * k);
    for (uint32_t r = 0; r < kRows; r += 4) {
      std::vector<uint32_t> want(k);
      std::vector<float> want_values(k);
      ir::top_k(rows[r], k, want, want_values);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got_ids.begin() + size_t{r} * k)) << "top_k of row " << r;
    }
    std::cout << fmt::format("1024 × 151,936: argmax {:.1f} us, top_k 64 {:.1f} us\n", am, tk);
  }
  for (const ir::SamplingParams p : {ir::SamplingParams{0.0f, 1.0f, 7}, ir::SamplingParams{0.7f, 1.0f, 7},
                                     ir::SamplingParams{0.7f, 0.9f, 7}, ir::SamplingParams{1.5f, 0.95f, 7}}) {
    std::vector<ir::SamplingParams> params(kSeqs, p);
    for (uint32_t s = 0; s < kSeqs; ++s) params[s].seed = 1000 + s;
    SampleRun run;
    run.batch = choice_batch(picks, start, params);
    auto db = device_batch(run.batch, ir::Bucket{kSeqs * (kPer + 2), kSeqs, kRows});
    const double us = time_us(sample_step(db->ctx, xl, kWide, make_loc(out, ir::Rows::kPicks, 1, Dt::kU32, "ids")));
    run.got = to_host<uint32_t>(out, kRows);
    for (uint32_t s = 0; s < kSeqs; ++s) {  // one pick of each sequence
      const uint32_t r = s * kPer + 5, position = run.batch.seq_start(s) + run.batch.picks[r] + 1;
      const uint32_t want = ir::sample_token(rows[r], params[s], position);
      if (run.got[r] != want) {
        EXPECT_LT(rounding_margin(rows[r], params[s], position), kRoundingMargin)
            << "pick " << r << ": " << run.got[r] << " vs " << want;
      }
    }
    std::cout << fmt::format("1024 × 151,936: sample at temperature {}, top_p {}: {:.1f} us\n", p.temperature,
                             p.top_p, us);
  }
}

TEST_F(ChoiceTest, LaunchersRefuseWrongTypesAndShapes) {
  ir::Batch b;
  b.add_sequence({0}, {0}, 0);
  auto db = device_batch(b, ir::Bucket{4, 2, 4});
  DeviceBuffer buf = to_device(std::vector<float>(4 * 100, 0.0f));
  const Loc x = make_loc(buf, ir::Rows::kPicks, 100, Dt::kF32, "logits");
  const Loc ids = make_loc(buf, ir::Rows::kPicks, 1, Dt::kU32, "ids");
  const auto message = [](const Result<KernelStep>& s) { return s.ok() ? std::string("ok") : s.error().message(); };
  EXPECT_EQ(message(argmax_step(db->ctx, make_loc(buf, ir::Rows::kPicks, 100, Dt::kF16, "half"), 100, ids)),
            "argmax: logits 'half' (picks × 100 f16) must be FP32");
  EXPECT_EQ(message(argmax_step(db->ctx, x, 100, make_loc(buf, ir::Rows::kPicks, 1, Dt::kF32, "floats"))),
            "argmax: ids 'floats' (picks × 1 f32) must be U32, 1 wide, over the rows of 'logits' (picks × 100 f32)");
  EXPECT_EQ(message(argmax_step(db->ctx, x, 101, ids)),
            "argmax: 101 columns of 'logits' (picks × 100 f32) (1 to 100)");
  EXPECT_EQ(message(top_k_step(db->ctx, x, 100, 65, make_loc(buf, ir::Rows::kPicks, 65, Dt::kU32, "ids"),
                               make_loc(buf, ir::Rows::kPicks, 65, Dt::kF32, "values"))),
            "top_k: k 65 of 100 columns of 'logits' (picks × 100 f32) (1 to the smaller of the columns and 64)");
  EXPECT_EQ(message(top_k_step(db->ctx, x, 100, 8, make_loc(buf, ir::Rows::kPicks, 8, Dt::kU32, "ids"),
                               make_loc(buf, ir::Rows::kPicks, 8, Dt::kU32, "values"))),
            "top_k: values 'values' (picks × 8 u32) must be FP32, 8 wide, over the rows of 'logits' "
            "(picks × 100 f32)");
  EXPECT_EQ(message(sample_step(db->ctx, make_loc(buf, ir::Rows::kTokens, 100, Dt::kF32, "tok"), 100, ids)),
            "sample: logits 'tok' (tokens × 100 f32) must be pick rows");
  EXPECT_EQ(message(sample_step(db->ctx, x, 100, ids)), "ok");
}

// The three ops inside a lowered plan (support, lowering, host id outputs) give the CPU backend's ids.
// Rows of 297 columns run one block a row; rows of 4,997 split in two (choice_parts), through the plan's scratch.
TEST_F(ChoiceTest, ChoiceOpsInAPlanMatchTheCpuBackend) {
  for (const uint32_t width : {300u, 5000u}) {
    SCOPED_TRACE(width);
    check_choice_plan(width);
  }
}

void ChoiceTest::check_choice_plan(uint32_t width) {
  const uint32_t vocab = 40, columns = width - 3, k = 8;
  std::vector<float> table(size_t{vocab} * width);
  for (uint32_t v = 0; v < vocab; ++v) {
    const std::vector<float> r = make_row(kKinds[v % std::size(kKinds)], width, rng_);
    std::copy(r.begin(), r.end(), table.begin() + size_t{v} * width);
  }
  io::HostTensors source;
  source.add(io::HostTensor::from_f32("table", {vocab, width}, table));
  ir::Graph g;
  const ir::WeightId w = g.add_weight({"table"}, {vocab, width});
  const ir::Val x = g.add_val(ir::Rows::kTokens, width, "x");
  g.add_op(ir::Embed{w, x});
  const ir::Val am = g.add_val(ir::Rows::kTokens, 1, "argmax", ir::Elem::kU32);
  g.add_op(ir::Argmax{x, columns, am});
  const ir::Val top_ids = g.add_val(ir::Rows::kTokens, k, "top_ids", ir::Elem::kU32);
  const ir::Val top_values = g.add_val(ir::Rows::kTokens, k, "top_values");
  g.add_op(ir::TopK{x, columns, k, top_ids, top_values});
  const ir::Val picked = g.add_val(ir::Rows::kPicks, width, "picked");
  g.add_op(ir::PickRows{x, picked});
  const ir::Val sampled = g.add_val(ir::Rows::kPicks, 1, "sampled", ir::Elem::kU32);
  g.add_op(ir::Sample{picked, columns, sampled});
  for (const ir::Val v : {am, top_ids, top_values, sampled}) g.add_output(g.info(v).name, v);
  ASSERT_TRUE(ir::validate(g).ok());

  ir::Batch batch;
  for (uint32_t s = 0; s < 6; ++s) {
    std::vector<uint32_t> ids(5);
    for (auto& id : ids) id = static_cast<uint32_t>(rng_() % vocab);
    batch.add_sequence(ids, {1, 4}, 0);
    batch.sampling.push_back(param_cycle()[(3 * s + 1) % 12]);
  }
  const ir::Bucket bucket{40, 8, 16};
  CudaOptions o;
  o.precision = ir::Precision::kF32;
  auto cuda = make_cuda_backend(o);
  ASSERT_TRUE(cuda.ok()) << cuda.error().message();
  auto cpu = cpu::make_cpu_backend(1);
  ir::Outputs want, got;
  for (ir::Backend* backend : {cpu.get(), cuda->get()}) {
    const ir::Graph* graphs[] = {&g};
    auto weights = backend->upload(source, graphs);
    ASSERT_TRUE(weights.ok()) << weights.error().message();
    auto plan = backend->lower(**weights, g, bucket);
    ASSERT_TRUE(plan.ok()) << plan.error().message();
    auto st = backend->run(**plan, batch, nullptr, backend == cpu.get() ? want : got);
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  ASSERT_EQ(got.values.size(), 4u);
  EXPECT_EQ(got.values[0].ids, want.values[0].ids) << "argmax";
  EXPECT_EQ(got.values[1].ids, want.values[1].ids) << "top_k ids";
  EXPECT_EQ(got.values[2].data, want.values[2].data) << "top_k values";
  EXPECT_EQ(got.values[3].ids, want.values[3].ids) << "sampled ids";
  EXPECT_EQ(got.values[3].ids.size(), 12u);
}

}  // namespace
}  // namespace tandem::cuda::test
