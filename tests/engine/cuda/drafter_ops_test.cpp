// The drafter's ops on the GPU (issue 10): Input gathering tap rows from the run's feature source (the
// plan's copy of host rows, or rows another plan left on the device, of any storage) and DynConv
// (dflash.md §3.2) through their launchers against float64 host versions, bucket rows past the batch
// keeping their sentinel; then both lowered into plans against the CPU backend, which fetches device rows
// it does not hold. |got − want| <= tol · (1 + |want|).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

#include "engine/cpu/cpu_backend.h"
#include "engine/io/safetensors.h"
#include "engine/ir/executor.h"
#include "engine/ir/graph.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

constexpr ir::Bucket kBucket{64, 4, 8};
const std::vector<uint32_t> kLengths = {9, 0, 1, 30};

class DrafterOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_GPU();
    ASSERT_NE(gpu().modules, nullptr);
    rng_.seed(1234);
    batch_ = make_batch(kLengths, {2, 0, 1, 3}, 50, rng_);
  }
  // The batch's index on the device, with Input's feature source filled as a plan fills it.
  std::unique_ptr<DeviceBatch> with_features(const void* staging, uint32_t width) {
    auto d = device_batch(batch_, kBucket);
    std::vector<uint32_t> words(d->layout.words, 0xdeadbeefu);
    fill_index(d->layout, d->batch, words.data());
    fill_features(d->layout, d->batch, words.data(), staging, width);
    d->index = to_device(words);
    d->ctx.ix = index_pointers(d->layout, d->index.as<const unsigned>());
    return d;
  }
  std::mt19937 rng_;
  ir::Batch batch_;
};

std::string variant(const char* family, Dt in, Dt out) {
  return std::string(family) + "_" + dt_name(in) + "_" + dt_name(out);
}

Dt dt_of(ir::Storage s) {
  switch (s) {
    case ir::Storage::kF16: return Dt::kF16;
    case ir::Storage::kBF16: return Dt::kBF16;
    case ir::Storage::kF32:
    case ir::Storage::kU32: return Dt::kF32;
  }
  return Dt::kF32;
}

// Token r reads source row rows[r] (out of order, some twice) of a source whose rows are wider than the
// graph's (their extra columns NaN, never read); the output keeps exactly the source's value in its type.
TEST_F(DrafterOpsTest, InputGathersDeviceRowsOfEveryStorageIntoEveryType) {
  const uint32_t width = 24, stride = 29, source_rows = 50;
  for (ir::Storage storage : {ir::Storage::kF32, ir::Storage::kF16, ir::Storage::kBF16}) {
    const Dt src_type = dt_of(storage);
    std::vector<float> src = rounded_to(random_floats(size_t{source_rows} * stride, rng_, 3.0f), src_type);
    for (uint32_t r = 0; r < source_rows; ++r) {
      for (uint32_t c = width; c < stride; ++c) src[size_t{r} * stride + c] = std::numeric_limits<float>::quiet_NaN();
    }
    DeviceBuffer sd = typed_buffer(src, src_type);
    batch_.feature_source = {sd.data(), source_rows, width, stride, storage, nullptr};
    batch_.feature_rows.clear();
    for (uint32_t r = 0; r < batch_.tokens(); ++r) batch_.feature_rows.push_back((4 * source_rows - 1 - 3 * r) % source_rows);
    batch_.feature_rows[5] = batch_.feature_rows[6];
    const auto d = with_features(nullptr, width);
    for (Dt out : {Dt::kF32, Dt::kF16, Dt::kBF16}) {
      DeviceBuffer yd = sentinel_buffer(kBucket.tokens, width, out);
      run_step(input_step(d->ctx, make_loc(yd, ir::Rows::kTokens, width, out, "taps")));
      std::vector<double> want;
      for (uint32_t r = 0; r < batch_.tokens(); ++r) {
        std::vector<float> row(src.begin() + ptrdiff_t{batch_.feature_rows[r]} * stride,
                               src.begin() + ptrdiff_t{batch_.feature_rows[r]} * stride + width);
        for (float v : rounded_to(row, out)) want.push_back(v);
      }
      expect_rows(read_floats(yd, size_t{kBucket.tokens} * width, out), want, batch_.tokens(), width, 0.0,
                  variant("input", src_type, out));
    }
  }
}

