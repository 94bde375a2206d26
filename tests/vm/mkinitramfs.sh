#!/bin/sh
# Builds the VM's initramfs:
#   tests/vm/mkinitramfs.sh OUT.cpio.gz KROOT KVER MODULE.ko [FILE[=DEST]]...
# KROOT is Debian's unpacked kernel package (kernel.sh). The image holds
# static busybox, the kernel's own RDMA stack and NIC modules with their
# dependencies, rdma_sroce.ko (lib/modules/KVER/extra), /init, the test
# script, and each FILE at DEST (default: the same path) with the shared
# libraries ldd finds for it.
set -eu
out=$1
kroot=$2
kver=$3
ko=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
st="$out.d"
rm -rf "$st"
mkdir -p "$st/bin" "$st/sbin" "$st/etc" "$st/proc" "$st/sys" "$st/dev" "$st/tmp" "$st/run" \
	"$st/test" "$st/lib/modules/$kver/extra"
cp /bin/busybox "$st/bin/busybox"
cp "$here/init.sh" "$st/init"
# SROCE_VM_SCRIPT: another test script in its place (vm_interop.sh, vm_interop_dpdk.sh).
cp "$here/${SROCE_VM_SCRIPT:-vm_test.sh}" "$st/test/vm_test.sh"
cp "$here/vm_rdmacm.sh" "$st/test/vm_rdmacm.sh"
cp "$here/iop_lib.sh" "$st/test/iop_lib.sh"
cp "$here/rping_lib.sh" "$st/test/rping_lib.sh"
cp "$here/vm_slow.sh" "$st/test/vm_slow.sh"
cp "$here/vm_pyverbs.sh" "$st/test/vm_pyverbs.sh"
chmod +x "$st/init"
echo "root:x:0:0:root:/:/bin/sh" >"$st/etc/passwd"
echo "nobody:x:65534:65534:nobody:/:/bin/sh" >>"$st/etc/passwd"
echo "root:x:0:" >"$st/etc/group"
echo "hosts: files" >"$st/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n' >"$st/etc/hosts"

# The kernel's modules: what the tests load, with what they depend on.
mods="virtio_pci virtio_net virtio_blk veth crc32_generic rdma_rxe ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm sch_netem sch_prio cls_u32"
for m in $mods; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m"
done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r f; do
	rel=${f#"$kroot"}
	mkdir -p "$st$(dirname "$rel")"
	cp "$f" "$st$rel"
done
cp "$kroot/lib/modules/$kver/modules.builtin" "$kroot/lib/modules/$kver/modules.builtin.modinfo" \
	"$kroot/lib/modules/$kver/modules.order" "$st/lib/modules/$kver/"
cp "$ko" "$st/lib/modules/$kver/extra/"
depmod -b "$st" "$kver"

copy_lib() {
	[ -e "$st$1" ] && return 0
	mkdir -p "$st$(dirname "$1")"
	cp -L "$1" "$st$1"
}
for spec in "$@"; do
	src=${spec%%=*}
	dst=${spec#*=}
	[ "$dst" = "$spec" ] && dst=$src
	mkdir -p "$st$(dirname "$dst")"
	if [ -d "$src" ]; then
		# A directory (python's stdlib, pyverbs): the tree, and the libraries its
		# extension modules need.
		mkdir -p "$st$dst"
		cp -a "$src/." "$st$dst/"
		find "$src" -name '*.so*' -type f | while read -r so; do
			ldd "$so" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }'
		done | sort -u | while read -r lib; do copy_lib "$lib"; done
		continue
	fi
	cp -L "$src" "$st$dst"
	case "$src" in *.driver) continue ;; esac
	ldd "$src" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }' |
		while read -r lib; do copy_lib "$lib"; done
done
(cd "$st" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
