// Host-side pieces of the CUDA backend that need no GPU (label unit): a binary linked with the real
// backend starts and reports "no device" cleanly on a machine without one; the index buffer's layout
// and contents (tiles anchored at sequence starts, with their spans); the FP16 precision pass on the
// compat graph; the GEMM row tiers.
#include <gtest/gtest.h>

#include <variant>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/index_impl.h"
#include "engine/cuda/plan_impl.h"
#include "engine/cuda/types_impl.h"
#include "engine/models/decision/decision_model.h"
#include "kernels/args.cuh"
#include "tests/engine/models/decision/decision_test_util.h"

namespace tandem::cuda {
namespace {

TEST(CudaHost, NoDeviceIsAnUnavailableErrorNotACrash) {
  if (device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto b = make_cuda_backend(CudaOptions{});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUnavailable);
  EXPECT_NE(b.error().message().find("no CUDA device"), std::string::npos) << b.error().message();
}

TEST(CudaHost, IndexBufferHoldsTheBatchTablesAndAnchoredTiles) {
  ir::Batch b;
  b.add_sequence(std::vector<uint32_t>(70, 5), {0, 65}, 2);  // two tiles: rows 0 and 64
  b.add_sequence({}, {}, 0);                                 // empty: no tile
  b.add_sequence({7, 8, 9}, {1}, 1);                         // one tile at row 70
  const ir::Bucket bucket{128, 4, 8};
  const IndexLayout l = IndexLayout::for_bucket(bucket);
  EXPECT_EQ(l.tiles_max, 2u + 4u);
  EXPECT_EQ(l.ids, kernels::kHeaderWords);
  EXPECT_EQ(l.spans % 4, 0u) << "spans are read as 16-byte vectors";
  EXPECT_GE(l.spans, l.tiles + l.tiles_max);
  EXPECT_EQ(l.words, l.spans + 4 * l.tiles_max);
  std::vector<uint32_t> w(l.words, 0xffffffffu);
  fill_index(l, b, w.data());
  EXPECT_EQ(w[0], 73u);
  EXPECT_EQ(w[1], 3u);
  EXPECT_EQ(w[2], 3u);
  EXPECT_EQ(w[kernels::kHeaderTiles], 3u);
  EXPECT_EQ(w[l.tiles], 0u);
  EXPECT_EQ(w[l.tiles + 1], 64u);
  EXPECT_EQ(w[l.tiles + 2], 70u);
  // Each tile's span: first row, its sequence's start and end, the start's position.
  const std::vector<uint32_t> spans(w.begin() + static_cast<long>(l.spans), w.begin() + static_cast<long>(l.spans + 12));
  EXPECT_EQ(spans, (std::vector<uint32_t>{0, 0, 70, 0, 64, 0, 70, 0, 70, 70, 73, 0}));
  EXPECT_EQ(w[l.pos + 69], 69u);
  EXPECT_EQ(w[l.pos + 70], 0u);
  EXPECT_EQ(w[l.pos + 72], 2u);
  EXPECT_EQ(w[l.seq + 69], 0u);
  EXPECT_EQ(w[l.seq + 71], 2u);
  EXPECT_EQ(w[l.ids + 71], 8u);
  const std::vector<uint32_t> cu(w.begin() + static_cast<long>(l.cu), w.begin() + static_cast<long>(l.cu + 4));
  EXPECT_EQ(cu, (std::vector<uint32_t>{0, 70, 70, 73}));
  const std::vector<uint32_t> mcu(w.begin() + static_cast<long>(l.mcu), w.begin() + static_cast<long>(l.mcu + 4));
  EXPECT_EQ(mcu, (std::vector<uint32_t>{0, 2, 2, 3}));
  EXPECT_EQ(w[l.mrow], 0u);
  EXPECT_EQ(w[l.mrow + 1], 65u);
  EXPECT_EQ(w[l.mrow + 2], 71u);
  EXPECT_EQ(w[l.qtype + 0], 2u);
  EXPECT_EQ(w[l.qtype + 2], 1u);
  EXPECT_EQ(w[l.ids + 73], 0xffffffffu) << "words past the batch are left alone";
}

TEST(CudaHost, GemmRowTiersCoverTheBucketInEighths) {
  EXPECT_EQ(gemm_tiers(8192, 1024), (std::vector<uint32_t>{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}));
  EXPECT_EQ(gemm_tiers(1024, 1024), (std::vector<uint32_t>{128, 256, 384, 512, 640, 768, 896, 1024}));
  EXPECT_EQ(gemm_tiers(2000, 1024), (std::vector<uint32_t>{256, 512, 768, 1024, 1280, 1536, 1792, 2000}));
  EXPECT_EQ(gemm_tiers(512, 1024), (std::vector<uint32_t>{512}));    // below the minimum: one tier
  EXPECT_EQ(gemm_tiers(16384, 0), (std::vector<uint32_t>{16384}));  // tiers off
  EXPECT_EQ(gemm_tiers(300, 64), (std::vector<uint32_t>{64, 128, 192, 256, 300}));
  EXPECT_EQ(gemm_tiers(64, 64), (std::vector<uint32_t>{64}));
}

TEST(CudaHost, Fp16PassKeepsTheResidualQkvAndOutputsInFp32) {
  namespace dt = models::decision::testing;
  const dt::TinyShape shape;
  auto model = models::decision::DecisionModel::from_parts(dt::to_source(dt::tiny_tensors(shape)),
                                                           dt::tiny_encoder(shape), dt::tiny_laya(shape));
  ASSERT_TRUE(model.ok()) << model.error().message();
  const ir::Graph& g = (*model)->graph();
  for (Dt t : value_types(g, ir::Precision::kF32)) EXPECT_EQ(t, Dt::kF32);
  const std::vector<Dt> ty = value_types(g, ir::Precision::kF16);
  // The residual stream: accumulate targets and the type embedding's target stay FP32 even when a
  // LayerNorm writes them (the embedding norm, the final norm).
  std::vector<bool> residual(g.vals.size(), false);
  for (const ir::Op& op : g.ops) {
    if (const auto* gm = std::get_if<ir::Gemm>(&op); gm != nullptr && gm->epilogue == ir::Epilogue::kAccumulate) {
      residual[gm->out.index] = true;
    }
    if (const auto* at = std::get_if<ir::AddType>(&op)) residual[at->h.index] = true;
  }
  size_t half = 0;
  for (const ir::Op& op : g.ops) {
    if (const auto* att = std::get_if<ir::Attention>(&op)) {
      EXPECT_EQ(ty[att->qkv.index], Dt::kF32) << g.info(att->qkv).name;
      EXPECT_EQ(ty[att->out.index], Dt::kF16) << g.info(att->out).name;
    }
    if (const auto* gm = std::get_if<ir::Gemm>(&op); gm != nullptr && gm->epilogue == ir::Epilogue::kAccumulate) {
      EXPECT_EQ(ty[gm->out.index], Dt::kF32) << g.info(gm->out).name;
    }
    if (const auto* ln = std::get_if<ir::LayerNorm>(&op)) {
      EXPECT_EQ(ty[ln->out.index], residual[ln->out.index] ? Dt::kF32 : Dt::kF16) << g.info(ln->out).name;
      half += !residual[ln->out.index];
    }
    if (const auto* gg = std::get_if<ir::GeGlu>(&op)) {
      EXPECT_EQ(ty[gg->out.index], Dt::kF16) << g.info(gg->out).name;
      EXPECT_EQ(ty[gg->x.index], Dt::kF16) << g.info(gg->x).name;  // Wi output: an FP16 GEMM of an FP16 input
    }
    if (const auto* em = std::get_if<ir::Embed>(&op)) {
      EXPECT_EQ(ty[em->out.index], Dt::kF32);
    }
    if (const auto* af = std::get_if<ir::ActFeatures>(&op)) {
      EXPECT_EQ(ty[af->out.index], Dt::kF32);
      EXPECT_EQ(ty[af->h.index], Dt::kF32);
    }
  }
  EXPECT_GT(half, 0u);
  for (const ir::Output& o : g.outputs) EXPECT_EQ(ty[o.val.index], Dt::kF32) << o.name;
}

}  // namespace
}  // namespace tandem::cuda
