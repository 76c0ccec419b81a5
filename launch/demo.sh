#!/usr/bin/env bash
# The main job on the embedded default: installs dependencies, builds tandem, and scores the sample
# questions in models/decision-tickets/sample.json with the shipped decision model on the CPU backend.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-debian.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target tandem
./build/launch/tandem score --model models/decision-tickets --input models/decision-tickets/sample.json --backend cpu
