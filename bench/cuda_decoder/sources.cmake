# cuda_decoder_bench's sources, shared by the real build (bench/) and the emulator's (tests/engine/cuda/).
set(TANDEM_CUDA_DECODER_BENCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_target.cpp)
