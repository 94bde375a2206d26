# sroce: the two commands are `make demo` and `make test` (see README.md).
#
#   make            build the release tree (build/, binaries in build/bin/)
#   make deps       install the Debian packages everything needs (idempotent)
#   make test       release + ASan/UBSan builds, the whole suite, bounded fuzzing; ends with
#                   `make test: N passed, N failed, N skipped` (tests/README.md)
#   make demo       the main job on its embedded default (demo-sim: in the simulator)
#   make bench      engine benchmark (JSON summary line); bench-e2e: perftest across
#                   sroced vs raw UDP; bench-ebpf: telemetry overhead; bench-cc:
#                   congestion control scenarios at full size (docs/results/cc.md)
#   make test-e2e   only the end-to-end tests (unchanged ibv_*/perftest across sroced)
#   make kmod       the kernel module; make test-vm: its tests under qemu
#   make defconfig / menuconfig   Kconfig feature switches (.config)
#   make install    the release tree into DESTDIR/PREFIX (default /usr/local); make deb:
#                   build/sroce_VERSION_amd64.deb (docs/clients.md, "Installing sroce")

BUILD      ?= build
ASAN_BUILD ?= $(BUILD)/asan
FUZZ_BUILD ?= $(BUILD)/fuzz
GENERATOR  := -G Ninja
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 20

# ccache (SROCE_CCACHE in CMakeLists.txt): paths under the checkout are hashed relative to
# it, so a second checkout (a worktree, CI's clean clone elsewhere) hits the same cache.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all deps build build-asan build-fuzz test test-release test-security test-unit test-fuzz test-e2e test-vm kmod demo demo-sim bench bench-e2e bench-dpdk bench-ebpf clean defconfig menuconfig install deb

all: build

deps:
	@scripts/deps.sh

defconfig: deps
	/usr/bin/python3 scripts/kconfig.py defconfig

menuconfig: deps
	/usr/bin/python3 scripts/kconfig.py menuconfig

build: deps
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DSROCE_SANITIZE=ON \
		-DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

build-fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSROCE_FUZZ=ON \
		-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

test-unit: build build-asan
	cd $(ASAN_BUILD) && ctest -LE 'vm|eval' --output-on-failure -j $(JOBS)

# The release tree's share of `make test`: the engine, proto and cc unit tests and the
# simulator scenarios at -O2 (optimiser-only bugs; a minute). Everything runs under ASan too.
SMOKE_TESTS ?= ^(engine\.|proto: |cc\.|sim\.scenario\.)
test-release: build
	cd $(BUILD) && ctest -R '$(SMOKE_TESTS)' --output-on-failure -j $(JOBS)

# rdma_sroce.ko against Debian's linux-headers-amd64, and its tests in qemu
# booting Debian's own 6.1 kernel (downloads the kernel package once).
kmod: deps
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) --target kmod

# The security suite alone (docs/security.md): attacks by a second local uid
# and forged packets against a live sroced, each of which must fail.
test-security: build-asan
	@cd $(ASAN_BUILD) && { ctest -L security --output-on-failure --output-junit security-results.xml; \
		rc=$$?; $(CURDIR)/tests/security/summary.py security-results.xml test-security $$rc; }

test-vm: build-asan
	cd $(ASAN_BUILD) && ctest -L vm --output-on-failure

test-fuzz: build-fuzz
	cd $(FUZZ_BUILD) && SROCE_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure

