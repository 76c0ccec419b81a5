// The CPU backend's machinery: weight upload (dtype conversion, stacking, shape errors naming the
// tensor), lowering checks, run-time checks, and whole-graph bits for any thread count, SIMD level
// and batch composition.
#include <gtest/gtest.h>

#include "tests/engine/cpu/cpu_test_util.h"

namespace tandem::cpu::testing {
namespace {

std::string upload_error(const ir::Graph& g, const WeightSource& src) {
  auto backend = make_cpu_backend(1);
  const ir::Graph* graphs[] = {&g};
  auto w = backend->upload(src, graphs);
  return w.ok() ? "" : w.error().message();
}

TEST(CpuBackend, UploadConvertsHalfAndStacksParts) {
  // out = x · [gate; up]ᵀ with gate in f16 and up in f32: the stacked weight is exact.
  OpCase oc;
  oc.add_sequence(3);
  const std::vector<float> gate = random_values(2 * 4, 1), up = random_values(3 * 4, 2);
  oc.weights.add_f16("gate", {2, 4}, gate);
  oc.weights.add("up", {3, 4}, up);
  const ir::WeightId w = oc.graph.add_weight({"gate", "up"}, {5, 4});
  std::vector<float> x(3 * 4, 0.0f);
  for (uint32_t r = 0; r < 3; ++r) x[r * 4 + r] = 1.0f;  // rows of the identity pick columns of w
  const ir::Val in = oc.input("x", 4, x);
  const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, 5, "out");
  oc.graph.add_op(ir::Gemm{in, w, std::nullopt, ir::Epilogue::kNone, out});
  oc.graph.add_output("out", out);
  Runner runner(oc.graph, oc.weights, 1, best_isa());
  const ir::Outputs o = runner.run(oc.batch);
  for (uint32_t r = 0; r < 3; ++r) {
    for (uint32_t n = 0; n < 5; ++n) {
      const float want = n < 2 ? half_to_float(float_to_half(gate[n * 4 + r])) : up[(n - 2) * 4 + r];
      EXPECT_EQ(o.values.at(0).at(r, n), want) << r << "," << n;
    }
  }
}

TEST(CpuBackend, UploadNamesMissingAndMisshapedTensors) {
  ir::Graph g;
  MemorySource src;
  src.add("a", {4, 3}, std::vector<float>(12));
  src.add("b", {2, 5}, std::vector<float>(10));
  const ir::Val x = g.add_val(ir::Rows::kTokens, 3, "x");
  g.add_op(ir::Embed{g.add_weight({"a"}, {4, 3}), x});
  {
    ir::Graph missing = g;
    const ir::Val y = missing.add_val(ir::Rows::kTokens, 3, "y");
    missing.add_op(ir::LayerNorm{x, missing.add_weight({"nope"}, {3}), std::nullopt, 1e-5f, y});
    EXPECT_NE(upload_error(missing, src).find("nope"), std::string::npos) << upload_error(missing, src);
  }
  {
    ir::Graph bad = g;
    const ir::Val y = bad.add_val(ir::Rows::kTokens, 5, "y");
    bad.add_op(ir::Gemm{x, bad.add_weight({"b"}, {5, 3}), std::nullopt, ir::Epilogue::kNone, y});
    const std::string e = upload_error(bad, src);
    EXPECT_NE(e.find("tensor b is [2, 5], expected [5, 3]"), std::string::npos) << e;
  }
  {
    ir::Graph stacked = g;
    const ir::Val y = stacked.add_val(ir::Rows::kTokens, 3, "y");
    stacked.add_op(ir::Gemm{x, stacked.add_weight({"a", "b"}, {6, 3}), std::nullopt, ir::Epilogue::kNone, y});
    const std::string e = upload_error(stacked, src);
    EXPECT_NE(e.find("tensor b is [2, 5], which does not stack into a+b as [6, 3]"), std::string::npos) << e;
  }
  for (uint64_t want : {7u, 9u}) {  // a+a has 8 rows: one too many, one too few
    ir::Graph rows = g;
    const ir::Val y = rows.add_val(ir::Rows::kTokens, static_cast<uint32_t>(want), "y");
    rows.add_op(ir::Gemm{x, rows.add_weight({"a", "a"}, {want, 3}), std::nullopt, ir::Epilogue::kNone, y});
    const std::string e = upload_error(rows, src);
    const std::string expected = want == 7 ? "tensor a is [4, 3], which does not stack into a+a as [7, 3]"
                                           : "tensors a+a stack to 8 rows, expected 9 ([9, 3])";
    EXPECT_NE(e.find(expected), std::string::npos) << e;
  }
}

// A small scorer-shaped graph over every row kind: embed, norms, attention with rope, GEMMs with each
// epilogue, GeGLU, type embedding, markers and act features.
struct Chain {
  OpCase oc;
  Chain(const std::vector<uint32_t>& lengths, const std::vector<std::vector<uint32_t>>& markers, uint32_t seed) {
    const uint32_t d = 32, heads = 2, hd = 16, vocab = 50;
    std::mt19937 rng(seed);
    for (size_t s = 0; s < lengths.size(); ++s) {
      std::vector<uint32_t> ids(lengths[s]);
      for (uint32_t& id : ids) id = static_cast<uint32_t>(rng() % vocab);
      oc.batch.add_sequence(ids, markers[s], static_cast<uint8_t>(s % 3));
    }
    ir::Graph& g = oc.graph;
    const ir::Val h = g.add_val(ir::Rows::kTokens, d, "h");
    g.add_op(ir::Embed{oc.weight("emb", {vocab, d}, random_values(vocab * d, 1)), h});
    const ir::Val n = g.add_val(ir::Rows::kTokens, d, "n");
    g.add_op(ir::LayerNorm{h, oc.weight("ln", {d}, random_values(d, 2)), std::nullopt, 1e-5f, n});
    const ir::Val qkv = g.add_val(ir::Rows::kTokens, 3 * d, "qkv");
    g.add_op(ir::Gemm{n, oc.weight("wqkv", {3 * d, d}, random_values(3 * d * d, 3, 0.2f)), std::nullopt,
                      ir::Epilogue::kNone, qkv});
    g.add_op(ir::Rope{qkv, 0, 2 * heads, hd, 10000.0f});
    const ir::Val att = g.add_val(ir::Rows::kTokens, d, "att");
    g.add_op(ir::Attention{qkv, heads, hd, 3, att});
    g.add_op(ir::Gemm{att, oc.weight("wo", {d, d}, random_values(d * d, 4, 0.2f)), std::nullopt,
                      ir::Epilogue::kAccumulate, h});
    const ir::Val wi = g.add_val(ir::Rows::kTokens, 2 * 40, "wi");
    g.add_op(ir::Gemm{h, oc.weight("wi", {80, d}, random_values(80 * d, 5, 0.2f)),
                      oc.weight("bi", {80}, random_values(80, 6)), ir::Epilogue::kRelu, wi});
    const ir::Val gl = g.add_val(ir::Rows::kTokens, 40, "glu");
    g.add_op(ir::GeGlu{wi, gl});
    g.add_op(ir::Gemm{gl, oc.weight("wd", {d, 40}, random_values(40 * d, 7, 0.2f)), std::nullopt,
                      ir::Epilogue::kAccumulate, h});
    g.add_op(ir::AddType{h, oc.weight("types", {3, d}, random_values(3 * d, 8))});
    const ir::Val m = g.add_val(ir::Rows::kPicks, d, "m");
    g.add_op(ir::PickRows{h, m});
    const ir::Val logits = g.add_val(ir::Rows::kPicks, 1, "logits");
    g.add_op(ir::Gemm{m, oc.weight("ws", {1, d}, random_values(d, 9)), std::nullopt, ir::Epilogue::kGelu, logits});
    const ir::Val f = g.add_val(ir::Rows::kSeqs, d + 4, "f");
    g.add_op(ir::ActFeatures{h, logits, f});
    const ir::Val act = g.add_val(ir::Rows::kSeqs, 2, "act");
    g.add_op(ir::Gemm{f, oc.weight("wa", {2, d + 4}, random_values(2 * (d + 4), 10)), std::nullopt,
                      ir::Epilogue::kNone, act});
    g.add_output("logits", logits);
    g.add_output("act", act);
  }
};

TEST(CpuBackend, WholeGraphBitsForAnyThreadsSimdLevelAndNeighbours) {
  const std::vector<uint32_t> lengths = {9, 0, 1, 23, 4};
  const std::vector<std::vector<uint32_t>> markers = {{0, 4, 8}, {}, {0}, {1, 2, 22}, {}};
  Chain chain(lengths, markers, 5);
  Runner base(chain.oc.graph, chain.oc.weights, 1, Isa::kBase);
  const ir::Outputs want = base.run(chain.oc.batch);
  ASSERT_EQ(want.values.size(), 2u);
  EXPECT_EQ(want.values[0].rows, 7u);
  EXPECT_EQ(want.values[1].rows, 5u);
  for (Isa isa : supported_isas()) {
    for (size_t threads : {2, 4}) {
      Runner r(chain.oc.graph, chain.oc.weights, threads, isa);
      const ir::Outputs got = r.run(chain.oc.batch);
      ASSERT_EQ(got.values.size(), 2u);
      EXPECT_TRUE(same_bits(got.values[0].data, want.values[0].data)) << threads << " " << to_string(isa);
      EXPECT_TRUE(same_bits(got.values[1].data, want.values[1].data)) << threads << " " << to_string(isa);
    }
  }
  // The fourth sequence alone (same ids, same type) gives the same bits as inside the batch.
  Chain alone({23}, {{1, 2, 22}}, 5);
  alone.oc.batch.ids.assign(chain.oc.batch.ids.begin() + 10, chain.oc.batch.ids.begin() + 33);
  alone.oc.batch.qtype = {0};  // sequence 3 of the batch has type 3 % 3 = 0
  Runner r(alone.oc.graph, chain.oc.weights, 2, best_isa());
  const ir::Outputs one = r.run(alone.oc.batch);
  ASSERT_EQ(one.values.size(), 2u);
  EXPECT_TRUE(same_bits(one.values[0].data, std::vector<float>(want.values[0].data.begin() + 4,
                                                               want.values[0].data.begin() + 7)));
  EXPECT_TRUE(same_bits(one.values[1].data, std::vector<float>(want.values[1].data.begin() + 6,
                                                               want.values[1].data.begin() + 8)));
}

TEST(CpuBackend, LowerAndRunRejectWhatTheyCannotRun) {
  Chain chain({4}, {{1}}, 3);
  auto backend = make_cpu_backend(2);
  const ir::Graph* graphs[] = {&chain.oc.graph};
  auto weights = backend->upload(chain.oc.weights, graphs);
  ASSERT_TRUE(weights.ok());
  auto plan = backend->lower(**weights, chain.oc.graph, ir::Bucket{4, 1, 1});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)->bucket(), (ir::Bucket{4, 1, 1}));

  ir::Outputs out;
  ir::Batch big = chain.oc.batch;
  big.add_sequence({1}, {0}, 0);
  const Status too_big = backend->run(**plan, big, nullptr, out);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().kind(), ErrorKind::kCapacity);
  EXPECT_NE(too_big.error().message().find("5 tokens, 2 sequences and 2 markers does not fit bucket 4/1/1"),
            std::string::npos)
      << too_big.error().message();

  ir::Batch with_features = chain.oc.batch;
  with_features.features = {1.0f};
  const Status features = backend->run(**plan, with_features, nullptr, out);
  ASSERT_FALSE(features.ok());
  EXPECT_NE(features.error().message().find("features has 1 values, the graph reads 0"), std::string::npos);

  // A GEMM that accumulates into its own input is refused at lowering.
  ir::Graph aliased = chain.oc.graph;
  const ir::Val v = aliased.add_val(ir::Rows::kTokens, 2, "v");
  aliased.add_op(ir::Gemm{v, aliased.add_weight({"square"}, {2, 2}), std::nullopt, ir::Epilogue::kAccumulate, v});
  auto bad = backend->lower(**weights, aliased, ir::Bucket{4, 1, 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("reads its output"), std::string::npos) << bad.error().message();

  // A graph that fails ir::validate is refused with validate's message.
  ir::Graph invalid = chain.oc.graph;
  invalid.add_op(ir::GeGlu{invalid.add_val(ir::Rows::kTokens, 3, "odd"), invalid.add_val(ir::Rows::kTokens, 2, "o")});
  auto inv = backend->lower(**weights, invalid, ir::Bucket{4, 1, 1});
  ASSERT_FALSE(inv.ok());
  EXPECT_NE(inv.error().message().find("geglu input 'odd' is 3 wide, expected 4"), std::string::npos)
      << inv.error().message();
}

