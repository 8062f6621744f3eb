#!/usr/bin/env bash
# Packs a CUDA build into one archive for a GPU machine that has CUDA and
# PyTorch but no apt and no network; scripts/gpu-check.sh, inside it, runs
# every GPU test and benchmark there (docs/gpu-machine.md).
#
#   scripts/gpu-pack.sh [options] [BUILD_DIR] [OUT.tar.xz]
#
#   BUILD_DIR        default build-pack. Without a CMakeCache.txt it is
#                    configured (CUDA, tests, RelWithDebInfo, --arch); then
#                    the target h3_gpu_check is built (cmake/H3GpuCheck.cmake)
#   OUT.tar.xz       default out/h3-gpu.tar.xz
#   --arch LIST      CUDA architectures (default 90a-real: H100, H200); given,
#                    it also reconfigures an existing BUILD_DIR
#   --no-build       take BUILD_DIR as it is
#   --max-mb N       refuse, writing nothing, when the archive would pass N MB
#                    (10^6 bytes; default 40: the device takes 64 MiB of
#                    working tree with the sources)
#   --only NAMES     pack only these programs (comma-separated file names,
#                    e.g. h3; the packer's test packs a CPU-side program)
#   --xz-level N     xz preset, 0-9 (default 6)
#   --keep-debug     keep the programs' debug information (default: strip it,
#                    keeping the symbols)
#
# The archive holds one folder, h3-gpu/:
#   MANIFEST.json        commit, build type, CUDA architectures and version,
#                        every file with its size, the libraries and where
#                        they came from, what the machine must supply
#   build/...            the programs at their build-tree paths (the bench
#                        scripts and the sentencepiece module's lookup rely on
#                        them), build/gpu_check_files.txt relative to build/
#   lib/                 every library `ldd` lists for them except glibc's
#                        (they must match the machine's libc) and CUDA's (the
#                        machine's driver and toolkit supply them)
#   scripts/gpu-check.sh, bench/*.py, tests/reference/*.py
#   engine/testdata/...  the data the packed tests declare (h3_cc_test DATA)
# Exit status: 0; 1 when refused or failed; 2 on bad arguments.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "gpu-pack.sh: $2" >&2; exit "$1"; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

