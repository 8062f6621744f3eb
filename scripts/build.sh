#!/usr/bin/env bash
# Installs what is missing and builds h3serve and the h3 tool (no tests): the
# build step that scripts/serve.sh and the Dockerfiles (deploy/) share.
#
#   scripts/build.sh                        build into the preset's directory
#   scripts/build.sh --install PREFIX       then install: PREFIX/bin/h3serve,
#                                           PREFIX/bin/h3, PREFIX/lib/h3/ (the
#                                           sentencepiece module), stripped
#   scripts/build.sh --dir                  print the build directory, build nothing
#   H3_PRESET=cpu scripts/build.sh          another CMake preset (cpu, cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${H3_PRESET:-default}"
case "$preset" in
  default) build_dir=build ;;
  *) build_dir="build-$preset" ;;   # as binaryDir in CMakePresets.json
esac

prefix=""
case "${1:-}" in
  "") ;;
  --dir) echo "$build_dir"; exit 0 ;;
  --install)
    [ $# -eq 2 ] || { echo "build.sh: --install needs a PREFIX" >&2; exit 2; }
    prefix="$2" ;;
  *) echo "build.sh: unknown argument '$1' (see the comment at its top)" >&2; exit 2 ;;
esac

scripts/install-deps.sh
cmake --preset "$preset" -DH3_BUILD_TESTS=OFF >/dev/null
cmake --build --preset "$preset" --target h3serve h3 h3_sentencepiece_module
if [ -n "$prefix" ]; then
  cmake --install "$build_dir" --prefix "$prefix" --strip
fi
