#!/usr/bin/env bash
# Installs tandem's build and test dependencies on Debian 12 with apt-get (skips what is present).
# The CUDA backend is built too when a CUDA toolkit is at /usr/local/cuda (not a Debian package).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libopenmpi-dev openmpi-bin libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  curl python3
  iproute2 util-linux hostname
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
