#!/bin/sh
# The VM test of rdma_sroce.ko (ctest: vm_kmod, label vm):
#   tests/vm/run.sh OUTDIR [FILE[=DEST]]...
# (the test programs go to /test/bin: kverbs, kmock, kmad)
# SROCE_VM_SCRIPT=vm_interop.sh boots the interop test instead (run_interop.sh);
# SROCE_VM_DISK=FILE attaches FILE as /dev/vda (raw), where the VM may leave a capture.
# SROCE_VM_KMOD_OUT=DIR builds the module there instead of OUTDIR/kmod.
# Builds the module (kmod/build.sh), fetches Debian's kernel (kernel.sh,
# cached in build/vm/cache of the source tree, or $SROCE_VM_CACHE), builds
# the initramfs, boots it under qemu (TCG, 2 CPUs, 1 GiB) and judges the
# result: every check passed, the VM finished, and the kernel log has no
# oops, BUG, WARNING, lockdep or leak report.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
kver=$("$src/kmod/kver.sh")
cache=${SROCE_VM_CACHE:-$src/build/vm/cache}
timeout_s=${SROCE_VM_TIMEOUT:-360}

# SROCE_VM_KMOD_OUT: the module's build directory, when a test shares another's (Kbuild then
# rebuilds only what changed); the tests that share one run serially.
kout=${SROCE_VM_KMOD_OUT:-$out/kmod}
echo "vm: kernel $kver"
"$src/kmod/build.sh" "$kout" "$kver" >"$out/kmod-build.log" 2>&1 || {
	cat "$out/kmod-build.log"
	echo "vm: FAIL: module build"
	exit 1
}
if grep -E "warning:|error:" "$out/kmod-build.log"; then
	echo "vm: FAIL: the module build has warnings"
	exit 1
fi
kroot=$("$src/tests/vm/kernel.sh" "$cache" "$kver")

# Optional unchanged tools: only what exists on this machine.
extra=""
for f in /usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo \
	/usr/bin/ibv_rc_pingpong /usr/bin/ib_write_bw /usr/bin/ib_send_lat \
	/usr/bin/ib_send_bw /usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy \
	/usr/bin/ibv_uc_pingpong /usr/bin/ibv_ud_pingpong /usr/bin/ib_read_bw /usr/bin/ib_atomic_bw \
	/usr/bin/ib_write_lat /usr/bin/dumpcap /usr/bin/rstream /usr/bin/riostream /usr/bin/qperf; do
	[ -x "$f" ] && extra="$extra $f"
done
# rdma-core's pyverbs suite (python3-pyverbs): python with a stdlib pruned of what the
# suite never imports, pyverbs, and the tests (gunzipped). SROCE_VM_PYVERBS=0 leaves it out.
if [ "${SROCE_VM_PYVERBS:-1}" = 1 ] && [ -x /usr/bin/python3 ] && [ -d /usr/lib/python3/dist-packages/pyverbs ] &&
	[ -d /usr/share/doc/rdma-core/tests ]; then
	py=$(/usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
	rm -rf "$out/py"
	mkdir -p "$out/py"
	tar -C /usr/lib -cf - --exclude="$py/test" --exclude="$py/idlelib" --exclude="$py/tkinter" \
		--exclude="$py/ensurepip" --exclude="$py/lib2to3" --exclude="$py/turtledemo" \
		--exclude="$py/pydoc_data" --exclude="$py/config-*" --exclude="$py/distutils" \
		--exclude="$py/site-packages" --exclude="$py/dist-packages" --exclude="$py/sqlite3" \
		--exclude="$py/lib-dynload/_tkinter*" --exclude="$py/lib-dynload/_sqlite3*" \
		--exclude="$py/lib-dynload/_dbm*" --exclude="$py/lib-dynload/_gdbm*" \
		--exclude="$py/lib-dynload/_ssl*" --exclude="$py/lib-dynload/_hashlib*" \
		--exclude="$py/lib-dynload/_curses*" --exclude="$py/lib-dynload/_test*" \
		--exclude="$py/lib-dynload/xx*" --exclude="$py/lib-dynload/_ctypes_test*" \
		"$py" | tar -C "$out/py" -xf -
	cp -r /usr/share/doc/rdma-core/tests "$out/py/tests"
	gunzip -f "$out/py/tests"/*.gz
	extra="$extra /usr/bin/python3 $out/py/$py=/usr/lib/$py \
		/usr/lib/python3/dist-packages/pyverbs=/usr/lib/python3/dist-packages/pyverbs \
		$out/py/tests=/test/pyverbs"
fi
# shellcheck disable=SC2086
"$src/tests/vm/mkinitramfs.sh" "$out/initramfs.cpio.gz" "$kroot" "$kver" \
	"$kout/rdma_sroce.ko" $extra "$@"

log="$out/console.log"
echo "vm: booting (log: $log)"
start=$(date +%s)
set +e
# -cpu max: the userspace binaries (sroced links Debian's DPDK, built for SSE4.2) need more
# than TCG's default qemu64 model offers; they die with SIGILL on it.
# no_timer_check: on a loaded host, TCG runs the guest so slowly that the kernel's check of
# the IO-APIC timer (a count of ticks during a busy loop) fails and it panics at boot
# ("IO-APIC + timer doesn't work!", seen once in make test at load ~20); the check is for
# broken motherboards, not for qemu's PIT, and virtual machines commonly skip it.
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1G -nographic -no-reboot \
	-kernel "$kroot/boot/vmlinuz-$kver" -initrd "$out/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet no_timer_check panic=-1 oops=panic $(env | grep -E '^SROCE_VM_PYVERBS_[A-Z_]*=[0-9]+$' | tr '\n' ' ')" \
	-netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
	${SROCE_VM_DISK:+-drive file=$SROCE_VM_DISK,format=raw,if=virtio} \
	</dev/null >"$log" 2>&1
qrc=$?
set -e
end=$(date +%s)
tr -d '\r' <"$log" >"$log.txt"
# The test's own lines (the console starts with terminal escapes).
sed -n '/SROCE_VM_BOOTED/,/^SROCE_VM_DMESG_BEGIN/p' "$log.txt" | sed '/^SROCE_VM_DMESG_BEGIN/d' || true
echo "vm: qemu exited $qrc after $((end - start)) s"

ok=1
if ! grep -q '^SROCE_VM_DONE rc=0' "$log.txt"; then
	echo "vm: FAIL: the VM did not finish cleanly:"
	grep '^SROCE_VM_DONE' "$log.txt" || tail -n 40 "$log.txt"
	ok=0
fi
# The kernel log the VM printed at the end, and any kernel line the
# console got before (an oops with oops=panic never reaches the end).
{
	sed -n '/^SROCE_VM_DMESG_BEGIN/,/^SROCE_VM_DMESG_END/p' "$log.txt"
	grep -E '^\[ *[0-9]+\.[0-9]+\]' "$log.txt" || true
} >"$out/dmesg.txt"
# Kernel reports that fail the test wherever they come from.
bad='Oops|BUG:|WARNING:|Call Trace|general protection|kernel BUG|UBSAN|KASAN|refcount_t|list_add corruption|list_del corruption|soft lockup|hung_task|blocked for more than|rdma_sroce: leak|leaked|Kernel panic'
if grep -E "$bad" "$out/dmesg.txt" >"$out/dmesg.bad"; then
	echo "vm: FAIL: the kernel log has reports:"
	cat "$out/dmesg.bad"
	ok=0
fi
[ "$ok" = 1 ] && echo "vm: PASS ($(grep '^SUMMARY' "$log.txt"))"
[ "$ok" = 1 ]
