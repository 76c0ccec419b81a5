// Fibers for the SIMT emulator: a hand-written x86-64 context switch (callee-saved registers, MXCSR and
// the x87 control word), stacks from mmap with a guard page, and the per-block barrier scheduler.
#include "simt.h"

#include "emu_internal.h"

#include <sys/mman.h>

#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/core/dtype.h"

extern "C" void tandem_emu_switch(void** save_sp, void* load_sp);
extern "C" void tandem_emu_trampoline();

asm(R"(
  .text
  .globl tandem_emu_switch
  .type tandem_emu_switch,@function
tandem_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tandem_emu_switch,.-tandem_emu_switch

  .globl tandem_emu_trampoline
  .type tandem_emu_trampoline,@function
tandem_emu_trampoline:
  movq %r12, %rdi
  andq $-16, %rsp
  call *%r13
  ud2
  .size tandem_emu_trampoline,.-tandem_emu_trampoline
)");

namespace tandem::emu {
namespace {

constexpr size_t kStackBytes = size_t{256} << 10;
constexpr size_t kGuardBytes = 4096;

[[noreturn]] void die(const char* kernel, const char* what) {
  std::fprintf(stderr, "SIMT emulator: kernel %s: %s\n", kernel, what);
  std::abort();
}

enum class State { kReady, kBlockWait, kWarpWait, kDone };

// One cp.async copy waiting for its group to be released.
struct AsyncCopy {
  unsigned char* dst;
  const unsigned char* src;
  bool fill;
  size_t group;
};

struct Fiber {
  void* sp = nullptr;
  unsigned char* stack = nullptr;  // lowest usable address (above the guard page)
  State state = State::kReady;
  Dim3 tid;
  unsigned linear = 0;
  std::vector<AsyncCopy> copies;   // issued, not yet performed
  size_t committed = 0;            // groups committed so far; copies of group `committed` are open
  unsigned reads = 0;              // warp_read calls so far: which of the two read banks the next one uses
  bool waited = false;             // called grid_wait (programmatic dependent launch)
};

// Where the scheduler is in its walk over the block's threads (run_block's comment describes the order):
// kPass scans the pass at position n; kCheck asks whether warp w's collective can run on at once
// (eager blocks); kWarp runs warp w's ready lanes from lane k.
enum class Phase { kPass, kCheck, kWarp };

struct Block {
  const char* name = nullptr;
  Invoke invoke = nullptr;
  void* args = nullptr;
  Dim3 block_idx, block_dim, grid_dim;
  std::vector<Fiber>* fibers = nullptr;
  size_t count = 0;
  Fiber* current = nullptr;
  void* scheduler_sp = nullptr;
  std::vector<unsigned char> slots;  // warps × 32 × kSlotBytes, then warp_read's two banks of the same
  std::vector<unsigned char> dynamic;  // the launch's dynamic shared memory, refilled per block
  // Threads per state, the block's and each warp's (kept as the states change, so the scheduler's checks
  // cost the same whatever the block size).
  size_t block_waiting = 0, done = 0;
  std::vector<unsigned> warp_waiting, warp_done;
  std::vector<unsigned> ballots;  // warp_ballot's words: two banks per warp
  // The walk (run_block): the pass's direction, position and whether it ran a thread; the warp in hand.
  bool descending = false, eager = false, ran = false;
  Phase phase = Phase::kPass;
  size_t n = 0, w = 0, k = 0;
};

thread_local Block* g_block = nullptr;
thread_local unsigned g_launches = 0;

// Fiber stacks, one pool per launching thread (two ranks' backends may run kernels at once in a test),
// unmapped when the thread ends.
struct StackPool {
  std::vector<unsigned char*> stacks;
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (unsigned char* s : stacks) munmap(s - kGuardBytes, kStackBytes + kGuardBytes);
  }
};

std::vector<unsigned char*>& stack_pool() {
  static thread_local StackPool pool;
  return pool.stacks;
}

unsigned char* stack_at(size_t i) {
  auto& pool = stack_pool();
  while (pool.size() <= i) {
    void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("?", "cannot map a fiber stack");
    mprotect(p, kGuardBytes, PROT_NONE);  // an overflow faults instead of corrupting a neighbour
    pool.push_back(static_cast<unsigned char*>(p) + kGuardBytes);
  }
  return pool[i];
}

void switch_from(Block& b, Fiber& from);

extern "C" void tandem_emu_fiber_main(Fiber* f) {
  Block* b = g_block;
  b->invoke(b->args);
  if (!f->copies.empty()) die(b->name, "a thread exited with cp.async copies it never waited for");
  if (!f->waited) {
    die(b->name, "a thread exited without waiting for the grid ahead (wait_prior_grids; prelude.cuh enter_grid)");
  }
  f->state = State::kDone;
  ++b->done;
  ++b->warp_done[f->linear / 32];
  switch_from(*b, *f);
  die(b->name, "a finished fiber was resumed");
}

// Lays out a fresh stack so that the first switch to it "returns" into the trampoline, which calls
// tandem_emu_fiber_main(f) with r12 = f and r13 = the function.
void prepare(Fiber& f) {
  // INVARIANT: the stack is kStackBytes above its guard page, 16-byte aligned at the top; the nine words
  // written below it are exactly what tandem_emu_switch pops.
  auto* top = reinterpret_cast<uint64_t*>(f.stack + kStackBytes);
  uint64_t* sp = top;
  *--sp = 0;                                                         // alignment pad
  *--sp = reinterpret_cast<uint64_t>(&tandem_emu_trampoline);        // ret target
  *--sp = 0;                                                         // rbp
  *--sp = 0;                                                         // rbx
  *--sp = reinterpret_cast<uint64_t>(&f);                            // r12
  *--sp = reinterpret_cast<uint64_t>(&tandem_emu_fiber_main);        // r13
  *--sp = 0;                                                         // r14
  *--sp = 0;                                                         // r15
  *--sp = 0x037F00001F80ull;                                         // x87 control word : MXCSR
  f.sp = sp;
  f.state = State::kReady;
  f.copies.clear();
  f.committed = 0;
  f.reads = 0;
  f.waited = false;
}

// Releases warp w's collective when every live lane of it has reached one; false otherwise.
bool release_warp(Block& b, size_t w) {
  const size_t lanes = std::min(b.count, w * 32 + 32) - w * 32;
  const size_t waiting = b.warp_waiting[w], done = b.warp_done[w];
  if (waiting == 0 || waiting + done != lanes) return false;
  if (done > 0) die(b.name, "a warp collective after some lanes of the warp exited");
  auto& fibers = *b.fibers;
  for (size_t i = w * 32; i < w * 32 + lanes; ++i) fibers[i].state = State::kReady;
  b.warp_waiting[w] = 0;
  return true;
}

// Releases whatever barrier every concerned live thread has reached; false when none can be released.
bool release(Block& b) {
  auto& fibers = *b.fibers;
  bool released = false;
  const size_t warps = (b.count + 31) / 32;
  for (size_t w = 0; w < warps; ++w) released = release_warp(b, w) || released;
  if (released) return true;
  if (b.block_waiting > 0 && b.block_waiting + b.done == b.count) {
    for (size_t i = 0; i < b.count; ++i) {
      if (fibers[i].state == State::kBlockWait) fibers[i].state = State::kReady;
    }
    b.block_waiting = 0;
    return true;
  }
  return false;
}

// Passes run the ready threads in ascending or descending order, alternating with the block and the
// pass, so a read that needs a barrier it lacks sees stale shared memory in one of the orders. In eager
// blocks a warp whose lanes all reach a warp collective runs on at once, ahead of the other warps, so
// a warp reading what other warps write without a block barrier between sees it unwritten.
//
// The order as a loop (what next() walks one step at a time, so that a thread that stops at a barrier
// switches straight to the next one rather than through the scheduler):
//   for (;;) {
//     for each thread i in the pass's order: if ready, run it; then while (eager && release_warp(i / 32))
//       run the ready lanes of warp i / 32 in ascending order;
//     flip the direction; stop when every thread is done; release barriers; none and nothing ran: deadlock
//   }
// The index of the thread to run next, or count when the block is done.
size_t next(Block& b) {
  auto& fibers = *b.fibers;
  for (;;) {
    switch (b.phase) {
      case Phase::kCheck:
        if (b.eager && release_warp(b, b.w)) {
          b.k = b.w * 32;
          b.phase = Phase::kWarp;
        } else {
          b.phase = Phase::kPass;
        }
        break;
      case Phase::kWarp: {
        const size_t end = std::min(b.count, b.w * 32 + 32);
        while (b.k < end) {
          const size_t i = b.k++;
          if (fibers[i].state == State::kReady) return i;
        }
        b.phase = Phase::kCheck;
        break;
      }
      case Phase::kPass:
        while (b.n < b.count) {
          const size_t i = b.descending ? b.count - 1 - b.n : b.n;
          ++b.n;
          if (fibers[i].state != State::kReady) continue;
          b.ran = true;
          b.w = i / 32;
          b.phase = Phase::kCheck;
          return i;
        }
        b.descending = !b.descending;
        if (b.done == b.count) return b.count;
        if (!release(b) && !b.ran) die(b.name, "deadlock: threads wait at barriers that cannot all be reached");
        b.n = 0;
        b.ran = false;
        break;
    }
  }
}

// Leaves `from` (stopped at a barrier, or done) for the next thread to run, or the launching thread
// once the block is done; returns at once when the next thread is `from` itself.
void switch_from(Block& b, Fiber& from) {
  const size_t i = next(b);
  if (i == b.count) {
    tandem_emu_switch(&from.sp, b.scheduler_sp);
    return;
  }
  Fiber& to = (*b.fibers)[i];
  if (&to == &from) return;
  b.current = &to;
  tandem_emu_switch(&from.sp, to.sp);
}

void run_block(Block& b, bool descending, bool eager) {
  auto& fibers = *b.fibers;
  std::fill(b.dynamic.begin(), b.dynamic.end(), static_cast<unsigned char>(0xff));
  for (size_t i = 0; i < b.count; ++i) prepare(fibers[i]);
  b.block_waiting = 0;
  b.done = 0;
  std::fill(b.warp_waiting.begin(), b.warp_waiting.end(), 0u);
  std::fill(b.warp_done.begin(), b.warp_done.end(), 0u);
  b.descending = descending;
  b.eager = eager;
  b.ran = false;
  b.phase = Phase::kPass;
  b.n = 0;
  const size_t first = next(b);  // a fresh block always has a ready thread
  b.current = &fibers[first];
  tandem_emu_switch(&b.scheduler_sp, b.current->sp);
  // Back here once every thread is done.
}

}  // namespace

