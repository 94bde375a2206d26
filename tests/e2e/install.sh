#!/bin/bash
# install.sh BUILD_DIR WORK_DIR PORT: the Debian package of sroce, installed into a scratch root.
#
# Builds the package from BUILD_DIR (packaging/mkdeb.sh), then, in a private mount namespace
# whose /usr, /etc and /var are overlays with their upper layers in WORK_DIR (so the machine's
# own files are never touched), `dpkg -i` installs it and the test checks the installed sroce:
#   - the files an installed sroce must have (sroced, unit, config, provider, driver file,
#     sroce, sroce-run, the module's DKMS source), from `dpkg -L`;
#   - two network namespaces joined by a veth pair, /usr/sbin/sroced in each;
#   - `ibv_devinfo -d sroce0` through /usr/bin/sroce-run with RDMAV_DRIVERS removed, so that
#     libibverbs can find the provider only through /etc/libibverbs.d/sroce.driver and its
#     own provider directory;
#   - ibv_rc_pingpong -c across the two hosts, through the installed sroce-run (data checked);
#   - `dpkg -r sroce` removes it.
# Exit 0 only if all of that passed.
set -u
build=$(readlink -f "$1")
work=$2
port=$3
here=$(dirname "$(readlink -f "$0")")
top=$(readlink -f "$here/../..")
rm -rf "$work"
mkdir -p "$work"
work=$(readlink -f "$work")

echo "== make deb (packaging/mkdeb.sh $build)"
SROCE_MKDEB_LINTIAN=0 "$top/packaging/mkdeb.sh" "$build" "$work/pkg" >"$work/mkdeb.log" 2>&1
rc=$?
cat "$work/mkdeb.log"
[ "$rc" -eq 0 ] || { echo "install.sh: mkdeb.sh failed ($rc)"; exit 1; }
deb=$(tail -1 "$work/mkdeb.log")
[ -f "$deb" ] || { echo "install.sh: no package"; exit 1; }

# Everything else runs in a mount namespace of its own (the overlays vanish with it).
exec unshare --mount --propagation private /bin/bash -s "$work" "$deb" "$port" <<'INNER'
set -u
work=$1
deb=$2
port=$3
fail() { echo "install.sh: FAIL: $*"; exit 1; }
for d in usr etc var; do
  mkdir -p "$work/root/$d" "$work/ovl-$d"
  mount -t overlay "sroce-inst-$d" -o "lowerdir=/$d,upperdir=$work/root/$d,workdir=$work/ovl-$d" "/$d" ||
    fail "overlay on /$d"
done
echo "== dpkg -i $(basename "$deb") (into the overlays: upper layers in $work/root)"
dpkg -i "$deb" || fail "dpkg -i"
dpkg -s sroce | grep -E '^(Status|Version|Depends):'
files=$(dpkg -L sroce)
for f in /usr/sbin/sroced /usr/bin/sroce /usr/bin/sroce-run \
    /usr/lib/x86_64-linux-gnu/libibverbs/libsroce-rdmav34.so /usr/lib/sroce/libsroce-shim.so \
    /etc/libibverbs.d/sroce.driver /etc/sroce/sroced.toml /lib/systemd/system/sroced.service \
    /usr/share/man/man8/sroced.8.gz /usr/share/man/man1/sroce.1.gz \
    /usr/share/man/man1/sroce-run.1.gz /usr/share/man/man5/sroced.toml.5.gz; do
  grep -qx "$f" <<<"$files" || fail "the package has no $f"
  [ -e "$f" ] || fail "$f not installed"
done
# The manual pages format without a warning (lintian's check, groff's own).
for m in /usr/share/man/man*/sroce*.gz; do
  w=$(zcat "$m" | groff -man -ww -z 2>&1)
  [ -z "$w" ] || fail "$m: groff warns: $w"
done
grep -qE '^/usr/src/rdma-sroce-[0-9.]+/dkms.conf$' <<<"$files" || fail "no DKMS source"
grep -qE '^/usr/src/rdma-sroce-[0-9.]+/sroce_main.c$' <<<"$files" || fail "no module source"
[ "$(cat /etc/libibverbs.d/sroce.driver)" = "driver sroce" ] || fail "driver file: $(cat /etc/libibverbs.d/sroce.driver)"
grep -q '^ExecStart=/usr/sbin/sroced ' /lib/systemd/system/sroced.service || fail "unit's ExecStart"
echo "installed: $(grep -c . <<<"$files") paths; driver file, unit, config, provider, DKMS source present"

