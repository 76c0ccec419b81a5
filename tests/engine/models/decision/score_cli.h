// `tandem score` run in-process through CLI11 (launch/score_command.cpp), its stdout and stderr captured:
// shared by the CPU command test and the CUDA one.
#pragma once

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launch/commands.h"

namespace tandem::models::decision::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

inline CommandResult run_cli(std::vector<std::string> args) {
  CLI::App app{"tandem"};
  app.require_subcommand(1);
  CommandResult r;
  launch::add_score_command(app, r.exit_code);
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    r.exit_code = app.exit(e);
  }
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace tandem::models::decision::testing
