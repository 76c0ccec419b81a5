# cuda_decoder_bench's sources (bench/: cuda_decoder_bench_objects, which tests/engine/cuda's emulator build links).
set(TANDEM_CUDA_DECODER_BENCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_target.cpp)
