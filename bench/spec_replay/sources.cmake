# The replay drafter's sources (bench/spec_replay), shared by the speculative benchmark (bench/cuda_spec)
# and its test (tests/engine/spec/replay_test.cpp): bench-only, never part of the engine or `tandem`.
set(TANDEM_SPEC_REPLAY_SOURCES ${CMAKE_CURRENT_LIST_DIR}/replay.cpp)
