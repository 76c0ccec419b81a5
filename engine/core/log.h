// Logging through spdlog: one logger per process, named after its rank's role.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace tandem::log {

// Sets the process-wide logger's pattern ("[time] [name] [level] message") and level
// ("trace".."off"); an unknown level keeps "info".
void init(std::string_view name, std::string_view level);

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;

}  // namespace tandem::log
