// The SIMT emulator's own checks on programmatic dependent launch (simt.h grid_wait / grid_allow): every
// kernel must wait for the grid ahead before it exits and before it lets the next one in, because lowering may
// launch any kernel of a plan to overlap the one ahead (kernels/prelude.cuh enter_grid). A kernel that breaks
// the rule is a race only a GPU could show, and then only sometimes: the emulator refuses it on every run.
#include <gtest/gtest.h>

#include "simt.h"

namespace tandem::emu {
namespace {

void waits_then_allows(void* args) {
  grid_wait();
  grid_allow();
  static_cast<int*>(args)[block_idx().x * 32 + thread_idx().x] = 1;
}

void never_waits(void* args) { static_cast<int*>(args)[thread_idx().x] = 1; }

// One lane of the block leaves before it waits (as a kernel whose early return comes before enter_grid would).
void one_lane_leaves_early(void*) {
  if (thread_idx().x == 5) return;
  grid_wait();
}

void allows_before_waiting(void*) {
  grid_allow();
  grid_wait();
}

TEST(SimtGridDependency, AKernelThatWaitsFirstRuns) {
  int out[64] = {};
  run_kernel("waits_then_allows", &waits_then_allows, out, Dim3{2, 1, 1}, Dim3{32, 1, 1}, 0);
  for (int v : out) EXPECT_EQ(v, 1);
}

TEST(SimtGridDependencyDeathTest, AThreadThatNeverWaitsAbortsTheRun) {
  int out[32] = {};
  EXPECT_DEATH(run_kernel("never_waits", &never_waits, out, Dim3{}, Dim3{32, 1, 1}, 0),
               "kernel never_waits: a thread exited without waiting for the grid ahead");
  EXPECT_DEATH(run_kernel("one_lane_leaves_early", &one_lane_leaves_early, nullptr, Dim3{}, Dim3{32, 1, 1}, 0),
               "kernel one_lane_leaves_early: a thread exited without waiting");
}

TEST(SimtGridDependencyDeathTest, LettingTheNextGridInBeforeWaitingAbortsTheRun) {
  EXPECT_DEATH(run_kernel("allows_before_waiting", &allows_before_waiting, nullptr, Dim3{}, Dim3{32, 1, 1}, 0),
               "kernel allows_before_waiting: a thread let the next grid in before waiting for the one ahead");
}

}  // namespace
}  // namespace tandem::emu
