#!/usr/bin/env bash
# Installs from Debian what h3serve needs, and does nothing (quietly, in well
# under a second) when everything is there.
#
#   scripts/install-deps.sh          build dependencies
#   scripts/install-deps.sh --test   build and test dependencies
#   scripts/install-deps.sh --print [--test]   list the packages, install nothing
#   scripts/install-deps.sh --check [--test]   exit 1 if any is missing
#
# The CUDA Toolkit is not a Debian package we install: when nvcc is present
# (PATH, $CUDACXX or /usr/local/cuda) the build uses it, otherwise it builds
# for the CPU only. Dockerfiles call this script too, so that the package list
# lives in one place.
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libabsl-dev                                   # Status, strings, containers
  libprotobuf-dev protobuf-compiler             # the API's messages
  libgrpc++-dev protobuf-compiler-grpc          # the API's service
  grpc-proto                                    # health/reflection .proto files
  prometheus-cpp-dev                            # /metrics
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
)

mode=install
with_test=0
for arg in "$@"; do
  case "$arg" in
    --test) with_test=1 ;;
    --print) mode=print ;;
    --check) mode=check ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

packages=("${build_packages[@]}")
if [ "$with_test" = 1 ]; then packages+=("${test_packages[@]}"); fi

if [ "$mode" = print ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${status:0:2}" = "ii" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
