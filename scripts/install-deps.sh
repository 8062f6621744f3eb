#!/usr/bin/env bash
# Installs from Debian what h3serve needs, and does nothing (quietly, in well
# under a second) when everything is there.
#
#   scripts/install-deps.sh             build dependencies
#   scripts/install-deps.sh --test      build and test dependencies
#   scripts/install-deps.sh --runtime   only the shared libraries that h3serve
#                                       and h3 load at run time (for images)
#   scripts/install-deps.sh --print [--test | --runtime]   list, install nothing
#   scripts/install-deps.sh --check [--test | --runtime]   exit 1 if any is missing
#
# The CUDA Toolkit is not a Debian package we install: when nvcc is present
# (PATH, $CUDACXX or /usr/local/cuda) the build uses it, otherwise it builds
# for the CPU only. The Dockerfiles (deploy/) call this script for both their
# build and runtime stages, so that the package lists live here only. The
# build and test lists have the same names on Debian 12 and Ubuntu 24.04 (the
# CUDA images' base); runtime library names differ, so there is one runtime
# list per release.
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev                                   # Status, strings, containers
  libprotobuf-dev protobuf-compiler             # the API's messages
  libgrpc++-dev protobuf-compiler-grpc          # the API's service
  grpc-proto                                    # health/reflection .proto files
  prometheus-cpp-dev                            # /metrics
  libcpp-httplib-dev                            # the OpenAI-compatible HTTP API
  libcli11-dev                                  # command-line flags
  nlohmann-json3-dev                            # JSON (model metadata, CLI)
  libzip-dev                                    # PyTorch checkpoints are zips
  libsentencepiece-dev                          # sentencepiece tokenizers
  libre2-dev                                    # GPT-2 pre-tokenizer
  libopenblas-dev                               # CPU matrix products
  libkissfft-dev                                # CPU FFTs
)
test_packages=(
  libgtest-dev libgmock-dev                     # GoogleTest / GoogleMock
  python3-grpcio python3-protobuf               # clients/python and its test
  bible-kjv                                     # the default model's held-out text
  prometheus python3-yaml                       # tests/deploy: scrape h3serve, read manifests
  xz-utils                                      # scripts/gpu-pack.sh and its test
  openssl                                       # server_tls_test's certificates
  clang libclang-rt-dev                         # libFuzzer targets (scripts/fuzz.sh, ctest fuzz_smoke)
)
# What the binaries load (ldd h3serve h3 lib/h3/*.so, less the C and C++
# runtimes every base image has); their own dependencies come with them.
# tests/deploy/dockerfiles_test.py checks the Debian 12 list against ldd.
runtime_packages_bookworm=(
  libabsl20220623 libprotobuf32 libgrpc29 libgrpc++1.51
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libzip4 libre2-9 libsentencepiece0 libopenblas0-pthread libkissfft-float131
  libcpp-httplib0.11
)
runtime_packages_noble=(                        # Ubuntu 24.04: the 64-bit time_t renames
  libabsl20220623t64 libprotobuf32t64 libgrpc29t64 libgrpc++1.51t64
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libzip4t64 libre2-10 libsentencepiece0 libopenblas0-pthread libkissfft-float131
  libcpp-httplib0.14t64
)

mode=install
list=build
for arg in "$@"; do
  case "$arg" in
    --test|--runtime)
      if [ "$list" != build ]; then
        echo "install-deps.sh: --test and --runtime exclude each other" >&2; exit 2
      fi
      list=${arg#--} ;;
    --print) mode=print ;;
    --check) mode=check ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

case "$list" in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  runtime)
    release=$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")
    case "$release" in
      bookworm) packages=("${runtime_packages_bookworm[@]}") ;;
      noble) packages=("${runtime_packages_noble[@]}") ;;
      *) echo "install-deps.sh: no runtime package list for '$release'" \
              "(Debian 12 bookworm and Ubuntu 24.04 noble have one)" >&2
         exit 1 ;;
    esac ;;
esac

if [ "$mode" = print ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# The deploy tests' offline Kubernetes schema validator: npm packages pinned
# in tests/deploy/node/package-lock.json, installed with the machine's
# Node.js and npm (Debian's nodejs and npm where there are none).
node_dir="$(dirname "$0")/../tests/deploy/node"
if [ "$list" = test ] && [ -f "$node_dir/package-lock.json" ]; then
  command -v npm >/dev/null || packages+=(nodejs npm)
fi
install_node_tools() {
  [ "$list" = test ] && [ "$mode" = install ] && [ -f "$node_dir/package-lock.json" ] || return 0
  [ "$node_dir/node_modules/.package-lock.json" -nt "$node_dir/package-lock.json" ] && return 0
  echo "Installing the npm packages of tests/deploy/node (npm ci)"
  npm ci --prefix "$node_dir" --no-audit --no-fund --loglevel=error >/dev/null
}

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${status:0:2}" = "ii" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  install_node_tools
  exit 0
fi

if [ "$mode" = check ]; then
  echo "missing Debian packages: ${missing[*]}" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "install-deps.sh: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "Installing ${#missing[@]} Debian packages: ${missing[*]}"
log=$(mktemp /tmp/h3-install-deps.XXXXXX.log)
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo[@]}" apt-get update -q &&
       "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
       >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "install-deps.sh: apt-get failed; the whole log is $log" >&2
  exit 1
fi
rm -f "$log"
install_node_tools
