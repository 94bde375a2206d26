#!/bin/sh
# Real clients through rdma_sroce.ko (ctest: vm_clients, label vm; docs/clients.md):
#   tests/vm/run_clients.sh OUTDIR [FILE[=DEST]]...
# Boots the VM once with vm_clients.sh: UCX's ucx_perftest and Open MPI between two
# namespaces, each with its own sroce device and sroced --kernel, and qperf's UD test.
# Packs what those programs need beside their binaries (ldd finds the libraries): UCX's
# transport plugins, Open MPI's components, help files and parameters, PMIx's components.
# Programs not installed on this machine are left out (the VM script skips them).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
lib=/usr/lib/x86_64-linux-gnu
extra=""
add() { for f in "$@"; do [ -e "$f" ] || return 1; done; for f in "$@"; do extra="$extra $f"; done; }
add /usr/bin/ucx_perftest "$lib/ucx" || echo "clients: ucx_perftest (ucx-utils) not installed"
# mpirun is orterun (through the alternatives); orted is what the launch agent starts.
add /usr/bin/mpirun /usr/bin/orted "$lib/openmpi" "$lib/pmix2" /usr/share/openmpi /etc/openmpi ||
	echo "clients: Open MPI (openmpi-bin) not installed"
# shellcheck disable=SC2086
SROCE_VM_SCRIPT=vm_clients.sh SROCE_VM_PYVERBS=0 exec "$here/run.sh" "$out" \
	"$here/vm_rsh.sh=/test/bin/vm_rsh.sh" $extra "$@"
