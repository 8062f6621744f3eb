#!/usr/bin/env bash
# Gives the local Docker engine the Debian 12 images that deploy/Dockerfile.cpu
# and deploy/prometheus/Dockerfile start from, debian:bookworm and
# debian:bookworm-slim, when no registry can: each is taken, in this order,
# from the engine itself, a pull, a tarball cached by an earlier run, or made
# here with mmdebstrap from Debian's mirror and imported (`docker import`).
#
#   scripts/deploy-base-images.sh      as root; prints where each image came from
#
# Environment: H3_DEPLOY_CACHE (default /var/cache/h3-deploy) keeps the
# tarballs between runs; without it (or unwritable) nothing is cached and the
# images are made again. H3_DEBIAN_MIRROR (default http://deb.debian.org/debian)
# and H3_DEBIAN_SECURITY (default http://deb.debian.org/debian-security).
# DOCKER names the docker client (default: docker).
#
# Both are mmdebstrap's minbase variant (what Debian's official images are
# made from) with the bookworm, bookworm-updates and bookworm-security
# sources; the slim one leaves out manuals, documentation and translations,
# as the official slim image does.
set -euo pipefail
docker=${DOCKER:-docker}
cache=${H3_DEPLOY_CACHE:-/var/cache/h3-deploy}
mirror=${H3_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${H3_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

slim_options=(
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
)

# make_tarball TAG FILE: a root file system for TAG, written to FILE.
make_tarball() {
  local tag=$1 file=$2 options=()
  [ "$tag" = debian:bookworm-slim ] && options=("${slim_options[@]}")
  if ! command -v mmdebstrap >/dev/null; then
    echo "deploy-base-images.sh: mmdebstrap is missing (apt-get install mmdebstrap)" >&2
    return 1
  fi
  mmdebstrap --quiet --variant=minbase "${options[@]}" bookworm "$file" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main"
}

# one TAG: makes sure the engine has TAG; prints where it came from.
one() {
  local tag=$1 name=${1#debian:} file tmp
  if "$docker" image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag: already in the engine"; return 0
  fi
  if timeout 60 "$docker" pull -q "$tag" >/dev/null 2>&1; then
    echo "$tag: pulled"; return 0
  fi
  file="$cache/$name.tar"
  if [ ! -s "$file" ]; then
    tmp=$(mktemp -d /tmp/h3-base-image.XXXXXX)
    make_tarball "$tag" "$tmp/$name.tar" || { rm -rf "$tmp"; return 1; }
    if mkdir -p "$cache" 2>/dev/null && mv "$tmp/$name.tar" "$file.part" 2>/dev/null; then
      mv "$file.part" "$file"
    else
      file="$tmp/$name.tar"            # no cache: import from the temporary copy
    fi
    echo "$tag: made with mmdebstrap ($(du -m "$file" | cut -f1) MiB)"
  else
    echo "$tag: from the cached $file"
  fi
  "$docker" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$file" "$tag" >/dev/null
  [ -z "${tmp:-}" ] || rm -rf "$tmp"
}

for tag in debian:bookworm debian:bookworm-slim; do
  one "$tag"
done