const Dim3& thread_idx() { return g_block->current->tid; }
const Dim3& block_idx() { return g_block->block_idx; }
const Dim3& block_dim() { return g_block->block_dim; }
const Dim3& grid_dim() { return g_block->grid_dim; }
unsigned lane_id() { return g_block->current->linear & 31u; }

void sync_block() {
  Block& b = *g_block;
  Fiber& f = *b.current;
  f.state = State::kBlockWait;
  ++b.block_waiting;
  switch_from(b, f);
}

void warp_sync() {
  Block& b = *g_block;
  Fiber& f = *b.current;
  f.state = State::kWarpWait;
  ++b.warp_waiting[f.linear / 32];
  switch_from(b, f);
}

unsigned char* warp_slot(unsigned lane) {
  const size_t warp = g_block->current->linear / 32;
  return g_block->slots.data() + (warp * 32 + lane) * kSlotBytes;
}

unsigned char* warp_read_slots() {
  Block& b = *g_block;
  Fiber& f = *b.current;
  const size_t warps = (b.count + 31) / 32;
  const size_t bank = 1 + (f.reads++ & 1u);
  return b.slots.data() + ((bank * warps + f.linear / 32) * 32) * kSlotBytes;
}

unsigned warp_ballot(bool p) {
  Block& b = *g_block;
  Fiber& f = *b.current;
  // The warp's word in the bank of this read (as warp_read_slots alternates them): every lane sets or
  // clears its own bit, so no lane needs to clear the word first; lanes past the block's end stay 0.
  unsigned& word = b.ballots[2 * (f.linear / 32) + (f.reads++ & 1u)];
  const unsigned bit = 1u << (f.linear & 31u);
  word = p ? word | bit : word & ~bit;
  warp_sync();
  return word;
}

