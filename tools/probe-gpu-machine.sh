#!/usr/bin/env bash
# Prints what the GPU machine offers for building tandem (headers, libraries, versions).
set -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
nvcc --version | tail -2; g++ --version | head -1; cmake --version | head -1
for h in pcre2.h unicode/normalizer2.h yaml-cpp/yaml.h spdlog/spdlog.h fmt/format.h nlohmann/json.hpp CLI/CLI.hpp \
         boost/beast.hpp gtest/gtest.h benchmark/benchmark.h nccl.h mpi.h; do
  f=$(find /usr/include /usr/local/include /usr/local/cuda/include /usr/lib/x86_64-linux-gnu/openmpi/include -name "$(basename $h)" -path "*$h" 2>/dev/null | head -1)
  echo "header $h: ${f:-MISSING}"
done
ls /usr/lib/x86_64-linux-gnu/ | grep -E "libpcre2-8|libicuuc|libyaml-cpp|libspdlog|libfmt|libgtest|libbenchmark|libnccl" | tr '\n' ' '; echo
grep -h "define SPDLOG_VER\|define FMT_VERSION" -r /usr/include/spdlog/version.h /usr/include/fmt/core.h /usr/include/fmt/base.h 2>/dev/null
grep -rh "SPDLOG_FMT_EXTERNAL" /usr/include/spdlog/tweakme.h /usr/lib/x86_64-linux-gnu/cmake/spdlog/*.cmake 2>/dev/null | head -3
ls /usr/lib/x86_64-linux-gnu/cmake/ | tr '\n' ' '; echo
python3 -c "import torch, transformers, tokenizers, safetensors; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
which mpirun mpicxx; mpirun --version | head -1
