// The list of every kernel entry (scorer.md §3): its extern "C" name in kernels/*.cu, the argument pack
// it takes (kernels/args.cuh) and its file. Module loading fails naming any entry NVRTC did not produce;
// launches check that the pack they pass is the one the entry takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "kernels/args.cuh"

// X(entry, args, file)
#define TANDEM_CUDA_KERNELS(X)                                  \
  X(embed_f32_f32, EmbedArgs, "embed.cu")                                   \
  X(layer_norm_f32_f32, LayerNormArgs, "layer_norm.cu")                     \
  X(layer_norm_f32_f16, LayerNormArgs, "layer_norm.cu")                     \
  X(layer_norm_f16_f32, LayerNormArgs, "layer_norm.cu")                     \
  X(layer_norm_f16_f16, LayerNormArgs, "layer_norm.cu")                     \
  X(bias_act_f32_f32, BiasActArgs, "bias_act.cu")                           \
  X(bias_act_f16_f16, BiasActArgs, "bias_act.cu")                           \
  X(bias_act_bf16_bf16, BiasActArgs, "bias_act.cu")                         \
  X(cast_f32_f16, CastArgs, "cast.cu")                                      \
  X(cast_f32_bf16, CastArgs, "cast.cu")                                     \
  X(rope_f32_f32, RopeArgs, "rope.cu")                                      \
  X(rope_f16_f16, RopeArgs, "rope.cu")                                      \
  X(attention_f32_f32, AttentionArgs, "attention.cu")                       \
  X(attention_f32_f16, AttentionArgs, "attention.cu")                       \
  X(attention_f16_f32, AttentionArgs, "attention.cu")                       \
  X(attention_f16_f16, AttentionArgs, "attention.cu")                       \
  X(attention_tc_f32_f32, AttentionArgs, "attention_tc.cu")                 \
  X(attention_tc_f32_f16, AttentionArgs, "attention_tc.cu")                 \
  X(attention_tc2_f32_f32, AttentionArgs, "attention_tc2.cu")               \
  X(attention_tc2_f32_f16, AttentionArgs, "attention_tc2.cu")               \
  X(attention_tc2s_f32_f16, AttentionArgs, "attention_tc2.cu")              \
  X(geglu_f32_f32, GegluArgs, "geglu.cu")                                   \
  X(geglu_f32_f16, GegluArgs, "geglu.cu")                                   \
  X(geglu_f16_f32, GegluArgs, "geglu.cu")                                   \
  X(geglu_f16_f16, GegluArgs, "geglu.cu")                                   \
  X(add_type_f32_f32, AddTypeArgs, "add_type.cu")                           \
  X(pick_rows_f32_f32, PickRowsArgs, "pick_rows.cu")                        \
  X(pick_rows_f32_f16, PickRowsArgs, "pick_rows.cu")                        \
  X(pick_rows_f16_f32, PickRowsArgs, "pick_rows.cu")                        \
  X(pick_rows_f16_f16, PickRowsArgs, "pick_rows.cu")                        \
  X(act_features_f32_f32, ActFeaturesArgs, "act_features.cu")               \
  X(rms_norm_f32_f32, RmsNormArgs, "rms_norm.cu")                           \
  X(rms_norm_f32_f16, RmsNormArgs, "rms_norm.cu")                           \
  X(rms_norm_f32_bf16, RmsNormArgs, "rms_norm.cu")                          \
  X(rms_norm_f16_f32, RmsNormArgs, "rms_norm.cu")                           \
  X(rms_norm_f16_f16, RmsNormArgs, "rms_norm.cu")                           \
  X(rms_norm_bf16_f32, RmsNormArgs, "rms_norm.cu")                          \
  X(rms_norm_bf16_bf16, RmsNormArgs, "rms_norm.cu")                         \
  X(head_norm_rope_f32, HeadNormRopeArgs, "head_norm_rope.cu")              \
  X(head_norm_rope_f16, HeadNormRopeArgs, "head_norm_rope.cu")              \
  X(head_norm_rope_bf16, HeadNormRopeArgs, "head_norm_rope.cu")             \
  X(qkv_prep_f32, QkvPrepArgs, "qkv_prep.cu")                               \
  X(qkv_prep_f16, QkvPrepArgs, "qkv_prep.cu")                               \
  X(qkv_prep_bf16, QkvPrepArgs, "qkv_prep.cu")                              \
  X(swiglu_f32_f32, SwigluArgs, "swiglu.cu")                                \
  X(swiglu_f32_f16, SwigluArgs, "swiglu.cu")                                \
  X(swiglu_f32_bf16, SwigluArgs, "swiglu.cu")                               \
  X(swiglu_f16_f16, SwigluArgs, "swiglu.cu")                                \
  X(swiglu_bf16_bf16, SwigluArgs, "swiglu.cu")                              \
  X(tap_f32_f32, TapArgs, "tap.cu")                                         \
  X(tap_f32_f16, TapArgs, "tap.cu")                                         \
  X(tap_f32_bf16, TapArgs, "tap.cu")                                        \
  X(input_f32, InputArgs, "input.cu")                                       \
  X(input_f16, InputArgs, "input.cu")                                       \
  X(input_bf16, InputArgs, "input.cu")                                      \
  X(dyn_conv_f32_f32, DynConvArgs, "dyn_conv.cu")                           \
  X(dyn_conv_f16_f16, DynConvArgs, "dyn_conv.cu")                           \
  X(dyn_conv_f16_f32, DynConvArgs, "dyn_conv.cu")                           \
  X(dyn_conv_bf16_bf16, DynConvArgs, "dyn_conv.cu")                         \
  X(dyn_conv_bf16_f32, DynConvArgs, "dyn_conv.cu")                          \
  X(cache_append_f32, CacheAppendArgs, "cache_append.cu")                   \
  X(cache_append_f16, CacheAppendArgs, "cache_append.cu")                   \
  X(cache_append_bf16, CacheAppendArgs, "cache_append.cu")                  \
  X(cache_attention_f32, CacheAttentionArgs, "cache_attention.cu")          \
  X(cache_attention_f16, CacheAttentionArgs, "cache_attention.cu")          \
  X(cache_attention_bf16, CacheAttentionArgs, "cache_attention.cu")         \
  X(cache_attention_tc_f16_h32, CacheAttentionArgs, "cache_attention.cu")   \
  X(cache_attention_tc_f16_h64, CacheAttentionArgs, "cache_attention.cu")   \
  X(cache_attention_tc_f16_h128, CacheAttentionArgs, "cache_attention.cu")  \
  X(cache_attention_tc_bf16_h32, CacheAttentionArgs, "cache_attention.cu")  \
  X(cache_attention_tc_bf16_h64, CacheAttentionArgs, "cache_attention.cu")  \
  X(cache_attention_tc_bf16_h128, CacheAttentionArgs, "cache_attention.cu") \
  X(cache_attention_combine_f32, CacheAttentionArgs, "cache_attention.cu")  \
  X(cache_attention_combine_f16, CacheAttentionArgs, "cache_attention.cu")  \
  X(cache_attention_combine_bf16, CacheAttentionArgs, "cache_attention.cu") \
  X(argmax_f32_u32, ArgmaxArgs, "argmax.cu")                                \
  X(top_k_f32_u32, TopKArgs, "top_k.cu")                                    \
  X(top_k_parts_f32, TopKArgs, "top_k.cu")                                  \
  X(top_k_merge_f32_u32, TopKArgs, "top_k.cu")                              \
  X(sample_f32_u32, SampleArgs, "sample.cu")                                \
  X(sample_scan_parts_f32, SampleArgs, "sample.cu")                         \
  X(gemm_decode_f16_f32, GemmDecodeArgs, "gemm_decode.cu")                  \
  X(gemm_decode_f16_f16, GemmDecodeArgs, "gemm_decode.cu")                  \
  X(gemm_decode_bf16_f32, GemmDecodeArgs, "gemm_decode.cu")                 \
  X(gemm_decode_bf16_bf16, GemmDecodeArgs, "gemm_decode.cu")               \
  X(gemm_stream_f16_f32, GemmStreamArgs, "gemm_stream.cu")                  \
  X(gemm_stream_f16_f16, GemmStreamArgs, "gemm_stream.cu")                  \
  X(gemm_stream_bf16_f32, GemmStreamArgs, "gemm_stream.cu")                 \
  X(gemm_stream_bf16_bf16, GemmStreamArgs, "gemm_stream.cu")                \
  X(qgemm_f32_f32, QGemmArgs, "qgemm.cu")                                   \
  X(qgemm_f16_f16, QGemmArgs, "qgemm.cu")                                   \
  X(qgemm_f16_f32, QGemmArgs, "qgemm.cu")                                   \
  X(qgemm_f32_f16, QGemmArgs, "qgemm.cu")                                   \
  X(qgemm_bf16_bf16, QGemmArgs, "qgemm.cu")                                 \
  X(qgemm_bf16_f32, QGemmArgs, "qgemm.cu")                                  \
  X(qgemm_f32_bf16, QGemmArgs, "qgemm.cu")                                   \
  X(qgemm_tc_f32_f32, QGemmTcArgs, "qgemm_tc.cu")                           \
  X(qgemm_tc_f16_f16, QGemmTcArgs, "qgemm_tc.cu")                           \
  X(qgemm_tc_f16_f32, QGemmTcArgs, "qgemm_tc.cu")                           \
  X(qgemm_tc_f32_f16, QGemmTcArgs, "qgemm_tc.cu")                           \
  X(qgemm_tc_bf16_bf16, QGemmTcArgs, "qgemm_tc.cu")                         \
  X(qgemm_tc_bf16_f32, QGemmTcArgs, "qgemm_tc.cu")                          \
  X(qgemm_tc_f32_bf16, QGemmTcArgs, "qgemm_tc.cu")                          \
  X(qgemm_tc_whole_k_f32_f32, QGemmTcArgs, "qgemm_tc_whole_k.cu")           \
  X(qgemm_tc_whole_k_f16_f16, QGemmTcArgs, "qgemm_tc_whole_k.cu")           \
  X(qgemm_tc_whole_k_f16_f32, QGemmTcArgs, "qgemm_tc_whole_k.cu")           \
  X(qgemm_tc_whole_k_f32_f16, QGemmTcArgs, "qgemm_tc_whole_k.cu")           \
  X(qgemm_tc_whole_k_bf16_bf16, QGemmTcArgs, "qgemm_tc_whole_k.cu")         \
  X(qgemm_tc_whole_k_bf16_f32, QGemmTcArgs, "qgemm_tc_whole_k.cu")          \
  X(qgemm_tc_whole_k_f32_bf16, QGemmTcArgs, "qgemm_tc_whole_k.cu")          \
  X(selector_walk_f32_u32, SelectorWalkArgs, "selector_walk.cu")                       \
  X(reject_sample_f32_u32, RejectSampleArgs, "reject_sample.cu")                        \
  X(reject_commit_u32, RejectSampleArgs, "reject_sample.cu")