void assert_aligned(const void* p, unsigned bytes, const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(p) % bytes == 0) return;
  std::fprintf(stderr, "SIMT emulator: kernel %s: misaligned %u-byte access at %p (%s:%d)\n",
               g_block != nullptr ? g_block->name : "?", bytes, p, file, line);
  std::abort();
}

namespace {

// d += A · B over the warp's fragments, their 16-bit halves widened by `widen`.
template <class Widen>
void mma_16816_of(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], Widen widen) {
  struct Frag {
    unsigned a[4];
    unsigned b[2];
  };
  const Frag mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  std::memcpy(warp_slot(lane_id()), &mine, sizeof(mine));
  warp_sync();
  float A[16][16], B[16][8];
  auto lo = [&](unsigned v) { return widen(static_cast<uint16_t>(v & 0xffffu)); };
  auto hi = [&](unsigned v) { return widen(static_cast<uint16_t>(v >> 16)); };
  for (unsigned l = 0; l < 32; ++l) {
    Frag f;
    std::memcpy(&f, warp_slot(l), sizeof(f));
    const unsigned g = l >> 2, t = l & 3;
    A[g][2 * t] = lo(f.a[0]);
    A[g][2 * t + 1] = hi(f.a[0]);
    A[g + 8][2 * t] = lo(f.a[1]);
    A[g + 8][2 * t + 1] = hi(f.a[1]);
    A[g][2 * t + 8] = lo(f.a[2]);
    A[g][2 * t + 9] = hi(f.a[2]);
    A[g + 8][2 * t + 8] = lo(f.a[3]);
    A[g + 8][2 * t + 9] = hi(f.a[3]);
    B[2 * t][g] = lo(f.b[0]);
    B[2 * t + 1][g] = hi(f.b[0]);
    B[2 * t + 8][g] = lo(f.b[1]);
    B[2 * t + 9][g] = hi(f.b[1]);
  }
  warp_sync();
  const unsigned g = lane_id() >> 2, t = lane_id() & 3;
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
    // The H200 gives the same bits for any order of the step's 16 k (PERF_NOTES "The streaming GEMM"): the
    // products (exact in a float) are summed in a double, exact for any operands near each other's scale, and
    // rounded once, so the order does not matter here either. emu_cublaslt.cpp sums its steps alike.
    double sum = 0.0;
    for (unsigned k = 0; k < 16; ++k) sum += static_cast<double>(A[row][k] * B[k][col]);
    d[e] += static_cast<float>(sum);
  }
}

}  // namespace