# The whole suite: every ctest run goes on after a failure and writes JUnit results to
# $(TEST_RESULTS); scripts/test_summary.py counts them into the last line and fails on a
# failed test, on a skip that tests/ALLOWED_SKIPS does not name, and on a suite of
# tests/SUITES that registered no test although its packages are installed.
TEST_RESULTS ?= $(BUILD)/test-results
_results = $(abspath $(TEST_RESULTS))
test: build build-asan build-fuzz
	@rm -rf $(_results) && mkdir -p $(_results)
	-cd $(BUILD) && ctest -R '$(SMOKE_TESTS)' --output-on-failure -j $(JOBS) \
		--output-junit $(_results)/release.xml
	-cd $(ASAN_BUILD) && ctest -LE 'vm|eval' --output-on-failure -j $(JOBS) \
		--output-junit $(_results)/asan.xml
	-cd $(ASAN_BUILD) && ctest -L vm --output-on-failure --output-junit $(_results)/vm.xml
	-cd $(FUZZ_BUILD) && SROCE_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -j $(JOBS) \
		--output-junit $(_results)/fuzz.xml
	@/usr/bin/python3 scripts/test_summary.py --allowed tests/ALLOWED_SKIPS --suites tests/SUITES \
		release=$(BUILD)=$(_results)/release.xml asan=$(ASAN_BUILD)=$(_results)/asan.xml \
		vm=$(ASAN_BUILD)=$(_results)/vm.xml fuzz=$(FUZZ_BUILD)=$(_results)/fuzz.xml

# Two hosts (network namespaces) over a four-spine multipath fabric, sroced on
# each, Debian's unchanged ibv_rc_pingpong / ib_write_bw / ib_write_lat across
# them, and a report (docs/demo.md). demo-sim: the same idea in the simulator.
demo: build
	tools/demo/demo.sh $(BUILD)

demo-sim: build
	$(BUILD)/bin/sroce-sim run demo

bench: build
	$(BUILD)/bin/sroce-sim run engine-bench --json

# Unchanged perftest across sroced on the namespace fabric beside the raw UDP
# path of the same fabric (JSON summary line; docs/demo.md).
# Congestion control at full size (docs/results/cc.md): DCQCN, HPCC, Odin,
# delay-based and no CC, lossless and lossy, on a 64-host leaf-spine; one
# JSON summary line per scenario on stdout (progress on stderr). 32 MB of
# shared buffer per switch (HPCC's; 32 ports x 256 KB XOFF must fit for PFC to be
# lossless), the Odin flag at 1 MB of it as in the CI-sized runs. A scenario
# whose own checks fail (a flow that did not complete: "ok":false) still
# prints its line; make reports the error and goes on.
# The simulator at scale (docs/sim.md, "Scale"): WebSearch 50 % for 10 ms on 128
# and 1024 hosts and one 1024-host MoE all-to-all step; one JSON line
# (events_per_s, run_wall_s, max_rss_mb, bytes_per_qp per run). Long: tens of
# minutes on a loaded machine. BENCH_SIM_ARGS="--hosts 128 --alltoall-hosts 0" for less.
.PHONY: bench-sim
BENCH_SIM_ARGS ?=
bench-sim: build
	/usr/bin/python3 tools/bench/bench_sim.py --build $(BUILD) $(BENCH_SIM_ARGS)

.PHONY: bench-cc
BENCH_CC_ARGS ?=
BENCH_CC_FABRIC = --set hosts=64 --set hosts_per_leaf=16 --set buffer_kb=32768 --set sb_flag=0.03125
bench-cc: build
	-$(BUILD)/bin/sroce-sim run cc-incast --json --quiet $(BENCH_CC_FABRIC) --set fanin=63 \
		--set bytes=2097152 $(BENCH_CC_ARGS)
	-$(BUILD)/bin/sroce-sim run cc-alltoall --json --quiet $(BENCH_CC_FABRIC) --set skew=1 \
		--set bytes=4194304 $(BENCH_CC_ARGS)
	-$(BUILD)/bin/sroce-sim run cc-websearch --json --quiet $(BENCH_CC_FABRIC) --set load=0.5 \
		--set duration_us=2000 $(BENCH_CC_ARGS)
	-$(BUILD)/bin/sroce-sim run cc-fbhdp --json --quiet $(BENCH_CC_FABRIC) --set load=0.5 \
		--set duration_us=2000 $(BENCH_CC_ARGS)

