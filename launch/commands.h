// The tandem binary's subcommands. Each registers itself on the CLI11 app and sets `exit_code` when it
// runs: score (one batch on a decision model), generate (speculative decoding), serve (one rank of the MPI
// service), launch (the mpirun wrapper that starts a deployment from its YAML).
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::launch {

void add_score_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_serve_command(CLI::App& app, int& exit_code);
void add_launch_command(CLI::App& app, int& exit_code);

}  // namespace tandem::launch
