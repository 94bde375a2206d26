#!/bin/sh
# Prints the kernel release of Debian's linux-headers-amd64 (the kernel the
# module is built for and tested on), e.g. 6.1.0-56-amd64. The running kernel
# does not matter: it may be another one entirely.
set -eu
dep=$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null || true)
ver=$(printf '%s\n' "$dep" | sed -n 's/.*linux-headers-\([0-9][^ ,]*-amd64\).*/\1/p' | head -n1)
if [ -z "$ver" ]; then
	echo "kver.sh: linux-headers-amd64 is not installed (make deps)" >&2
	exit 1
fi
if [ ! -d "/lib/modules/$ver/build" ]; then
	echo "kver.sh: /lib/modules/$ver/build is missing (reinstall linux-headers-$ver)" >&2
	exit 1
fi
echo "$ver"