# LTP (docs/cc/ltp.md): ltp-train writes the three shipped weight files
# (trained on the fluid model; 10-33 minutes each on the shared 2 cores; the seeds and sizes
# are the ones in their header lines). ltp-finetune fine-tunes each of them
# in the packet-level simulator into $(BUILD)/ltp-finetune/ (an experiment:
# those weights are not shipped, docs/cc/ltp.md "Fine-tuning in the packet simulator").
# bench-ltp runs ltp-eval at full size and draws docs/results/ltp*.png.
.PHONY: ltp-train ltp-finetune bench-ltp
LTP_W := userspace/cc/ltp/weights
LTP_TRAIN_ARGS ?= --seed 1 --gens 60 --pop 16 --envs 6 --val-envs 16
ltp-train: build
	for v in full noprobe nofilter; do \
	  nice -n 10 $(BUILD)/bin/ltp-train --variant $$v $(LTP_TRAIN_ARGS) --out $(LTP_W)/$$v.txt || exit 1; done
LTP_FINETUNE_ARGS ?= --seed 2 --gens 25 --pop 8 --packet-envs 6 --packet-val 12 --sigma 0.02 --lr 0.02 --threads 1
ltp-finetune: build
	mkdir -p $(BUILD)/ltp-finetune
	for v in full noprobe nofilter; do \
	  nice -n 10 $(BUILD)/bin/ltp-train --variant $$v $(LTP_FINETUNE_ARGS) --init $(LTP_W)/$$v.txt \
	    --out $(BUILD)/ltp-finetune/$$v.txt || exit 1; done

LTP_EVAL_ENVS ?= 100:1000:7:4096,25:500:15:2048,400:2000:15:8192,100:4000:31:4096,100:62500:3:32768
bench-ltp: build
	$(BUILD)/bin/sroce-sim run ltp-eval --json --quiet --set envs=$(LTP_EVAL_ENVS) --seed 7 \
		| tee docs/results/ltp-eval.jsonl
	/usr/bin/python3 tools/plots/ltp_plots.py docs/results/ltp-eval.jsonl docs/results

bench-e2e: build
	/usr/bin/python3 tools/bench/bench_e2e.py --build $(BUILD) $(BENCH_E2E_ARGS)

# sroced's DPDK datapath (af_xdp over veth) with unchanged ib_write_bw beside
# dpdk-testpmd txonly -> rxonly on the same path (root, about a minute; JSON).
bench-dpdk: build
	dpdk-pmd/bench/bench_dpdk.sh $(BUILD)/bin

# Lossy mode on the namespace fabric: unchanged ib_write_bw across sroced under
# loss, per-spine reordering and a spine failure, lossy mode on and off (root,
# several minutes; JSON summary line; docs/results/lossy.md).
.PHONY: bench-lossy-fabric
bench-lossy-fabric: build
	/usr/bin/python3 tools/bench/fabric_lossy.py --bin $(BUILD)/bin $(BENCH_LOSSY_ARGS)

# eBPF telemetry overhead: packets/s through a veth pair with and without the
# programs (root, ~70 s).
bench-ebpf: build
	$(BUILD)/bin/sroce-tm-bench

# pingmesh on the namespace fabric (docs/pingmesh.md): 4 hosts, 2 leaves, 4 spines, an agent
# per host; a clean run, a lossy spine link, a dead link, a slow NIC, a busy host; one JSON line
# (root, about 4 minutes).
.PHONY: pingmesh-eval
pingmesh-eval: build
	/usr/bin/python3 tools/pingmesh/pingmesh_eval.py --bin $(BUILD)/bin $(PINGMESH_EVAL_ARGS)

# Only the tests that run unchanged RDMA programs across sroced (root).
test-e2e: build-asan
	cd $(ASAN_BUILD) && ctest -R 'provider_|e2e_' --output-on-failure

# An installed sroce (docs/clients.md): sroced + unit + /etc/sroce, the provider where
# libibverbs finds it with its .driver file, sroce, sroce-run, the module's source for DKMS.
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package, from the release tree (packaging/mkdeb.sh: staged with
# cmake --install --prefix /usr, dpkg-shlibdeps, dpkg-deb, lintian).
deb: build
	packaging/mkdeb.sh $(BUILD) $(BUILD)

clean:
	rm -rf $(BUILD)
