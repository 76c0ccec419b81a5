# cuda_spec_bench's sources, shared by the real build (bench/) and the emulator's test (tests/engine/cuda/):
# TANDEM_CUDA_SPEC_BENCH_LIB_SOURCES runs the benchmark (spec_bench.h), main.cpp is the command line.
include(${CMAKE_CURRENT_LIST_DIR}/../spec_replay/sources.cmake)
set(TANDEM_CUDA_SPEC_BENCH_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/spec_bench.cpp
  ${CMAKE_CURRENT_LIST_DIR}/phase_profile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_drafter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../cuda_decoder/random_target.cpp
  ${TANDEM_SPEC_REPLAY_SOURCES})
set(TANDEM_CUDA_SPEC_BENCH_SOURCES ${CMAKE_CURRENT_LIST_DIR}/main.cpp ${TANDEM_CUDA_SPEC_BENCH_LIB_SOURCES})
