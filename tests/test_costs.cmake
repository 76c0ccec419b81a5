# The longest tests' run times in seconds (one ctest -j2 run on a 2-core machine; the rest take under 10 s),
# as each test's COST. ctest -j starts the costliest tests first, but it only knows the times of tests it has
# run in that build directory before: on a fresh clone (CI) it would start them in the order they are
# declared, and a long test declared late keeps one core busy while the other idles at the end. Only the
# order matters, so the figures need not be exact; a test missing here runs after these, in declared order.
# RUN_SERIAL tests (tests/launch) are not listed: they run alone whatever their cost.
set(TANDEM_TEST_COST_cuda_spec_rejection_test_emu 443)
set(TANDEM_TEST_COST_cuda_scorer_bench_emu 120)
set(TANDEM_TEST_COST_cuda_served_round_test_emu 114)
set(TANDEM_TEST_COST_cuda_nvrtc_compile_test 91)
set(TANDEM_TEST_COST_cuda_fixture_test_emu 74)
set(TANDEM_TEST_COST_cuda_modules_test_emu 70)
set(TANDEM_TEST_COST_cuda_generate_command_test_emu 70)
set(TANDEM_TEST_COST_cuda_model_test_emu 52)
set(TANDEM_TEST_COST_cuda_target_test_emu 48)
set(TANDEM_TEST_COST_cuda_determinism_test_emu 42)
set(TANDEM_TEST_COST_cuda_spec_round_test_emu 35)
set(TANDEM_TEST_COST_cuda_decoder_bench_emu 30)
set(TANDEM_TEST_COST_cuda_cache_attention_test_emu 29)
set(TANDEM_TEST_COST_coordinator_rounds_test 29)
set(TANDEM_TEST_COST_cuda_spec_bench_test_emu 25)
set(TANDEM_TEST_COST_cuda_no_alloc_test_emu 21)
set(TANDEM_TEST_COST_cuda_choice_test_emu 18)
set(TANDEM_TEST_COST_shipped_models_test 17)
set(TANDEM_TEST_COST_cuda_drafter_test_emu 14)
set(TANDEM_TEST_COST_spec_lossless_sampling_test 14)
set(TANDEM_TEST_COST_cuda_decoder_kernels_test_emu 14)
set(TANDEM_TEST_COST_cuda_score_command_test_emu 13)
set(TANDEM_TEST_COST_coordinator_drain_test 13)
set(TANDEM_TEST_COST_cuda_kernels_test_emu 12)
set(TANDEM_TEST_COST_quantized_acceptance_test 11)
set(TANDEM_TEST_COST_coordinator_service_test 10)

# Sets test <name>'s COST from the table above, if it is there.
function(tandem_test_cost name)
  if(DEFINED TANDEM_TEST_COST_${name})
    set_tests_properties(${name} PROPERTIES COST ${TANDEM_TEST_COST_${name}})
  endif()
endfunction()
