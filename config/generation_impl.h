// The deployment's generation parts (config.h Generation, Rank::target): the `generation` section and
// the pairing of drafter ranks with their targets. Internal to config/ (load_deployment.cpp).
#pragma once

#include <vector>

#include "config/config.h"
#include "config/yaml_map_impl.h"

namespace tandem::config {

// The `generation` mapping (defaults when absent).
Result<Generation> read_generation(YamlMap& top);
// A drafter rank's `target` key: the rank it drafts for, given or the nearest target rank before it.
// `ranks` holds the ranks before this one.
Result<int> read_drafter_target(YamlMap& rank, const YAML::Node& node, const std::vector<Rank>& ranks);
// What spans sections: a `generation` section needs a rank that runs a target.
Status check_generation(const Deployment& d, YamlMap& top);

}  // namespace tandem::config
