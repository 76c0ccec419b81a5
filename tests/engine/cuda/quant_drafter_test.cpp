// Quantized DFlash drafters on CUDA plans (issue 14): after settling each fixture case's context taps, the
// block logits (and v2's selector rows) of int8 / int4 drafters (quantized at load, and the v1-int4
// checkpoint as stored) against the CPU backend running the same codes; and the device holds the codes
// and scales, not a float copy: the drafter's device bytes are the float drafter's less exactly what
// quantizing its GEMM matrices saves.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/weights_impl.h"
#include "engine/io/safetensors.h"
#include "engine/models/dflash/dflash_model.h"
#include "tests/engine/cuda/drafter_case.h"
#include "tests/engine/cuda/gpu_test_util.h"

namespace tandem::cuda::test {
namespace {

using json = nlohmann::json;
using models::dflash::BlockOut;
using models::dflash::Drafter;
using models::dflash::DrafterOptions;
using models::dflash::Quantization;

const std::string kRoot = TANDEM_SOURCE_DIR;

// Both backends run the same codes and scales in FP32: an FP32 plan differs from the CPU only in the
// order of its f32 sums (1e-4 of max(1, |cpu|), as for float drafters). A BF16 plan rounds activations
// to 8 bits: 5e-2 of the row's largest |logit|, the float drafters' BF16 bound (drafter_test.cpp).
double tolerance(ir::Precision p) { return p == ir::Precision::kF32 ? 1e-4 : 5e-2; }

std::unique_ptr<ir::Backend> cuda_backend(ir::Precision precision, bool packed_codes = false,
                                          uint32_t whole_k_rows = 0) {
  CudaOptions o;
  o.precision = precision;
  o.qgemm_packed = packed_codes;
  o.qgemm_whole_k_rows = whole_k_rows;
  auto b = make_cuda_backend(o);
  EXPECT_TRUE(b.ok()) << b.error().message();
  return b.ok() ? std::move(b).value() : nullptr;
}

struct Drafted {
  BlockOut out;
  bool ok = false;
  size_t packed_codes = 0;  // CUDA: the code tensors uploaded in the tensor-core layout
};

Drafted settle_and_draft(ir::Backend& backend, const std::string& dir, const std::string& target_dir, const json& c,
                         std::optional<Quantization> q) {
  DraftedCase run = test::settle_and_draft(backend, dir, target_dir, c, CaseDraft{{}, q});
  Drafted d;
  if (!run.ok) return d;
  d.out = std::move(run.out);
  d.ok = true;
  if (const auto* w = dynamic_cast<const CudaWeights*>(&run.drafter->weights())) d.packed_codes = w->packed_codes();
  return d;
}

struct Variant {
  std::string dir;                   // under tests/fixtures/dflash
  std::optional<Quantization> q;     // nullopt: the checkpoint as stored
  std::string name;
};

TEST(CudaQuantDrafter, BlockLogitsAndSelectorRowsMatchTheCpuBackendsQuantizedDrafter) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  auto cpu = cpu::make_cpu_backend(2);
  // The emulator runs FP32 plans (the kernels' logic); the GPU runs BF16 too.
  const std::vector<ir::Precision> precisions =
      emulated() ? std::vector<ir::Precision>{ir::Precision::kF32}
                 : std::vector<ir::Precision>{ir::Precision::kF32, ir::Precision::kBF16};
  for (ir::Precision p : precisions) {
    auto cuda = cuda_backend(p);
    ASSERT_NE(cuda, nullptr);
    for (const json& m : ref["drafters"]) {
      const std::string base = m["dir"].get<std::string>();
      std::vector<Variant> variants = {{base, Quantization::kInt8, base + " int8"},
                                       {base, Quantization::kInt4, base + " int4"}};
      if (m["version"].get<uint32_t>() == 1) {
        variants.push_back({"tests/fixtures/dflash/v1-int4", std::nullopt, "v1-int4 checkpoint"});
      }
      for (const Variant& v : variants) {
        double worst_logits = 0.0, worst_selector = 0.0;
        for (size_t ci = 0; ci < m["cases"].size(); ++ci) {
          const json& c = m["cases"][ci];
          const std::string what = fmt::format("{} case {} at {}", v.name, ci, ir::to_string(p));
          const std::string dir = kRoot + "/" + v.dir;
          const Drafted want = settle_and_draft(*cpu, dir, target_dir, c, v.q);
          const Drafted got = settle_and_draft(*cuda, dir, target_dir, c, v.q);
          ASSERT_TRUE(want.ok && got.ok) << what;
          const bool by_row = p != ir::Precision::kF32;
          worst_logits = std::max(worst_logits, compare_block_rows(got.out.logits, want.out.logits, tolerance(p),
                                                                   by_row, what + " logits"));
          if (m["version"].get<uint32_t>() == 2) {
            worst_selector =
                std::max(worst_selector, compare_block_rows(got.out.selector, want.out.selector, tolerance(p), by_row,
                                                            what + " selector rows"));
          }
        }
        std::cerr << v.name << " at " << ir::to_string(p) << ": worst logits error " << worst_logits
                  << ", selector " << worst_selector << "\n";
      }
    }
  }
}

// TANDEM_CUDA_QGEMM_PACKED's path (CudaOptions::qgemm_packed): the codes go up in the tensor-core layout and
// the block logits and selector rows still match the CPU backend's quantized drafter, at the bounds above.
TEST(CudaQuantDrafter, CodesInTheTensorCoreLayoutMatchTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  auto cpu = cpu::make_cpu_backend(2);
  const ir::Precision p = emulated() ? ir::Precision::kF32 : ir::Precision::kBF16;
  auto cuda = cuda_backend(p, true);
  ASSERT_NE(cuda, nullptr);
  for (const json& m : ref["drafters"]) {
    const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
    for (Quantization q : {Quantization::kInt8, Quantization::kInt4}) {
      const json& c = m["cases"][0];
      const std::string what = fmt::format("{} {} packed at {}", m["dir"].get<std::string>(),
                                           models::dflash::to_string(q), ir::to_string(p));
      const Drafted want = settle_and_draft(*cpu, dir, target_dir, c, q);
      const Drafted got = settle_and_draft(*cuda, dir, target_dir, c, q);
      ASSERT_TRUE(want.ok && got.ok) << what;
      EXPECT_GT(got.packed_codes, 0u) << what << ": no code tensor went up packed";
      const bool by_row = p != ir::Precision::kF32;
      compare_block_rows(got.out.logits, want.out.logits, tolerance(p), by_row, what + " logits");
      if (m["version"].get<uint32_t>() == 2) {
        compare_block_rows(got.out.selector, want.out.selector, tolerance(p), by_row, what + " selector rows");
      }
    }
  }
}

// Every shipped fixture drafter's first case at int8 and int4 drafts exactly the same logits and selector rows on
// `got` as on `want` (backends that differ in how they run the codes, not in what they compute).
void expect_same_drafts(const json& ref, ir::Backend& got_backend, ir::Backend& want_backend, ir::Precision p) {
  const std::string target_dir = kRoot + "/" + ref["target"].get<std::string>();
  for (const json& m : ref["drafters"]) {
    const std::string dir = kRoot + "/" + m["dir"].get<std::string>();
    for (Quantization q : {Quantization::kInt8, Quantization::kInt4}) {
      const json& c = m["cases"][0];
      const std::string what = fmt::format("{} {} at {}", m["dir"].get<std::string>(), models::dflash::to_string(q),
                                           ir::to_string(p));
      const Drafted want = settle_and_draft(want_backend, dir, target_dir, c, q);
      const Drafted got = settle_and_draft(got_backend, dir, target_dir, c, q);
      ASSERT_TRUE(want.ok && got.ok) << what;
      EXPECT_GT(got.packed_codes, 0u) << what;
      ASSERT_EQ(got.out.logits.data.size(), want.out.logits.data.size()) << what;
      for (size_t i = 0; i < want.out.logits.data.size(); ++i) {
        ASSERT_EQ(got.out.logits.data[i], want.out.logits.data[i]) << what << ": logit " << i;
      }
      ASSERT_EQ(got.out.selector.data, want.out.selector.data) << what << ": selector rows";
    }
  }
}

// CudaOptions::qgemm_whole_k_rows (TANDEM_CUDA_QGEMM_WHOLE_K_ROWS): buckets of at least that many rows run
// the tensor-core kernel's whole-K mapping, and the drafts are the sliced mapping's bit for bit.
TEST(CudaQuantDrafter, TheWholeKMappingDraftsTheSameBits) {
  TANDEM_REQUIRE_GPU();
  const json ref = load_dflash_reference(kRoot);
  ASSERT_TRUE(ref.is_object() && ref.contains("drafters"));
  const ir::Precision p = emulated() ? ir::Precision::kF32 : ir::Precision::kBF16;
  auto sliced = cuda_backend(p, true);
  auto whole_k = cuda_backend(p, true, 1);
  ASSERT_NE(sliced, nullptr);
  ASSERT_NE(whole_k, nullptr);
  expect_same_drafts(ref, *whole_k, *sliced, p);
}

// What quantizing saves on the device: every GEMM module (fc, *_proj, the v2 kernel and selector
// projections) of [n, k] held as 16-bit (BF16 plan) becomes n·k·bits/8 code bytes and n·k/64 F16 scales. k_proj
// and v_proj are held twice: in the block layers' stacked q/k/v and apart for the settle graph (DrafterSetup::
// fuse_qkv), as codes and scales as well as in float.
TEST(CudaQuantDrafter, DeviceHoldsTheCodesAndScalesNotAFloatCopy) {
  TANDEM_REQUIRE_GPU();
  const std::string target_dir = kRoot + "/tests/fixtures/qwen3/tiny";
  auto cuda = cuda_backend(ir::Precision::kBF16);
  ASSERT_NE(cuda, nullptr);
  for (const char* fixture : {"v1", "v2"}) {
    const std::string dir = kRoot + "/tests/fixtures/dflash/" + fixture;
    auto file = io::SafetensorsFile::open(dir + "/model.safetensors");
    ASSERT_TRUE(file.ok()) << file.error().message();
    uint64_t gemm_elements = 0, gemm_rows_groups = 0;
    for (const std::string& name : (*file)->names()) {
      const bool gemm = name == "fc.weight" || (name.size() > 12 && name.ends_with("_proj.weight")) ||
                        name.ends_with("kernel_projection.weight") || name.ends_with("hidden_projection.weight");
      if (!gemm) continue;
      auto t = (*file)->tensor(name);
      ASSERT_TRUE(t.ok()) << t.error().message();
      ASSERT_EQ(t->shape.size(), 2u) << name;
      const uint64_t copies = name.ends_with("k_proj.weight") || name.ends_with("v_proj.weight") ? 2 : 1;
      gemm_elements += copies * t->shape[0] * t->shape[1];
      gemm_rows_groups += copies * t->shape[0] * (t->shape[1] / models::dflash::kLoadGroupSize);
    }
    ASSERT_GT(gemm_elements, 0u) << fixture;
    auto plain = Drafter::open(*cuda, dir, target_dir, DrafterOptions{1, 32, 0, std::nullopt, nullptr});
    ASSERT_TRUE(plain.ok()) << plain.error().message();
    ASSERT_TRUE((*plain)->setup().fuse_qkv);
    const size_t float_bytes = (*plain)->weights().bytes();
    for (auto [q, bits] : {std::pair{Quantization::kInt8, 8u}, std::pair{Quantization::kInt4, 4u}}) {
      auto quant = Drafter::open(*cuda, dir, target_dir, DrafterOptions{1, 32, 0, std::nullopt, nullptr, q});
      ASSERT_TRUE(quant.ok()) << quant.error().message();
      const uint64_t want = float_bytes - 2 * gemm_elements + gemm_elements * bits / 8 + 2 * gemm_rows_groups;
      EXPECT_EQ((*quant)->weights().bytes(), want) << fixture << " int" << bits << " (float drafter: " << float_bytes
                                                   << " bytes)";
      std::cerr << fixture << " int" << bits << ": " << (*quant)->weights().bytes() << " device bytes, BF16 "
                << float_bytes << "\n";
    }
  }
}

}  // namespace
}  // namespace tandem::cuda::test
