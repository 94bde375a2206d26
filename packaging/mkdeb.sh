#!/bin/bash
# mkdeb.sh BUILD_DIR OUT_DIR: the Debian package of sroce from a built tree (`make deb`).
#
# Stages `cmake --install BUILD_DIR --prefix /usr` (docs/clients.md lists what that installs),
# strips the binaries, adds what Debian policy wants of a package (copyright, changelog,
# conffiles, md5sums, maintainer scripts: DKMS for the module, systemd for the daemon),
# computes Depends with dpkg-shlibdeps, builds OUT_DIR/sroce_VERSION_amd64.deb with
# dpkg-deb, and runs lintian on it (its findings are printed; an error-level finding fails;
# SROCE_MKDEB_LINTIAN=0 skips it, as the install test does: lintian takes minutes here).
# Prints the package's path on the last line.
set -euo pipefail
build=$(readlink -f "$1")
out=$(readlink -f "$2")
here=$(dirname "$(readlink -f "$0")")
top=$(readlink -f "$here/..")
version=$(sed -n 's/^project(sroce VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
debver=$version-1
stage=$out/deb/sroce
rm -rf "$out/deb"
mkdir -p "$stage/DEBIAN"

DESTDIR=$stage cmake --install "$build" --prefix /usr >"$out/deb/install.log"

# Binaries and shared objects: strip (also an ASan tree's: the package is for installing).
find "$stage/usr" -type f \( -perm -u+x -o -name '*.so' \) -exec sh -c \
  'file -b "$1" | grep -q "ELF 64-bit LSB" && file -b "$1" | grep -q x86-64 &&
   strip --strip-unneeded --remove-section=.comment --remove-section=.note "$1"' _ {} \;
find "$stage/usr/lib" -name '*.so' -exec chmod 0644 {} +

doc=$stage/usr/share/doc/sroce
mkdir -p "$doc"
cat >"$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: sroce
Comment: a software RoCEv2 transport stack (sroced, libsroce, rdma_sroce.ko)

Files: *
Copyright: 2026 the sroce developers
License: MIT

Files: usr/src/rdma-sroce-*/*
Copyright: 2026 the sroce developers
License: GPL-2.0 or MIT
 The kernel module's sources carry SPDX-License-Identifier: GPL-2.0 OR MIT.
 On Debian systems the GPL-2.0 is in /usr/share/common-licenses/GPL-2.

License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a copy of this
 software and associated documentation files (the "Software"), to deal in the Software
 without restriction, including without limitation the rights to use, copy, modify, merge,
 publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
 to whom the Software is furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in all copies or
 substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
COPY
printf 'sroce (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- sroce developers <sroce-dev@example.org>  %s\n' \
  "$debver" "$(git -C "$top" describe --always --dirty 2>/dev/null || echo source)" \
  "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(date +%s)}")" | gzip -9n >"$doc/changelog.Debian.gz"
find "$doc" -name '*.md' -exec gzip -9n {} +
# Manual pages are installed compressed (Debian policy 12.1).
[ -d "$stage/usr/share/man" ] && find "$stage/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +
# The XDP object is eBPF bytecode for the kernel, not an x86-64 binary.
mkdir -p "$stage/usr/share/lintian/overrides"
printf 'sroce: binary-from-other-architecture [usr/lib/sroce/sroce_xdp.bpf.o]\n' \
  >"$stage/usr/share/lintian/overrides/sroce"

# Depends: the shared libraries the ELF files need, as dpkg-shlibdeps finds them.
mkdir -p "$out/deb/work/debian"
printf 'Source: sroce\n\nPackage: sroce\nArchitecture: amd64\n' >"$out/deb/work/debian/control"
elfs=()
while IFS= read -r f; do file -b "$f" | grep -q ELF && elfs+=("$f"); done \
  < <(find "$stage/usr" -type f \( -perm -u+x -o -name '*.so' \))
(cd "$out/deb/work" && dpkg-shlibdeps -O "${elfs[@]/#/-e}" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p' >"$out/deb/depends"
depends=$(cat "$out/deb/depends")
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)

cat >"$stage/DEBIAN/control" <<CTL
Package: sroce
Version: $debver
Architecture: amd64
Maintainer: sroce developers <sroce-dev@example.org>
Installed-Size: $size
Depends: ${depends:+$depends, }libibverbs1, ibverbs-providers
Recommends: dkms, linux-headers-amd64, rdma-core
Suggests: ibverbs-utils, perftest
Section: net
Priority: optional
Homepage: https://localhost/sroce
Description: software RoCEv2 transport for unchanged RDMA programs
 sroce runs libibverbs programs (perftest, UCX, Open MPI, rdma_cm tools)
 over plain Ethernet: reliable delivery on lossy fabrics, per-packet
 multipath and congestion control, done by the daemon sroced.
 .
 This package has sroced with its systemd unit and /etc/sroce/sroced.toml,
 the rdma-core provider libsroce with its libibverbs driver file, the
 sroce and sroce-run tools, and the rdma_sroce kernel module's source,
 which DKMS builds for the installed kernels.
CTL
(cd "$stage" && find etc -type f | sed 's|^|/|') >"$stage/DEBIAN/conffiles"

dkms_ver=$version
cat >"$stage/DEBIAN/postinst" <<POST
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  # The module: DKMS builds it for the running kernel when its headers are there.
  if command -v dkms >/dev/null 2>&1; then
    dkms add -m rdma-sroce -v $dkms_ver >/dev/null 2>&1 || true
    if [ -d "/lib/modules/\$(uname -r)/build" ]; then
      dkms build -m rdma-sroce -v $dkms_ver && dkms install -m rdma-sroce -v $dkms_ver || \
        echo "sroce: DKMS could not build rdma_sroce for \$(uname -r); sroce-run works without it" >&2
    fi
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    systemctl enable sroced.service >/dev/null 2>&1 || true
  fi
fi
exit 0
POST
cat >"$stage/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl stop sroced.service >/dev/null 2>&1 || true
fi
if [ "\$1" = remove ] || [ "\$1" = upgrade ]; then
  if command -v dkms >/dev/null 2>&1; then
    dkms remove -m rdma-sroce -v $dkms_ver --all >/dev/null 2>&1 || true
  fi
fi
exit 0
PRERM
cat >"$stage/DEBIAN/postrm" <<POSTRM
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
POSTRM
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$stage/DEBIAN/md5sums"

deb=$out/sroce_${debver}_amd64.deb
# xz for the release package; the ASan tree (tests) packs fast, its binaries are 10x larger.
z=-Zxz
grep -q 'SROCE_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && z="-Zgzip -z1"
# shellcheck disable=SC2086
dpkg-deb --root-owner-group $z --build "$stage" "$deb" >/dev/null
if [ "${SROCE_MKDEB_LINTIAN:-1}" = 1 ] && command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "$deb" >"$out/deb/lintian.txt" 2>&1 || true
  echo "lintian: $(grep -c '^E:' "$out/deb/lintian.txt" || true) errors, $(grep -c '^W:' "$out/deb/lintian.txt" || true) warnings ($out/deb/lintian.txt)"
  cat "$out/deb/lintian.txt"
  if grep -q '^E:' "$out/deb/lintian.txt"; then
    echo "mkdeb: lintian reports errors" >&2
    exit 1
  fi
fi
echo "$deb"