tag=inst$$
a=srin${tag: -5}a
b=srin${tag: -5}b
cleanup() {
  for h in 1 2; do [ -f "$work/h$h.pid" ] && kill "$(cat "$work/h$h.pid")" 2>/dev/null; done
  sleep 0.5
  ip netns del "$tag-h1" 2>/dev/null
  ip netns del "$tag-h2" 2>/dev/null
}
trap cleanup EXIT
ip netns add "$tag-h1" && ip netns add "$tag-h2" || fail "netns"
ip link add "$a" type veth peer name "$b" || fail "veth"
ip link set "$a" netns "$tag-h1"
ip link set "$b" netns "$tag-h2"
ip -n "$tag-h1" link set lo up; ip -n "$tag-h2" link set lo up
ip -n "$tag-h1" link set "$a" mtu 9000 up; ip -n "$tag-h2" link set "$b" mtu 9000 up
ip -n "$tag-h1" addr add 10.78.0.1/24 dev "$a"; ip -n "$tag-h2" addr add 10.78.0.2/24 dev "$b"
for h in 1 2; do
  dev=$a; [ "$h" = 2 ] && dev=$b
  ip netns exec "$tag-h$h" /usr/sbin/sroced -c /etc/sroce/sroced.toml --netdev "$dev" \
    --socket "$work/h$h.sock" >"$work/h$h.log" 2>&1 &
  echo $! >"$work/h$h.pid"
done
for h in 1 2; do
  for _ in $(seq 200); do [ -S "$work/h$h.sock" ] && break; sleep 0.05; done
  [ -S "$work/h$h.sock" ] || { cat "$work/h$h.log"; fail "installed sroced on h$h did not start"; }
done
echo "== /usr/bin/sroce-run -- env -u RDMAV_DRIVERS ibv_devinfo -d sroce0 (h1)"
ip netns exec "$tag-h1" timeout 60 /usr/bin/sroce-run --socket "$work/h1.sock" -- \
  env -u RDMAV_DRIVERS ibv_devinfo -d sroce0 >"$work/devinfo" 2>&1
rc=$?
cat "$work/devinfo"
[ "$rc" -eq 0 ] || fail "ibv_devinfo exited $rc"
grep -q 'hca_id:[[:space:]]*sroce0' "$work/devinfo" || fail "ibv_devinfo did not show sroce0"
grep -q 'state:[[:space:]]*PORT_ACTIVE' "$work/devinfo" || fail "port not active"
echo "== ibv_rc_pingpong -c across the hosts (installed sroce-run and provider)"
ip netns exec "$tag-h1" timeout 90 /usr/bin/sroce-run --socket "$work/h1.sock" -- \
  ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 4096 -c >"$work/server" 2>&1 &
spid=$!
for _ in $(seq 200); do
  ip netns exec "$tag-h1" ss -Hltn "sport = :$port" | grep -q . && break
  sleep 0.05
done
ip netns exec "$tag-h2" timeout 90 /usr/bin/sroce-run --socket "$work/h2.sock" -- \
  ibv_rc_pingpong -g 0 -p "$port" -n 200 -s 4096 -c 10.78.0.1 >"$work/client" 2>&1
crc=$?
wait "$spid"
src=$?
echo "--- server -> $src"; cat "$work/server"; echo "--- client -> $crc"; cat "$work/client"
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ] || fail "ibv_rc_pingpong"
grep -q 'invalid data' "$work/server" "$work/client" && fail "ibv_rc_pingpong found invalid data"
grep -q '^200 iters in' "$work/client" || fail "no pingpong summary"
cleanup
trap - EXIT
rm -f "$work"/h?.pid
echo "== dpkg -r sroce"
dpkg -r sroce || fail "dpkg -r"
[ -e /usr/sbin/sroced ] && fail "sroced still there after dpkg -r"
echo "install.sh: the package installs, runs ibv_devinfo and ibv_rc_pingpong, and removes: ok"
INNER
