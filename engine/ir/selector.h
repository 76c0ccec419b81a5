// The DFlash 2 selector walk's step (dflash.md §3.3) as every backend computes it (graph.h SelectorWalk,
// engine/spec's host walk): a candidate's energy in f64 with a fixed summation order, and the pick.
#pragma once

#include <cstdint>
#include <span>

namespace tandem::ir {

// Lanes of the energy's low-rank sum: the CUDA kernel's warp.
inline constexpr uint32_t kSelectorLanes = 32;

// softcap · tanh(multiplier · value / softcap), or multiplier · value for softcap 0, in f64.
double selector_cap(float value, float softcap, float multiplier);

// E = selector_cap(value) + Σ_j (pred[j] · sel[j]) · succ[j] over the rank, in f64 with every product and
// sum rounded once (no fused multiply-add): lane l of kSelectorLanes adds j = l, l + 32, ... in order, then
// an xor-butterfly (m = 16, 8, 4, 2, 1: lane l adds lane l ^ m) leaves the total in lane 0.
double selector_energy(float value, std::span<const float> pred, std::span<const float> sel,
                       std::span<const float> succ, float softcap, float multiplier);

// The pick among a row's energies: the first largest at temperature 0; else the first largest of
// E[k] / T − log(−log u_k), u_k = uniform_open(seed, position, kGumbel, k). q (energy.size() entries)
// gets softmax(E / T) (exp((E[k] − max) / T) over their sum, summed in k order), or zeros at temperature 0.
uint32_t selector_pick(std::span<const double> energy, float temperature, uint64_t seed, uint32_t position,
                       std::span<double> q);

}  // namespace tandem::ir
