#!/bin/bash
# Runs inside sroce-run (see run_with_sroced.sh): the unchanged Debian tools must list sroce0
# with the GID the daemon serves on its loopback, and agree with each other on the GUID.
set -u
fail() { echo "discovery: $*" >&2; exit 1; }
devices=$(timeout 20 ibv_devices) || fail "ibv_devices failed"
echo "$devices"
guid=$(echo "$devices" | awk '$1 == "sroce0" {print $2}')
[ -n "$guid" ] || fail "ibv_devices does not list sroce0"
info=$(timeout 20 ibv_devinfo -v -d sroce0) || fail "ibv_devinfo failed"
echo "$info" | grep -E "hca_id|node_guid|state:|link_layer|GID\["
echo "$info" | grep -q "hca_id:.*sroce0" || fail "ibv_devinfo: no hca_id sroce0"
echo "$info" | grep -q "PORT_ACTIVE" || fail "port not active"
echo "$info" | grep -q "link_layer:.*Ethernet" || fail "link layer not Ethernet"
echo "$info" | grep -qE "GID\[ *0\]:.*::ffff:127\.0\.0\.1, RoCE v2" || fail "GID 0 is not ::ffff:127.0.0.1 RoCE v2"
ngid=$(echo "$info" | awk '/node_guid:/ {gsub(":", "", $2); print $2}')
[ "$ngid" = "$guid" ] || fail "GUID differs: ibv_devices $guid, ibv_devinfo $ngid"
echo "discovery: ok"
