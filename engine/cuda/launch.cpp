// Enqueueing one recorded kernel launch.
#include "engine/cuda/check_impl.h"
#include "engine/cuda/modules_impl.h"
#include "engine/cuda/steps_impl.h"

namespace tandem::cuda {

Status launch(const KernelModules& modules, const KernelStep& step, cudaStream_t stream) {
  const KernelInfo& info = kernel_info(step.id);
  if (info.args_index != step.args.index()) {
    return Error::make(ErrorKind::kInternal, "{}: {} takes argument pack #{}, the step holds #{}", step.label,
                       info.entry, info.args_index, step.args.index());
  }
  KernelArgs args = step.args;  // cudaLaunchKernel wants mutable parameter pointers
  void* pack = std::visit([](auto& a) -> void* { return &a; }, args);
  void* params[] = {pack};
  // INVARIANT: the pack is the entry's own struct (checked above), and lowering sized every buffer it
  // points to for the bucket; kernels touch rows below the index header's real counts only.
  // Dynamic shared memory beyond 48 KB was granted when the modules loaded (launchable()).
  const void* kernel = static_cast<const void*>(modules.kernel(step.id));
  cudaError_t st = cudaSuccess;
  if (step.overlap_prior) {
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = step.grid;
    config.blockDim = step.block;
    config.dynamicSmemBytes = step.smem;
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = 1;
    st = cudaLaunchKernelExC(&config, kernel, params);
  } else {
    st = cudaLaunchKernel(kernel, step.grid, step.block, params, step.smem, stream);
  }
  if (st != cudaSuccess) {
    return cuda_error(st, step.overlap_prior ? "cudaLaunchKernelExC" : "cudaLaunchKernel", __FILE__, __LINE__)
        .context(fmt::format("{} ({}, grid {}x{}, block {}, {} B shared)", step.label, info.entry, step.grid.x,
                             step.grid.y, step.block.x, step.smem));
  }
  return {};
}

}  // namespace tandem::cuda
