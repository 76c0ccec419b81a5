// What the token-choice kernels (argmax.cu, top_k.cu, sample.cu) share: 64-bit choice keys whose
// unsigned order is value order then the lower id (so a max or a sort is exact whatever the reduction
// order), the shuffles that carry them, and the strided walk over a row with 16-byte loads.
#pragma once

// Included by prelude.cuh, after the shuffles and V4 it uses.

namespace tandem::kernels::choice {

// The bits of a value as another type of the same size (doubles and ids travel through float shuffles).
template <class To, class From>
TK_DEV To bits_as(From f) {
  static_assert(sizeof(To) == sizeof(From), "bits_as keeps the size");
  union {
    From f;
    To t;
  } v;
  v.f = f;
  return v.t;
}
TK_DEV unsigned f32_bits(float f) { return bits_as<unsigned>(f); }

// Unsigned order of keys is the order of non-NaN floats, -0 and +0 alike.
TK_DEV unsigned order_key(float v) {
  const unsigned b = f32_bits(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}
TK_DEV float key_float(unsigned k) { return bits_float((k & 0x80000000u) != 0 ? k & 0x7fffffffu : ~k); }

// Value order, then the lower id; NaN below every number (the references' scans never pick a NaN past
// index 0; argmax settles a NaN at 0 apart). Real keys are never 0.
TK_DEV unsigned long long choice_key(float v, unsigned id) {
  return (static_cast<unsigned long long>(v != v ? 0u : order_key(v)) << 32) | (0xffffffffu - id);
}
TK_DEV unsigned key_id(unsigned long long key) { return 0xffffffffu - static_cast<unsigned>(key); }
TK_DEV unsigned long long max_u64(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// Shuffles of 32- and 64-bit values through the prelude's float shuffles: xor-butterfly and by lane.
TK_DEV unsigned shfl_xor_bits(unsigned v, int m) { return f32_bits(shfl_xor(bits_float(v), m)); }
TK_DEV unsigned shfl_bits(unsigned v, unsigned lane) { return f32_bits(shfl(bits_float(v), static_cast<int>(lane))); }
TK_DEV unsigned long long shfl_xor_bits(unsigned long long v, int m) {
  const unsigned lo = shfl_xor_bits(static_cast<unsigned>(v), m), hi = shfl_xor_bits(static_cast<unsigned>(v >> 32), m);
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
TK_DEV double shfl_xor_bits(double v, int m) {
  return bits_as<double>(shfl_xor_bits(bits_as<unsigned long long>(v), m));
}
TK_DEV double shfl_bits(double v, unsigned lane) {
  const unsigned long long u = bits_as<unsigned long long>(v);
  const unsigned lo = shfl_bits(static_cast<unsigned>(u), lane), hi = shfl_bits(static_cast<unsigned>(u >> 32), lane);
  return bits_as<double>((static_cast<unsigned long long>(hi) << 32) | lo);
}

// Part `part` of a row split into `parts` (args.cuh kChoiceMaxParts): columns [begin, begin + count), begin a
// multiple of 4 so a 16-byte aligned row stays aligned; parts past the columns are empty.
struct ColumnPart {
  unsigned begin, count;
};
TK_DEV ColumnPart column_part(unsigned columns, unsigned parts, unsigned part) {
  const unsigned span = ((columns + parts - 1) / parts + 3) & ~3u;
  const unsigned begin = min_u(columns, part * span);
  return {begin, min_u(span, columns - begin)};
}

// Every id of a row once, spread over a block of kThreads: 4 columns per load below vec_end (a multiple
// of 4 where the row is 16-byte aligned, else 0), kBatch loads in flight before any is used.
template <unsigned kThreads, class F>
TK_DEV void visit_strided(const float* x, unsigned vec_end, unsigned columns, F&& f) {
  constexpr unsigned kBatch = 4, kStep = kThreads * 4;
  unsigned c = threadIdx.x * 4;
  for (; c + (kBatch - 1) * kStep < vec_end; c += kBatch * kStep) {
    V4 v[kBatch];
#pragma unroll
    for (unsigned b = 0; b < kBatch; ++b) {
      // INVARIANT: arena values are 64-byte aligned and ld % 4 == 0 below vec_end, so x + c is 16-byte aligned.
      TK_ASSERT_ALIGNED(x + c + b * kStep, 16);
      v[b] = *reinterpret_cast<const V4*>(x + c + b * kStep);
    }
#pragma unroll
    for (unsigned b = 0; b < kBatch; ++b) {
      const unsigned at = c + b * kStep;
      f(v[b].x, at);
      f(v[b].y, at + 1);
      f(v[b].z, at + 2);
      f(v[b].w, at + 3);
    }
  }
  for (; c < vec_end; c += kStep) {  // the last few loads, one at a time
    TK_ASSERT_ALIGNED(x + c, 16);
    const V4 v = *reinterpret_cast<const V4*>(x + c);
    f(v.x, c);
    f(v.y, c + 1);
    f(v.z, c + 2);
    f(v.w, c + 3);
  }
  for (unsigned i = vec_end + threadIdx.x; i < columns; i += kThreads) f(x[i], i);
}

}  // namespace tandem::kernels::choice
