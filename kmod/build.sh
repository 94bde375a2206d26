#!/bin/sh
# Builds rdma_sroce.ko out of the source tree:
#   kmod/build.sh OUTDIR [KVER] [extra make args, e.g. C=2 for sparse]
# OUTDIR gets symlinks to the sources and Kbuild's objects; the module is
# OUTDIR/rdma_sroce.ko. Warnings are errors (W=1 included).
set -eu
src=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
kver=${1:-}
[ $# -gt 0 ] && shift
[ -n "$kver" ] || kver=$("$src/kver.sh")
mkdir -p "$out"
for f in "$src"/Kbuild "$src"/*.c "$src"/*.h; do
	ln -sf "$f" "$out/$(basename "$f")"
done
exec make -C "/lib/modules/$kver/build" M="$(cd "$out" && pwd)" \
	CONFIG_RDMA_SROCE=m SROCE_ABI_DIR="$src/../userspace/abi" \
	W=1 KCFLAGS=-Werror "$@" modules
