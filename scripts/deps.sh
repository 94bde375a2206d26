#!/usr/bin/env bash
# Installs every Debian package sroce's build, tests and demo need.
# Idempotent: installs only what is missing; `scripts/deps.sh --check` only
# reports (exit 1 when something is missing).
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev ccache
  python3 python3-kconfiglib
  # libraries
  catch2 libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  liburing-dev libbpf-dev libelf-dev zlib1g-dev libibverbs-dev
  # tools used by tests and benchmarks
  tshark python3-scapy python3-matplotlib python3-pyflakes bpftool llvm iproute2
  # profiles of sroced and of the simulator at scale (docs/performance.md, docs/sim.md)
  linux-perf
  # the backtraces of a hung MPI rank that the MPI test's watchdog prints (tests/e2e/mpi)
  gdb
  # unchanged RDMA programs run across sroce in the tests
  ibverbs-utils perftest rdma-core python3-pyverbs ibverbs-providers rdmacm-utils librdmacm-dev
  # real clients across sroce (docs/clients.md): UCX, Open MPI (pml ucx), qperf
  ucx-utils openmpi-bin libopenmpi-dev qperf
  # make deb and its install test (packaging/mkdeb.sh, tests/e2e/install.sh)
  dpkg-dev file lintian dkms
  # the kernel module and its qemu tests
  linux-headers-amd64 qemu-system-x86 busybox-static sparse kmod cpio
  # the DPDK datapath (af_xdp and af_packet vdevs)
  libdpdk-dev dpdk dpdk-dev libxdp-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${1:-} == --check ]]; then
  if ((${#missing[@]})); then echo "missing: ${missing[*]}"; exit 1; fi
  exit 0
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: need root to apt-get install (run 'sudo make deps')" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
