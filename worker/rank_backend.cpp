// make_rank_backend (batch_runner.h): a rank's YAML backend section as engine/backends options.
#include "engine/backends/backend_factory.h"
#include "worker/batch_runner.h"

namespace tandem::worker {

Result<std::unique_ptr<ir::Backend>> make_rank_backend(const config::Backend& backend) {
  backends::BackendOptions options;
  options.name = backend.name;
  options.precision = backend.precision;
  options.device = backend.device;
  options.threads = backend.threads;
  return backends::make_backend(options);
}

}  // namespace tandem::worker
