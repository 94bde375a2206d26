#!/bin/busybox sh
# /init of the test VM: mount, run /test/vm_test.sh, print the kernel log
# between markers for the host to scan, power off.
/bin/busybox --install -s /bin
export PATH=/test/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
echo "SROCE_VM_BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)"
sh /test/vm_test.sh
rc=$?
echo "SROCE_VM_DMESG_BEGIN"
dmesg
echo "SROCE_VM_DMESG_END"
echo "SROCE_VM_DONE rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
