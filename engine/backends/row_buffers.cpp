// Row buffers by backend (row_buffers.h).
#include "engine/backends/row_buffers.h"

#include "engine/cpu/cpu_backend.h"
#if TANDEM_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace tandem::backends {

Result<std::unique_ptr<ir::RowBuffer>> make_row_buffer(ir::Backend& backend, uint32_t rows, uint32_t width,
                                                       ir::Storage storage) {
  if (backend.caps().name == "cpu") return cpu::make_cpu_row_buffer(backend, rows, width, storage);
#if TANDEM_HAVE_CUDA
  if (backend.caps().name == "cuda") return cuda::make_cuda_row_buffer(backend, rows, width, storage);
#endif
  return Error::make(ErrorKind::kUnsupported, "the {} backend keeps no row buffers", backend.caps().name);
}

}  // namespace tandem::backends
