# cuda_scorer_bench's sources (bench/: cuda_scorer_bench_objects, which tests/engine/cuda's emulator build links).
set(TANDEM_CUDA_SCORER_BENCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/random_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/workloads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/timing.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_profile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernel_study.cpp
  ${CMAKE_CURRENT_LIST_DIR}/variants.cpp)