TEST(CpuBackend, CachesNeedAMatchingStateAndRowsInsideIt) {
  OpCase oc;
  oc.graph.add_cache("c", 4);
  oc.add_sequence(3);
  oc.batch.start = {0};
  oc.batch.slot = {1};
  const ir::Val k = oc.input("k", 4, random_values(12, 1));
  oc.graph.add_op(ir::CacheAppend{k, k, 0, 0, 0});
  const ir::Val out = oc.graph.add_val(ir::Rows::kTokens, 4, "out");
  oc.graph.add_op(ir::CacheAttention{k, 0, 1, 1, 4, true, std::nullopt, out, 0});
  oc.graph.add_output("out", out);
  auto backend = make_cpu_backend(1);
  const ir::Graph* graphs[] = {&oc.graph};
  auto weights = backend->upload(oc.weights, graphs);
  ASSERT_TRUE(weights.ok());
  auto plan = backend->lower(**weights, oc.graph, ir::Bucket{8, 2, 0});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  ir::Outputs o;
  const Status no_state = backend->run(**plan, oc.batch, nullptr, o);
  ASSERT_FALSE(no_state.ok());
  EXPECT_NE(no_state.error().message().find("has caches"), std::string::npos);

  auto small = backend->create_state(oc.graph, 1, 8);  // slot 1 does not exist
  ASSERT_TRUE(small.ok());
  const Status outside = backend->run(**plan, oc.batch, small->get(), o);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message().find("sequence 0 (slot 1, positions 0..3) is outside the cache (1 slots of 8"),
            std::string::npos)
      << outside.error().message();

  ir::Graph other;
  other.add_cache("c", 8);
  auto wrong = backend->create_state(other, 2, 8);
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(backend->run(**plan, oc.batch, wrong->get(), o).ok());

  auto state = backend->create_state(oc.graph, 2, 8);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->bytes(), size_t{2} * 2 * 8 * 4 * sizeof(float));
  EXPECT_TRUE(backend->run(**plan, oc.batch, state->get(), o).ok());
  EXPECT_EQ(o.values.at(0).rows, 3u);
}

}  // namespace
}  // namespace tandem::cpu::testing