// Host rows: the plan's staging copy, token r at row r.
TEST_F(DrafterOpsTest, InputReadsTheStagedHostRows) {
  const uint32_t width = 40;
  const std::vector<float> rows = random_floats(size_t{kBucket.tokens} * width, rng_, 2.0f);
  DeviceBuffer staging = to_device(rows);
  const auto d = with_features(staging.data(), width);
  for (Dt out : {Dt::kF32, Dt::kBF16}) {
    DeviceBuffer yd = sentinel_buffer(kBucket.tokens, width, out);
    run_step(input_step(d->ctx, make_loc(yd, ir::Rows::kTokens, width, out, "taps")));
    const std::vector<float> r = rounded_to(rows, out);
    const std::vector<double> want(r.begin(), r.begin() + ptrdiff_t{batch_.tokens()} * width);
    expect_rows(read_floats(yd, size_t{kBucket.tokens} * width, out), want, batch_.tokens(), width, 0.0,
                variant("input", Dt::kF32, out));
  }
}

struct ConvCase {
  uint32_t width, taps, group, stage;
  bool accumulate;
};

// y[t, c] = Σ_{τ <= t within the sequence} (base[stage, τ, c] + d[t, (stage·taps + τ)·G + c / group]) · x[t − τ, c].
TEST_F(DrafterOpsTest, DynConvEveryVariantMatchesFloat64) {
  const std::pair<Dt, Dt> variants[] = {{Dt::kF32, Dt::kF32},
                                        {Dt::kF16, Dt::kF16},
                                        {Dt::kF16, Dt::kF32},
                                        {Dt::kBF16, Dt::kBF16},
                                        {Dt::kBF16, Dt::kF32}};
  const ConvCase cases[] = {{64, 2, 16, 0, false}, {64, 2, 16, 1, true}, {48, 3, 4, 1, false}, {13, 2, 13, 0, true}};
  const auto d = device_batch(batch_, kBucket);
  const uint32_t n = kBucket.tokens, tokens = batch_.tokens();
  for (const auto& [in, out] : variants) {
    for (const ConvCase& k : cases) {
      const uint32_t groups = k.width / k.group, dw = 2 * k.taps * groups;
      const std::vector<float> x = rounded_to(random_floats(size_t{n} * k.width, rng_, 2.0f), in);
      const std::vector<float> dl = rounded_to(random_floats(size_t{n} * dw, rng_, 0.5f), in);
      const std::vector<float> base = random_floats(size_t{2} * k.taps * k.width, rng_);
      std::vector<float> prior(size_t{n} * k.width, kSentinel);
      if (k.accumulate) {
        const std::vector<float> p = rounded_to(random_floats(size_t{tokens} * k.width, rng_), out);
        std::copy(p.begin(), p.end(), prior.begin());
      }
      DeviceBuffer xd = typed_buffer(x, in), dd = typed_buffer(dl, in), bd = to_device(base);
      DeviceBuffer yd = typed_buffer(prior, out);
      run_step(dyn_conv_step(d->ctx, make_loc(xd, ir::Rows::kTokens, k.width, in, "x"),
                             make_loc(dd, ir::Rows::kTokens, dw, in, "deltas"), bd.as<float>(),
                             make_loc(yd, ir::Rows::kTokens, k.width, out, "y"), k.stage, k.taps, k.group, k.accumulate));
      std::vector<double> want(size_t{tokens} * k.width);
      for (uint32_t s = 0; s < batch_.seqs(); ++s) {
        for (uint32_t t = 0; t < batch_.seq_len(s); ++t) {
          const size_t row = batch_.cu[s] + t;
          for (uint32_t c = 0; c < k.width; ++c) {
            double y = 0.0;
            for (uint32_t tau = 0; tau < k.taps && tau <= t; ++tau) {
              const size_t kk = size_t{k.stage} * k.taps + tau;
              y += (double{base[kk * k.width + c]} + dl[row * dw + kk * groups + c / k.group]) *
                   x[(row - tau) * k.width + c];
            }
            want[row * k.width + c] = (k.accumulate ? prior[row * k.width + c] : 0.0) + y;
          }
        }
      }
      expect_rows(read_floats(yd, size_t{n} * k.width, out), want, tokens, k.width, 4e-6 + storage_tolerance(out),
                  variant("dyn_conv", in, out) + fmt::format(" width {} taps {} group {} stage {}{}", k.width, k.taps,
                                                             k.group, k.stage, k.accumulate ? " accumulate" : ""));
    }
  }
}