void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  mma_16816_of(d, a, b, [](uint16_t h) { return half_to_float(h); });
}

void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  mma_16816_of(d, a, b, [](uint16_t h) { return bf16_to_float(h); });
}

void ldmatrix_x4(unsigned (&r)[4], const void* row, bool trans) {
  assert_aligned(row, 16, __FILE__, __LINE__);
  std::memcpy(warp_slot(lane_id()), &row, sizeof(row));
  warp_sync();
  uint16_t m[4][8][8];  // matrix, row, column
  for (unsigned l = 0; l < 32; ++l) {
    const void* p;
    std::memcpy(&p, warp_slot(l), sizeof(p));
    std::memcpy(m[l / 8][l % 8], p, 16);
  }
  warp_sync();
  const unsigned l = lane_id(), g = l / 4, t = l % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const uint16_t a = trans ? m[i][2 * t][g] : m[i][g][2 * t];
    const uint16_t b = trans ? m[i][2 * t + 1][g] : m[i][g][2 * t + 1];
    r[i] = static_cast<unsigned>(a) | (static_cast<unsigned>(b) << 16);
  }
}

void cp_async16(void* dst, const void* src, bool fill) {
  assert_aligned(dst, 16, __FILE__, __LINE__);
  if (fill) {
    assert_aligned(src, 16, __FILE__, __LINE__);
    if (!device_readable(src, 16)) die(g_block->name, "cp.async reads outside every device allocation");
  }
  Fiber& f = *g_block->current;
  f.copies.push_back({static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), fill, f.committed});
}