namespace tandem::cpu::testing {
namespace {

// Row buffers (engine/ir/row_buffer.h): rows the caller keeps in the backend's "device" (host memory),
// copied from device rows of the backend at a stride or written from the host, read back through view()
// as rows of the backend; a copy of rows of another width, storage or backend, or past either end, and a
// write of part of a row, are refused naming the numbers.
TEST(CpuBackend, RowBuffersKeepCopiedAndWrittenRows) {
  auto backend = make_cpu_backend(1);
  auto other = make_cpu_backend(1);
  auto buffer = make_cpu_row_buffer(*backend, 3, 2, ir::Storage::kF32);
  ASSERT_TRUE(buffer.ok()) << buffer.error().message();
  ir::RowBuffer& b = **buffer;
  const std::vector<float> output = {1, 2, -1, 3, 4, -1, 5, 6, -1};  // 3 rows of 2, stride 3
  const ir::DeviceRows rows{output.data(), 3, 2, 3, ir::Storage::kF32, backend.get()};
  ASSERT_TRUE(b.copy(rows, 1, 2, 0).ok());
  const std::vector<float> host = {7, 8};
  ASSERT_TRUE(b.write(2, std::span<const float>(host)).ok());
  const ir::DeviceRows v = b.view();
  EXPECT_EQ(v.owner, backend.get());
  EXPECT_EQ(v.rows, 3u);
  EXPECT_EQ(v.stride, 2u);
  const auto* kept = static_cast<const float*>(v.data);
  EXPECT_EQ(std::vector<float>(kept, kept + 6), (std::vector<float>{3, 4, 5, 6, 7, 8}));

  ir::DeviceRows elsewhere = rows;
  elsewhere.owner = other.get();
  EXPECT_EQ(b.copy(elsewhere, 0, 1, 0).error().message(),
            "copying 1 rows of 2 f32 into a row buffer of 2 f32 held by another backend");
  EXPECT_EQ(b.copy(rows, 2, 2, 0).error().message(), "copying rows 2..4 of 3 into rows 0..2 of a row buffer of 3");
  EXPECT_EQ(b.write(2, std::span<const float>(output).first(4)).error().message(),
            "writing rows 2..4 of a row buffer of 3");
  EXPECT_EQ(b.write(0, std::span<const float>(output).first(3)).error().message(),
            "writing 3 f32 values into a row buffer of 3 rows of 2 f32");
  const std::vector<uint32_t> ids = {1, 2};
  EXPECT_EQ(b.write(0, std::span<const uint32_t>(ids)).error().message(),
            "writing 2 u32 values into a row buffer of 3 rows of 2 f32");
  EXPECT_EQ(make_cpu_row_buffer(*backend, 1, 1, ir::Storage::kBF16).error().message(),
            "a cpu row buffer of bf16 rows: the cpu backend keeps f32 and u32 rows");
}

}  // namespace
}  // namespace tandem::cpu::testing