TEST_F(DrafterOpsTest, DynConvLauncherRefusesMismatchedOperands) {
  const auto d = device_batch(batch_, kBucket);
  DeviceBuffer a = sentinel_buffer(kBucket.tokens, 64, Dt::kF32), b = sentinel_buffer(kBucket.tokens, 64, Dt::kF32);
  DeviceBuffer base = to_device(std::vector<float>(256, 0.0f));
  const Loc x = make_loc(a, ir::Rows::kTokens, 64, Dt::kF32, "x");
  const Loc y = make_loc(b, ir::Rows::kTokens, 64, Dt::kF32, "y");
  const Loc deltas = make_loc(b, ir::Rows::kTokens, 15, Dt::kF16, "deltas");
  auto st = dyn_conv_step(d->ctx, x, deltas, base.as<float>(), y, 0, 2, 16, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "dyn_conv: 'x' (tokens × 64 f32) with deltas 'deltas' (tokens × 15 f16) into 'y' "
                                  "(tokens × 64 f32): stage 0 of 2 taps, groups of 16 (distinct token rows, deltas "
                                  "2·taps·width/group wide)");
}

std::unique_ptr<ir::Backend> cuda_backend(ir::Precision precision) {
  CudaOptions o;
  o.precision = precision;
  auto b = make_cuda_backend(o);
  EXPECT_TRUE(b.ok()) << b.error().message();
  return b.ok() ? std::move(b).value() : nullptr;
}

struct Lowered {
  std::unique_ptr<ir::Weights> weights;
  std::unique_ptr<ir::Plan> plan;
};

Lowered lower_on(ir::Backend& backend, const WeightSource& source, const ir::Graph& g, ir::Bucket bucket) {
  Lowered l;
  const ir::Graph* graphs[] = {&g};
  auto w = backend.upload(source, graphs);
  EXPECT_TRUE(w.ok()) << w.error().message();
  if (!w.ok()) return l;
  l.weights = std::move(w).value();
  auto p = backend.lower(*l.weights, g, bucket);
  EXPECT_TRUE(p.ok()) << p.error().message();
  if (p.ok()) l.plan = std::move(p).value();
  return l;
}

