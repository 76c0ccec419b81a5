// tandem: entry point. `tandem score|generate|serve|launch ...`; see README.md for each command.
#include <cstdio>

#include "engine/core/log.h"
#include "launch/commands.h"

int main(int argc, char** argv) {
  // stdout carries each command's data (JSON) only: every log line goes to stderr, whatever logs it.
  tandem::log::init("tandem", "info");
  CLI::App app{"tandem: decision scoring and DFlash speculative decoding on CPUs and NVIDIA GPUs"};
  app.require_subcommand(1);
  int exit_code = 0;
  tandem::launch::add_score_command(app, exit_code);
  tandem::launch::add_generate_command(app, exit_code);
  tandem::launch::add_serve_command(app, exit_code);
  tandem::launch::add_launch_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
