#!/usr/bin/env bash
# Run HERE (a Debian machine with apt), not on the GPU machine: downloads the
# Debian packages that the gpu-machine preset needs beyond CUDA and CMake
# (abseil, GoogleTest, nlohmann-json, CLI11, kissfft, OpenBLAS, libzip) and unpacks them under .device-deps/
# (git-ignored), ready to be carried to a GPU machine that has no apt and no
# network. See docs/gpu-machine.md for the commands to run there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  libabsl-dev libabsl20220623
  libgtest-dev libgmock-dev googletest
  nlohmann-json3-dev libcli11-dev
  libkissfft-dev libkissfft-float131
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5
  libzip-dev libzip4
)
root=.device-deps/root
rm -rf .device-deps
mkdir -p .device-deps/debs "$root"
(cd .device-deps/debs && apt-get download "${packages[@]}" >/dev/null 2>&1)
for deb in .device-deps/debs/*.deb; do dpkg -x "$deb" "$root"; done
rm -rf .device-deps/debs
# Only what a shared build needs: the device's working tree limit is 64 MiB.
find "$root" \( -name 'libopenblas*.a' -o -name 'liblapack*' \) -delete
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/src"
du -sh .device-deps | sed 's/^/carry: /'