// A plan leaves tap rows on the device (Embed, Tap into a joined row, Placement::kDevice); a second plan's
// Input reads them there, gathered out of order, and must give exactly the fetched rows: on the CUDA
// backend device to device, on the CPU backend through fetch(), and from the same rows given as host
// features. A CPU-held source is refused by the CUDA plan with the reason.
TEST_F(DrafterOpsTest, InputFromDeviceRowsAndHostRowsMatchesTheCpuBackend) {
  const uint32_t vocab = 50, width = 48;
  io::HostTensors source;
  source.add(io::HostTensor::from_f32("table", {vocab, width}, random_floats(size_t{vocab} * width, rng_, 2.0f)));
  ir::Graph producer;
  const ir::Val x = producer.add_val(ir::Rows::kTokens, width, "x");
  producer.add_op(ir::Embed{producer.add_weight({"table"}, {vocab, width}), x});
  const ir::Val joined = producer.add_val(ir::Rows::kTokens, width, "taps");
  producer.add_op(ir::Tap{x, joined, 0});
  producer.add_output("taps", joined, ir::Placement::kDevice);
  ir::Graph consumer;
  consumer.feature_width = width;
  const ir::Val in = consumer.add_val(ir::Rows::kTokens, width, "in");
  consumer.add_op(ir::Input{in});
  consumer.add_output("in", in);
  ASSERT_TRUE(ir::validate(producer).ok());
  ASSERT_TRUE(ir::validate(consumer).ok());

  ir::Batch made;  // the producer's run: 3 sequences of 20 tokens
  for (uint32_t s = 0; s < 3; ++s) {
    std::vector<uint32_t> ids(20);
    for (auto& id : ids) id = static_cast<uint32_t>(rng_() % vocab);
    made.add_sequence(ids, {}, 0);
  }
  ir::Batch read;  // the consumer's: 2 sequences, rows picked from anywhere in the producer's output
  read.add_sequence(std::vector<uint32_t>(7, 0), {}, 0);
  read.add_sequence(std::vector<uint32_t>(11, 0), {}, 0);
  for (uint32_t r = 0; r < read.tokens(); ++r) read.feature_rows.push_back((179 - 7 * r) % 60);
  const ir::Bucket bucket{64, 4, 4};

  auto cpu = cpu::make_cpu_backend(1);
  for (ir::Precision p : {ir::Precision::kF32, ir::Precision::kBF16}) {
    SCOPED_TRACE(ir::to_string(p));
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    Lowered prod = lower_on(*cuda, source, producer, bucket);
    Lowered cons = lower_on(*cuda, source, consumer, bucket);
    Lowered cpu_cons = lower_on(*cpu, source, consumer, bucket);
    ASSERT_TRUE(prod.plan && cons.plan && cpu_cons.plan);
    ir::Outputs produced;
    ASSERT_TRUE(cuda->run(*prod.plan, made, nullptr, produced).ok());
    const ir::DeviceRows taps = produced.values[0].device;
    ASSERT_EQ(taps.rows, 60u);
    EXPECT_EQ(taps.storage, p == ir::Precision::kF32 ? ir::Storage::kF32 : ir::Storage::kBF16);
    ir::Tensor2 all;
    ASSERT_TRUE(cuda->fetch(taps, 0, taps.rows, all).ok());
    std::vector<float> want;
    for (uint32_t r : read.feature_rows) {
      want.insert(want.end(), all.data.begin() + ptrdiff_t{r} * width, all.data.begin() + ptrdiff_t{r + 1} * width);
    }

    read.feature_source = taps;
    ir::Outputs on_device, on_cpu, from_host;
    auto st = cuda->run(*cons.plan, read, nullptr, on_device);
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_EQ(on_device.values[0].data, want) << "CUDA Input from the device rows";
    st = cpu->run(*cpu_cons.plan, read, nullptr, on_cpu);
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_EQ(on_cpu.values[0].data, want) << "CPU Input from fetched CUDA rows";

    ir::Batch host = read;
    host.feature_source = {};
    host.feature_rows.clear();
    host.features = want;
    st = cuda->run(*cons.plan, host, nullptr, from_host);
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_EQ(from_host.values[0].data, want) << "CUDA Input from host rows";

    ir::Batch foreign = read;
    foreign.feature_source.owner = cpu.get();
    st = cuda->run(*cons.plan, foreign, nullptr, from_host);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(), "the batch's feature rows are held by another backend: fetch them to the host first");
  }
  // The CPU backend reads rows it holds itself in place.
  Lowered cpu_prod = lower_on(*cpu, source, producer, bucket);
  ir::Outputs produced, got;
  ASSERT_TRUE(cpu->run(*cpu_prod.plan, made, nullptr, produced).ok());
  Lowered cpu_cons = lower_on(*cpu, source, consumer, bucket);
  read.feature_source = produced.values[0].device;
  ASSERT_TRUE(cpu->run(*cpu_cons.plan, read, nullptr, got).ok());
  std::vector<float> want;
  const auto* base = static_cast<const float*>(read.feature_source.data);
  for (uint32_t r : read.feature_rows) want.insert(want.end(), base + size_t{r} * width, base + size_t{r + 1} * width);
  EXPECT_EQ(got.values[0].data, want);
}

