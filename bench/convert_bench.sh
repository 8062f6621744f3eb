#!/usr/bin/env bash
# Measures `h3 convert` on a large synthetic checkpoint (default h3-355m
# shapes, fp32: ~1.4 GB) in both input formats, and prints JSON with MB/s of
# checkpoint tensor bytes read. The page cache is dropped before each run when
# this process may (root, writable /proc/sys/vm/drop_caches); the JSON says
# whether it was ("cold_cache").
#
#   bench/convert_bench.sh [--preset h3-355m] [--dir /tmp/h3-convert-bench] [--h3 build/clients/h3]
#
# Needs /usr/bin/python3 with torch (apt-get install python3-torch) to make the
# checkpoint once; the files are kept in --dir for later runs.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=h3-355m
dir=/tmp/h3-convert-bench
h3=build/clients/h3
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --h3) h3=$2; shift 2 ;;
    *) echo "convert_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ ! -f "$dir/$preset.pt" ] || [ ! -f "$dir/$preset.safetensors" ]; then
  /usr/bin/python3 bench/make_synthetic.py --preset "$preset" --out "$dir" >&2
fi
drop_caches() {
  sync
  if [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    echo true
  else
    echo false
  fi
}
runs=()
for input in "$dir/$preset.pt" "$dir/$preset.safetensors"; do
  for dtype in fp16 fp32; do
    out="$dir/out-$dtype.h3"
    cold=$(drop_caches)
    start=$(date +%s.%N)
    summary=$("$h3" convert "$input" -o "$out" --preset "$preset" --dtype "$dtype" 2>&1)
    end=$(date +%s.%N)
    # "... read X MB, wrote Y MB in S s (R MB/s read)"
    read_mb=$(sed -E 's/.*read ([0-9.]+) MB, wrote.*/\1/' <<<"$summary")
    wrote_mb=$(sed -E 's/.*wrote ([0-9.]+) MB.*/\1/' <<<"$summary")
    secs=$(echo "$end - $start" | bc -l)
    mbps=$(echo "$read_mb / $secs" | bc -l)
    runs+=("$(printf '{"input": "%s", "dtype": "%s", "input_mb": %.1f, "output_mb": %.1f, "seconds": %.3f, "read_mb_per_s": %.0f, "cold_cache": %s}' \
      "$(basename "$input")" "$dtype" "$read_mb" "$wrote_mb" "$secs" "$mbps" "$cold")")
    rm -f "$out"
  done
done
# Raw sequential read speed of the disk, for comparison (dd, cold when possible).
cold=$(drop_caches)
dd_out=$(dd if="$dir/$preset.pt" of=/dev/null bs=16M 2>&1 | tail -1)
dd_mbps=$(sed -E 's/.*, ([0-9.]+) ([GM])B\/s.*/\1 \2/' <<<"$dd_out" | awk '{print ($2=="G") ? $1*1000 : $1}')
printf '{\n  "benchmark": "h3 convert",\n  "preset": "%s",\n  "commit": "%s",\n  "machine": "%s",\n  "dd_read_mb_per_s": %s,\n  "dd_cold_cache": %s,\n  "runs": [\n    %s\n  ]\n}\n' \
  "$preset" "$(git rev-parse --short HEAD)" \
  "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')" \
  "$dd_mbps" "$cold" "$(IFS=$'\n'; echo "${runs[*]}" | paste -sd, | sed 's/},{/},\n    {/g')"
