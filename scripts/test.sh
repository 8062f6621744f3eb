#!/usr/bin/env bash
# Installs what is missing, builds everything (with CUDA when nvcc is found)
# and runs every test. GPU tests skip, and say so, without a GPU.
#
#   scripts/test.sh                 all tests
#   scripts/test.sh -L unit         ctest arguments pass through (-L e2e, -R Server, ...)
#   H3_PRESET=cpu scripts/test.sh   another CMake preset (cpu, cuda)
#   H3_DEPLOY_TESTS=ON scripts/test.sh   also build and run the Docker images
#                                   (label deploy, scripts/deploy-check.sh, as root)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${H3_PRESET:-default}"

scripts/install-deps.sh --test
cmake --preset "$preset" -DH3_BUILD_TESTS=ON \
  -DH3_DEPLOY_TESTS="${H3_DEPLOY_TESTS:-OFF}" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