namespace tandem::cuda {

// Named as the entries are, so a grep finds both.
enum class KernelId : uint16_t {
#define TANDEM_CUDA_KERNEL_ID(entry, args, file) entry,
  TANDEM_CUDA_KERNELS(TANDEM_CUDA_KERNEL_ID)
#undef TANDEM_CUDA_KERNEL_ID
};
inline constexpr size_t kKernelCount = 0
#define TANDEM_CUDA_KERNEL_COUNT(entry, args, file) +1
    TANDEM_CUDA_KERNELS(TANDEM_CUDA_KERNEL_COUNT)
#undef TANDEM_CUDA_KERNEL_COUNT
    ;

// Every argument pack, in one variant: a recorded launch holds one.
using KernelArgs = std::variant<kernels::EmbedArgs, kernels::LayerNormArgs, kernels::BiasActArgs, kernels::CastArgs,
                                kernels::RopeArgs, kernels::AttentionArgs, kernels::GegluArgs, kernels::AddTypeArgs,
                                kernels::PickRowsArgs, kernels::ActFeaturesArgs, kernels::RmsNormArgs,
                                kernels::HeadNormRopeArgs, kernels::QkvPrepArgs, kernels::SwigluArgs,
                                kernels::TapArgs, kernels::CacheAppendArgs, kernels::CacheAttentionArgs, kernels::ArgmaxArgs,
                                kernels::TopKArgs, kernels::SampleArgs, kernels::InputArgs, kernels::DynConvArgs,
                                kernels::GemmDecodeArgs, kernels::GemmStreamArgs, kernels::QGemmArgs, kernels::QGemmTcArgs,
                                kernels::SelectorWalkArgs, kernels::RejectSampleArgs>;

struct KernelInfo {
  const char* entry;
  const char* file;
  size_t args_index;  // the KernelArgs alternative the entry takes
};
const KernelInfo& kernel_info(KernelId id);

// Dynamic shared memory the entry's launches take (0 for most); above 48 KB the module loader raises
// the kernel's limit once (cudaFuncSetAttribute).
uint32_t kernel_dynamic_smem(KernelId id);

}  // namespace tandem::cuda
