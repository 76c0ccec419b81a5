// The SIMT emulator's scheduler (tests only): a launch runs block by block on the calling thread, each
// thread a fiber that runs until a barrier (__syncthreads or a warp collective) that releases once every
// live thread it concerns has arrived; a collective after lanes exited or a stuck barrier aborts.
#pragma once

#include <cstddef>
#include <cstring>

namespace tandem::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

const Dim3& thread_idx();
const Dim3& block_idx();
const Dim3& block_dim();
const Dim3& grid_dim();
unsigned lane_id();

void sync_block();
void warp_sync();

inline constexpr size_t kSlotBytes = 64;
// The exchange slot of `lane` in the current warp (valid between two warp_sync calls).
unsigned char* warp_slot(unsigned lane);

// The current warp's 32 exchange slots for its next warp_read: the reads alternate between two banks
// (apart from warp_slot's), so a lane that writes its next offer while others still read this one's
// cannot overwrite them, and one barrier per read suffices (every lane reads a bank before it reaches
// the next read's barrier, and the bank is written again only after that barrier).
unsigned char* warp_read_slots();

// Every lane of the warp offers `mine`; each gets the value lane `from` offered.
template <class T>
T warp_read(T mine, unsigned from) {
  static_assert(sizeof(T) <= kSlotBytes);
  unsigned char* slots = warp_read_slots();
  std::memcpy(slots + lane_id() * kSlotBytes, &mine, sizeof(T));
  warp_sync();
  T out;
  std::memcpy(&out, slots + (from & 31u) * kSlotBytes, sizeof(T));
  return out;
}

// __ballot_sync over the whole warp: bit l of the result is lane l's `p` (one warp_read's exchange).
unsigned warp_ballot(bool p);

// d += A · B for the warp's m16n8k16 fragments (PTX ISA layouts).
void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);
// The same with bf16 operands (mma.sync m16n8k16 .bf16).
void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 give the 16-byte rows of matrix i;
// r[i] gets this lane's pair of matrix i (row lane/4, columns 2(lane%4), +1; trans: the transpose).
void ldmatrix_x4(unsigned (&r)[4], const void* row, bool trans);

// cp.async.cg 16 bytes (zeros when !fill), held back until a wait_group releases its group, so a read
// of the destination that a missing wait leaves early sees the old bytes; copies still in flight when
// the thread exits abort the run.
void cp_async16(void* dst, const void* src, bool fill);
void cp_async_commit();
void cp_async_wait(int groups_left);

// Programmatic dependent launch's two instructions (prelude.cuh enter_grid). Every thread of every kernel must
// wait before it exits, so any launch may overlap the one ahead; letting the next grid in before waiting aborts
// the run, as does a thread that exits without waiting.
void grid_wait();
void grid_allow();

// The block's dynamic shared memory: the launch's shared bytes, filled with 0xff (NaN) for each block.
unsigned char* dynamic_shared();

// Aborts, naming the kernel and the source line, when p is not a multiple of `bytes`.
void assert_aligned(const void* p, unsigned bytes, const char* file, int line);

using Invoke = void (*)(void* args);
// Runs `invoke(args)` as every thread of every block of the grid, with `shared` bytes of dynamic shared
// memory per block.
void run_kernel(const char* name, Invoke invoke, void* args, Dim3 grid, Dim3 block, size_t shared);

}  // namespace tandem::emu