// A v2 sublayer's shape: u = RmsNorm(x), d = W·u, z = conv_0(u), x += conv_1(z) over 3 sequences, on
// CUDA plans against the CPU backend (f32 within 1e-5, 16-bit within the rounding of u, d and z).
TEST_F(DrafterOpsTest, DynConvInAPlanMatchesTheCpuBackend) {
  const uint32_t vocab = 30, width = 64, taps = 2, group = 16, groups = width / group;
  io::HostTensors source;
  source.add(io::HostTensor::from_f32("table", {vocab, width}, random_floats(size_t{vocab} * width, rng_)));
  source.add(io::HostTensor::from_f32("norm", {width}, random_floats(width, rng_)));
  source.add(io::HostTensor::from_f32("proj", {2 * taps * groups, width},
                                      random_floats(size_t{2} * taps * groups * width, rng_, 0.1f)));
  source.add(io::HostTensor::from_f32("base", {2, taps, width}, random_floats(size_t{2} * taps * width, rng_)));
  ir::Graph g;
  const ir::Val x = g.add_val(ir::Rows::kTokens, width, "x");
  g.add_op(ir::Embed{g.add_weight({"table"}, {vocab, width}), x});
  const ir::Val u = g.add_val(ir::Rows::kTokens, width, "u");
  g.add_op(ir::RmsNorm{x, g.add_weight({"norm"}, {width}), 1e-6f, u});
  const ir::Val d = g.add_val(ir::Rows::kTokens, 2 * taps * groups, "deltas");
  g.add_op(ir::Gemm{u, g.add_weight({"proj"}, {2 * taps * groups, width}), std::nullopt, ir::Epilogue::kNone, d});
  const ir::WeightId base = g.add_weight({"base"}, {2, taps, width});
  const ir::Val z = g.add_val(ir::Rows::kTokens, width, "z");
  g.add_op(ir::DynConv{u, d, base, 0, taps, group, ir::Epilogue::kNone, z});
  g.add_op(ir::DynConv{z, d, base, 1, taps, group, ir::Epilogue::kAccumulate, x});
  g.add_output("x", x);
  ASSERT_TRUE(ir::validate(g).ok());
  ir::Batch batch;
  for (uint32_t len : {5u, 1u, 17u}) {
    std::vector<uint32_t> ids(len);
    for (auto& id : ids) id = static_cast<uint32_t>(rng_() % vocab);
    batch.add_sequence(ids, {}, 0);
  }
  const ir::Bucket bucket{32, 4, 4};
  auto cpu = cpu::make_cpu_backend(1);
  Lowered ref = lower_on(*cpu, source, g, bucket);
  ir::Outputs want;
  ASSERT_TRUE(cpu->run(*ref.plan, batch, nullptr, want).ok());
  for (const auto& [p, tol] : {std::pair{ir::Precision::kF32, 1e-5}, std::pair{ir::Precision::kF16, 5e-3},
                               std::pair{ir::Precision::kBF16, 4e-2}}) {
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    Lowered l = lower_on(*cuda, source, g, bucket);
    ASSERT_TRUE(l.plan);
    ir::Outputs got;
    auto st = cuda->run(*l.plan, batch, nullptr, got);
    ASSERT_TRUE(st.ok()) << st.error().message();
    ASSERT_EQ(got.values[0].data.size(), want.values[0].data.size());
    double worst = 0.0;
    for (size_t i = 0; i < want.values[0].data.size(); ++i) {
      const double w = want.values[0].data[i];
      const double err = std::fabs(got.values[0].data[i] - w) / (1.0 + std::fabs(w));
      worst = std::max(worst, err);
      ASSERT_LE(err, tol) << ir::to_string(p) << " row " << i / width << " column " << i % width << ": "
                          << got.values[0].data[i] << " vs " << w;
    }
    std::cerr << "dyn_conv plan at " << ir::to_string(p) << ": worst relative error " << worst << "\n";
  }
}

}  // namespace
}  // namespace tandem::cuda::test
