# The kernel sources and the headers NVRTC gets in memory (scorer.md §3). engine/cuda embeds them into
# the backend (tandem_embed ... kernels), and the NVRTC compile test compiles every .cu among them.
set(TANDEM_KERNEL_FILES
  ${CMAKE_CURRENT_LIST_DIR}/args.cuh
  ${CMAKE_CURRENT_LIST_DIR}/prelude.cuh
  ${CMAKE_CURRENT_LIST_DIR}/tensor_core.cuh
  ${CMAKE_CURRENT_LIST_DIR}/attention.cuh
  ${CMAKE_CURRENT_LIST_DIR}/act_features.cu
  ${CMAKE_CURRENT_LIST_DIR}/add_type.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_tc.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_tc2.cu
  ${CMAKE_CURRENT_LIST_DIR}/bias_act.cu
  ${CMAKE_CURRENT_LIST_DIR}/cast.cu
  ${CMAKE_CURRENT_LIST_DIR}/embed.cu
  ${CMAKE_CURRENT_LIST_DIR}/pick_rows.cu
  ${CMAKE_CURRENT_LIST_DIR}/geglu.cu
  ${CMAKE_CURRENT_LIST_DIR}/layer_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/rms_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/head_norm_rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/swiglu.cu
  ${CMAKE_CURRENT_LIST_DIR}/tap.cu
  ${CMAKE_CURRENT_LIST_DIR}/cache_append.cu
  ${CMAKE_CURRENT_LIST_DIR}/argmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/top_k.cu
  ${CMAKE_CURRENT_LIST_DIR}/sample.cu
)
