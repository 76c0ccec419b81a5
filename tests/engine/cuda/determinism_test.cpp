// Determinism (scorer.md §3, §5): every question gets the same logits and act bits alone, inside random
// batches (any order and bucket), and alone again after unrelated work; FP32 and FP16; GEMM row tiers
// change no bits.
#include <cstdlib>
#include <cstring>

#include "engine/cuda/plan_impl.h"

#include "tests/engine/cuda/gpu_test_util.h"
#include "tests/engine/cuda/model_util.h"

namespace tandem::cuda::test {
namespace {

struct Answer {
  std::vector<float> logits;
  float act[2] = {0, 0};
};

bool same_bits(const Answer& a, const Answer& b) {
  return a.logits.size() == b.logits.size() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0 &&
         std::memcmp(a.act, b.act, sizeof(a.act)) == 0;
}

// The questions' answers from one run of `batch` (question s of the batch is questions[order[s]]).
std::vector<Answer> answers(const ir::Batch& batch, const Runner& r) {
  std::vector<Answer> out(batch.seqs());
  for (uint32_t s = 0; s < batch.seqs(); ++s) {
    out[s].logits.assign(r.logits().begin() + batch.pcu[s], r.logits().begin() + batch.pcu[s + 1]);
    out[s].act[0] = r.act()[2 * s];
    out[s].act[1] = r.act()[2 * s + 1];
  }
  return out;
}

ir::Batch batch_of(const std::vector<ir::Batch>& questions, const std::vector<size_t>& order) {
  ir::Batch b;
  for (size_t q : order) {
    const ir::Batch& one = questions[q];
    std::vector<uint32_t> ids(one.ids.begin(), one.ids.end()), marks(one.picks.begin(), one.picks.end());
    b.add_sequence(ids, marks, one.qtype[0]);
  }
  return b;
}

void check_precision(ir::Precision precision) {
  auto model = tiny_model(99);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto runner = cuda_runner(**model, precision);
  ASSERT_TRUE(runner.ok()) << runner.error().message();
  Runner& r = **runner;
  std::mt19937 rng(21);
  const size_t count = emulated() ? 10 : 64;
  std::vector<ir::Batch> questions(count);
  std::vector<Answer> alone(count);
  for (size_t q = 0; q < count; ++q) {
    add_question(questions[q], rng, (*model)->vocab(), 1 + static_cast<uint32_t>(rng() % 90),
                 static_cast<uint32_t>(rng() % 6));
    ASSERT_TRUE(r.run(questions[q]).ok());
    alone[q] = answers(questions[q], r)[0];
  }
  const size_t rounds = emulated() ? 3 : 20, max_batch = emulated() ? 8 : 32;
  size_t batches = 0;
  for (size_t round = 0; round < rounds; ++round) {
    std::vector<size_t> order(count);
    for (size_t q = 0; q < count; ++q) order[q] = q;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t at = 0; at < count;) {
      const size_t n = std::min(count - at, 1 + rng() % max_batch);
      const std::vector<size_t> part(order.begin() + static_cast<long>(at), order.begin() + static_cast<long>(at + n));
      const ir::Batch b = batch_of(questions, part);
      auto st = r.run(b);
      ASSERT_TRUE(st.ok()) << st.error().message();
      const std::vector<Answer> got = answers(b, r);
      for (size_t s = 0; s < part.size(); ++s) {
        ASSERT_TRUE(same_bits(got[s], alone[part[s]]))
            << ir::to_string(precision) << ": question " << part[s] << " at position " << s << " of a batch of "
            << part.size() << " (bucket " << ir::to_string(r.executor->bucket_for(b).value())
            << ") differs from its answer alone";
      }
      at += n;
      ++batches;
    }
  }
  // Unrelated work in the largest bucket the test can afford, then every question alone again.
  ir::Batch big = random_batch(rng, (*model)->vocab(), emulated() ? 16 : 200, 60, 5);
  ASSERT_TRUE(r.run(big).ok());
  for (size_t q = 0; q < count; ++q) {
    ASSERT_TRUE(r.run(questions[q]).ok());
    ASSERT_TRUE(same_bits(answers(questions[q], r)[0], alone[q])) << "question " << q << " alone after other work";
  }
  std::cout << ir::to_string(precision) << ": " << count << " questions bit-identical over " << batches
            << " batches\n";
}

// GEMM row tiers run a bucket's token GEMMs for fewer rows; every tier's algorithm computes the shape's
// reference bits, so the answers are the bits of the plan without tiers.
TEST(CudaDeterminism, Fp16GemmRowTiersChangeNoBits) {
  TANDEM_REQUIRE_GPU();
  if (std::getenv("TANDEM_CUDA_GEMM_TIERS") != nullptr) {
    GTEST_SKIP() << "TANDEM_CUDA_GEMM_TIERS overrides the tiers this test sets";
  }
  auto model = tiny_model(98);
  ASSERT_TRUE(model.ok()) << model.error().message();
  CudaOptions plain, tiered;
  plain.gemm_tiers = false;
  tiered.gemm_tier_min_tokens = 64;  // buckets from 64 tokens: 256 gets tiers 64, 128, 192, 256
  auto a = cuda_runner(**model, ir::Precision::kF16, plain);
  auto b = cuda_runner(**model, ir::Precision::kF16, tiered);
  ASSERT_TRUE(a.ok() && b.ok());
  auto plan = (*b)->backend->lower(*(*b)->weights, (*model)->graph(), ir::Bucket{256, 64, 256});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(dynamic_cast<const CudaPlan&>(**plan).tiers(), (std::vector<uint32_t>{64, 128, 192, 256}));
  std::mt19937 rng(5);
  const size_t rounds = emulated() ? 4 : 24;
  for (size_t r = 0; r < rounds; ++r) {
    // 1 to 6 questions of up to 60 tokens: buckets up to 256 tokens, every tier of them.
    const ir::Batch batch = random_batch(rng, (*model)->vocab(), 1 + static_cast<uint32_t>(rng() % 6), 60, 5);
    ASSERT_TRUE((*a)->run(batch).ok());
    ASSERT_TRUE((*b)->run(batch).ok());
    const std::vector<Answer> x = answers(batch, **a), y = answers(batch, **b);
    for (size_t s = 0; s < x.size(); ++s) {
      const std::string bucket = ir::to_string((*b)->executor->bucket_for(batch).value());
      ASSERT_TRUE(same_bits(x[s], y[s])) << "round " << r << " question " << s << " (" << batch.tokens()
                                         << " tokens, bucket " << bucket << ") differs with GEMM row tiers";
    }
  }
}

TEST(CudaDeterminism, Fp32AloneAndInRandomBatches) {
  TANDEM_REQUIRE_GPU();
  check_precision(ir::Precision::kF32);
}

TEST(CudaDeterminism, Fp16AloneAndInRandomBatches) {
  TANDEM_REQUIRE_GPU();
  check_precision(ir::Precision::kF16);
}

}  // namespace
}  // namespace tandem::cuda::test