arch=""
build_it=1
max_mb=40
only=""
level=6
strip_debug=1
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) [ $# -ge 2 ] || die 2 "--arch needs a value"; arch=$2; shift 2 ;;
    --no-build) build_it=0; shift ;;
    --max-mb) [ $# -ge 2 ] || die 2 "--max-mb needs a value"; max_mb=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || die 2 "--only needs a value"; only=$2; shift 2 ;;
    --xz-level) [ $# -ge 2 ] || die 2 "--xz-level needs a value"; level=$2; shift 2 ;;
    --keep-debug) strip_debug=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die 2 "unknown option '$1' (try --help)" ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ ${#positional[@]} -le 2 ] || die 2 "at most BUILD_DIR and OUT.tar.xz (try --help)"
[[ $max_mb =~ ^[0-9]+([.][0-9]+)?$ ]] || die 2 "--max-mb wants a number of MB, not '$max_mb'"
[[ $level =~ ^[0-9]$ ]] || die 2 "--xz-level wants 0-9, not '$level'"
build=$(realpath -m "${positional[0]:-$src/build-pack}")
out=$(realpath -m "${positional[1]:-$src/out/h3-gpu.tar.xz}")

if [ "$build_it" = 1 ]; then
  configure=(cmake -S "$src" -B "$build" -DH3_WITH_CUDA=ON -DH3_BUILD_TESTS=ON)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    "${configure[@]}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CUDA_ARCHITECTURES=${arch:-90a-real}" >/dev/null
  elif [ -n "$arch" ]; then
    "${configure[@]}" "-DCMAKE_CUDA_ARCHITECTURES=$arch" >/dev/null
  fi
  cmake --build "$build" --target h3_gpu_check
fi

list=$build/gpu_check_files.txt
[ -f "$list" ] || die 1 "no $list: configure $build with this tree (or drop --no-build)"
fact() { awk -v k="$1" '$1 == k { sub(/^[^ ]+ ?/, ""); print; exit }' "$list"; }
with_cuda=$(fact with_cuda)
source_dir=$(fact source_dir)
if [ "$with_cuda" != ON ] && [ -z "$only" ]; then
  die 1 "$build is not a CUDA build (H3_WITH_CUDA=$with_cuda): nothing in it for a GPU"
fi

# The programs: "kind path" lines, less those --only leaves out.
programs=()
while read -r kind path; do
  case "$kind" in tool|bench|module|test) ;; *) continue ;; esac
  if [ -n "$only" ] && [[ ",$only," != *",$(basename "$path"),"* ]]; then continue; fi
  [ -f "$path" ] || die 1 "$path is missing: build it (or drop --no-build)"
  case "$path" in "$build"/*) ;; *) die 1 "$path is outside $build" ;; esac
  programs+=("$kind ${path#"$build"/}")
done <"$list"
[ ${#programs[@]} -gt 0 ] || die 1 "nothing to pack (--only '$only' names no program of $list)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/h3-gpu-pack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/h3-gpu
mkdir -p "$stage/build" "$stage/lib"
: >"$tmp/files.tsv"     # kind <tab> archive path <tab> origin

# glibc's libraries must come from the machine (they are one set with its
# libc); so must CUDA's (its driver, toolkit and PyTorch). Everything else
# ldd lists travels.
glibc_re='^(ld-linux.*|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libthread_db|libnss_[a-z0-9_]+)\.so'
cuda_re='^lib(cuda|cudart|cufft|cufftw|cublas|cublasLt|curand|cusolver|cusparse|nvrtc|nvrtc-builtins|nvJitLink|nvidia-[a-z-]+|cupti|nvToolsExt)\.so'
declare -A libs=() machine_libs=()
for entry in "${programs[@]}"; do
  kind=${entry%% *}
  rel=${entry#* }
  dest=$stage/build/$rel
  mkdir -p "$(dirname "$dest")"
  if [ "$strip_debug" = 1 ]; then
    strip --strip-debug -o "$dest" "$build/$rel"
    chmod --reference="$build/$rel" "$dest"
  else
    cp "$build/$rel" "$dest"
  fi
  printf '%s\tbuild/%s\t%s\n' "$kind" "$rel" "$build/$rel" >>"$tmp/files.tsv"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [[ $name =~ $glibc_re ]]; then continue; fi
    if [[ $name =~ $cuda_re ]]; then machine_libs[$name]=1; continue; fi
    [ "$path" != not ] || die 1 "ldd $rel: $name not found"
    libs[$name]=$path
  done < <(LC_ALL=C ldd "$build/$rel")
done
if [ "$with_cuda" = ON ]; then
  # kernels/cuda/cublaslt_api.cc opens cuBLASLt at run time (no ldd line).
  machine_libs["libcublasLt.so.$(fact cuda_version | cut -d. -f1)"]=1
fi
for name in "${!libs[@]}"; do
  cp -L "${libs[$name]}" "$stage/lib/$name"
  printf 'library\tlib/%s\t%s\n' "$name" "${libs[$name]}" >>"$tmp/files.tsv"
done

# The newest glibc symbol version anything packed needs: the machine's
# glibc must be at least that (gpu-check.sh compares).
glibc_required=$( { find "$stage/build" "$stage/lib" -type f -exec objdump -T {} + 2>/dev/null ||
                    true; } | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' |
                  sort -uV | tail -1)

# What the test does after unpacking, here before packing: h3 runs with the
# packed libraries and only LD_LIBRARY_PATH.
if [ -x "$stage/build/clients/h3" ]; then
  env -i "LD_LIBRARY_PATH=$stage/lib" "$stage/build/clients/h3" --version >/dev/null ||
    die 1 "the packed h3 does not run with LD_LIBRARY_PATH=lib/ alone"
fi

# Scripts, benchmark drivers, and the data the packed tests declare.
sources=(scripts/gpu-check.sh
         bench/table4_bench.py bench/table4_floor.py bench/torch_h3.py bench/torch_gpt2.py
         bench/flashconv_bench.py bench/serve_vs_offline.py bench/report.py
         bench/h3serve_process.py bench/engine_breakdown.py
         tests/reference/h3_reference.py tests/reference/make_checkpoints.py)
packed_tests=" $(printf '%s\n' "${programs[@]}" | awk '$1 == "test" { print $2 }' | tr '\n' ' ')"
while read -r kind rel owner; do
  [ "$kind" = data ] || continue
  # Only the data of a test that is packed (data lines name their test).
  [[ $packed_tests == *" ${owner#"$build"/} "* ]] || continue
  sources+=("$rel")
done <"$list"
for rel in $(printf '%s\n' "${sources[@]}" | sort -u); do
  [ -e "$source_dir/$rel" ] || die 1 "$source_dir/$rel is missing"
  mkdir -p "$stage/$(dirname "$rel")"
  cp -rL "$source_dir/$rel" "$stage/$rel"
  kind=script
  case "$rel" in scripts/* | bench/* | tests/reference/*) ;; *) kind=data ;; esac
  printf '%s\t%s\t%s\n' "$kind" "$rel" "$source_dir/$rel" >>"$tmp/files.tsv"
done

# build/gpu_check_files.txt, relative to build/ and with the commit.
commit=unknown
dirty=null
if commit=$(git -C "$source_dir" rev-parse HEAD 2>/dev/null); then
  if [ -n "$(git -C "$source_dir" status --porcelain --untracked-files=no)" ]; then
    dirty=true
  else
    dirty=false
  fi
else
  commit=unknown
fi
{
  echo "commit $commit"
  for key in build_type with_cuda cuda_architectures cuda_version; do
    echo "$key $(fact "$key")"
  done
  echo "glibc_required $glibc_required"
  for name in "${!machine_libs[@]}"; do echo "machine_library $name"; done | sort
  printf '%s\n' "${programs[@]}"
} >"$stage/build/gpu_check_files.txt"

H3_PACK_COMMIT=$commit H3_PACK_DIRTY=$dirty H3_PACK_STAGE=$stage H3_PACK_BUILD=$build \
H3_PACK_LIST=$stage/build/gpu_check_files.txt H3_PACK_FILES=$tmp/files.tsv \
H3_PACK_STRIPPED=$strip_debug H3_PACK_MAX_MB=$max_mb \
python3 - <<'EOF'
import datetime, json, os

env = os.environ
stage = env["H3_PACK_STAGE"]
facts, machine = {}, []
with open(env["H3_PACK_LIST"]) as f:
    for line in f:
        key, _, value = line.rstrip("\n").partition(" ")
        if key == "machine_library":
            machine.append(value)
        elif key not in ("tool", "bench", "module", "test"):
            facts[key] = value


def size(path):
    full = os.path.join(stage, path)
    if os.path.isfile(full):
        return os.path.getsize(full)
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(full)
               for n in names)


entries = []
with open(env["H3_PACK_FILES"]) as f:
    for line in f:
        kind, path, origin = line.rstrip("\n").split("\t")
        entries.append(dict(kind=kind, path=path, origin=origin, bytes=size(path)))
entries.sort(key=lambda e: (e["kind"], e["path"]))
unpacked = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(stage)
               for n in names)
manifest = dict(
    format="h3serve gpu-pack 1",
    commit=facts.get("commit"), dirty=json.loads(env["H3_PACK_DIRTY"]),
    packed=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    build=dict(dir=env["H3_PACK_BUILD"], type=facts.get("build_type"),
               cuda=facts.get("with_cuda") == "ON", cuda_version=facts.get("cuda_version"),
               cuda_architectures=[a for a in facts.get("cuda_architectures", "").split(",") if a],
               debug_info="kept" if env["H3_PACK_STRIPPED"] == "0" else "stripped"),
    glibc_required=facts.get("glibc_required"),
    machine_libraries=machine,
    files=entries,
    bytes=dict(unpacked=unpacked, **{k: sum(e["bytes"] for e in entries if e["kind"] == k)
                                     for k in sorted({e["kind"] for e in entries})}),
    max_archive_mb=float(env["H3_PACK_MAX_MB"]),
    check="h3-gpu/scripts/gpu-check.sh OUT_DIR (docs/gpu-machine.md)")
with open(os.path.join(stage, "MANIFEST.json"), "w") as f:
    f.write(json.dumps(manifest, indent=1) + "\n")
EOF

mkdir -p "$(dirname "$out")"
tar -C "$tmp" --sort=name --owner=0 --group=0 --numeric-owner -cf - h3-gpu |
  xz -T0 "-$level" >"$tmp/archive.tar.xz"
bytes=$(stat -c %s "$tmp/archive.tar.xz")
unpacked=$(du -sb "$stage" | cut -f1)
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
if awk -v b="$bytes" -v m="$max_mb" 'BEGIN { exit !(b > m * 1e6) }'; then
  {
    echo "gpu-pack.sh: refused: the archive would be $(mb "$bytes"), over --max-mb $max_mb" \
         "($(mb "$unpacked") unpacked); nothing written. The largest files:"
    find "$stage" -type f -printf '%s %P\n' | sort -rn | head -8 |
      while read -r b p; do echo "  $(mb "$b")  $p"; done
  } >&2
  exit 1
fi
mv "$tmp/archive.tar.xz" "$out"
note=""
[ "$dirty" != true ] || note=" (dirty: commit first)"
echo "gpu-pack.sh: $out: $(mb "$bytes") ($(mb "$unpacked") unpacked;" \
     "${#programs[@]} programs, ${#libs[@]} libraries; commit ${commit:0:12}$note);" \
     "the limit is $max_mb MB"
