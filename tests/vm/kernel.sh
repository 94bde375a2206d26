#!/bin/sh
# Fetches and unpacks Debian's kernel for the VM tests, once:
#   tests/vm/kernel.sh CACHE_DIR KVER
# prints the unpacked root (CACHE_DIR/kimg-KVER), which holds
# boot/vmlinuz-KVER and lib/modules/KVER (with depmod run). The package is
# downloaded with apt-get (linux-image-KVER-unsigned, else the signed one)
# and kept in CACHE_DIR, so later runs work offline.
set -eu
cache=$1
kver=$2
root="$cache/kimg-$kver"
mkdir -p "$cache"
if [ ! -f "$root/.done" ]; then
	deb=$(ls "$cache"/linux-image-"$kver"-unsigned_*.deb "$cache"/linux-image-"$kver"_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		(cd "$cache" && { apt-get download "linux-image-$kver-unsigned" >&2 ||
			apt-get download "linux-image-$kver" >&2; }) || {
			echo "kernel.sh: cannot download linux-image-$kver (network? apt-get update?)" >&2
			exit 1
		}
		deb=$(ls "$cache"/linux-image-"$kver"*.deb | head -n1)
	fi
	rm -rf "$root"
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	depmod -b "$root" "$kver"
	touch "$root/.done"
fi
echo "$root"