void cp_async_commit() { ++g_block->current->committed; }

void cp_async_wait(int groups_left) {
  Fiber& f = *g_block->current;
  const size_t keep = static_cast<size_t>(groups_left);
  // Groups below `done` are complete: every committed group but the `keep` most recent.
  const size_t done = f.committed > keep ? f.committed - keep : 0;
  size_t kept = 0;
  for (const AsyncCopy& c : f.copies) {
    if (c.group < done) {
      if (c.fill) {
        std::memcpy(c.dst, c.src, 16);
      } else {
        std::memset(c.dst, 0, 16);
      }
    } else {
      f.copies[kept++] = c;
    }
  }
  f.copies.resize(kept);
}

void grid_wait() { g_block->current->waited = true; }

void grid_allow() {
  if (!g_block->current->waited) die(g_block->name, "a thread let the next grid in before waiting for the one ahead");
}

unsigned char* dynamic_shared() { return g_block->dynamic.empty() ? nullptr : g_block->dynamic.data(); }

void run_kernel(const char* name, Invoke invoke, void* args, Dim3 grid, Dim3 block, size_t shared) {
  const size_t count = size_t{block.x} * block.y * block.z;
  if (count == 0 || count > 1024) die(name, "block size outside 1..1024");
  static thread_local std::vector<Fiber> fibers;
  fibers.resize(std::max(fibers.size(), count));
  for (size_t i = 0; i < count; ++i) {
    Fiber& f = fibers[i];
    f.stack = stack_at(i);
    f.linear = static_cast<unsigned>(i);
    f.tid = Dim3{static_cast<unsigned>(i % block.x), static_cast<unsigned>((i / block.x) % block.y),
                 static_cast<unsigned>(i / (size_t{block.x} * block.y))};
  }
  Block b;
  b.name = name;
  b.invoke = invoke;
  b.args = args;
  b.block_dim = block;
  b.grid_dim = grid;
  b.fibers = &fibers;
  b.count = count;
  const size_t warps = (count + 31) / 32;
  b.slots.assign(3 * warps * 32 * kSlotBytes, 0);
  b.warp_waiting.assign(warps, 0);
  b.warp_done.assign(warps, 0);
  b.ballots.assign(2 * warps, 0);
  b.dynamic.assign(shared, 0xff);
  Block* outer = g_block;
  g_block = &b;
  ++g_launches;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        b.block_idx = Dim3{x, y, z};
        const unsigned mode = x + y + z + g_launches;  // order and eagerness vary by block and launch
        run_block(b, (mode & 1u) != 0, (mode & 2u) != 0);
      }
    }
  }
  g_block = outer;
}

}  // namespace tandem::emu
