// Process-wide logger setup.
#include "engine/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace tandem::log {

void init(std::string_view name, std::string_view level) {
  auto logger = spdlog::stderr_color_mt(std::string(name));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") lvl = spdlog::level::info;
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
}

}  // namespace tandem::log
