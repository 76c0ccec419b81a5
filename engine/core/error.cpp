// ErrorKind names, for logs and for the HTTP error "type" field.
#include "engine/core/error.h"

namespace tandem {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kFormat: return "format";
    case ErrorKind::kShape: return "shape";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kDevice: return "device";
    case ErrorKind::kCapacity: return "capacity";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kCancelled: return "cancelled";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace tandem
