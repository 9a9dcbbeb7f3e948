#!/bin/sh
# Build the sluice gate image from a static sluice binary.
#
#   docker/build-image.sh [BINARY [TAG]]
#
# BINARY defaults to build/static/sluice (make static), TAG to
# localhost/sluice-gate:latest. The build context is staged in $STAGE
# (default build/image): the stripped binary, the public suffix list, the
# default config and the empty directories. Then docker/Containerfile is built
# with $ENGINE (podman if it is installed, else docker) and the image size is
# printed; an image of 5 MB or more is an error.
#
# `make image` runs this; so does tests/e2e/test_container.py, with its own
# CONTAINERS_CONF and storage.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
bin=${1:-$repo/build/static/sluice}
tag=${2:-localhost/sluice-gate:latest}
stage=${STAGE:-$repo/build/image}
psl=${PSL_DAFSA:-/usr/share/publicsuffix/public_suffix_list.dafsa}
max_bytes=${MAX_IMAGE_BYTES:-5000000}

if [ -z "${ENGINE:-}" ]; then
    if command -v podman >/dev/null 2>&1; then ENGINE=podman
    elif command -v docker >/dev/null 2>&1; then ENGINE=docker
    else echo "build-image: neither podman nor docker is installed" >&2; exit 1; fi
fi

[ -x "$bin" ] || { echo "build-image: $bin is missing: run make static" >&2; exit 1; }
if readelf -lW "$bin" | grep -q 'program interpreter'; then
    echo "build-image: $bin is dynamically linked; the image has no libc: use make static" >&2
    exit 1
fi
[ -r "$psl" ] || { echo "build-image: $psl is missing (Debian package publicsuffix)" >&2; exit 1; }

rm -rf "$stage"
mkdir -p "$stage/allowlist.d" "$stage/log"
strip -o "$stage/sluice" "$bin"
chmod 0555 "$stage/sluice"
cp "$psl" "$stage/public_suffix_list.dafsa"
cp "$here/sluice.ini" "$stage/sluice.ini"
chmod 0444 "$stage/public_suffix_list.dafsa" "$stage/sluice.ini"
chmod 0755 "$stage/allowlist.d"
chmod 0750 "$stage/log"

# FROM scratch: nothing is pulled; podman is told so explicitly.
pull=""
[ "$(basename "$ENGINE")" = podman ] && pull="--pull=never"
# shellcheck disable=SC2086
"$ENGINE" build $pull -q -f "$here/Containerfile" -t "$tag" "$stage" >/dev/null

size=$("$ENGINE" image inspect --format '{{.Size}}' "$tag")
echo "image $tag: $size bytes ($(( (size + 512) / 1024 )) KiB)"
if [ "$size" -ge "$max_bytes" ]; then
    echo "build-image: $tag is $size bytes, over the limit of $max_bytes" >&2
    exit 1
fi
