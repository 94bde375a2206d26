# sroce: the two commands are `make demo` and `make test` (see README.md).
#
#   make            build the release tree (build/, binaries in build/bin/)
#   make deps       install the Debian packages everything needs (idempotent)
#   make test       release + ASan/UBSan builds, the whole suite, bounded fuzzing
#   make demo       the main job on its embedded default
#   make bench      engine benchmark (JSON summary line)
#   make defconfig / menuconfig   Kconfig feature switches (.config)

BUILD      ?= build
ASAN_BUILD ?= $(BUILD)/asan
FUZZ_BUILD ?= $(BUILD)/fuzz
GENERATOR  := -G Ninja
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 20

.PHONY: all deps build build-asan build-fuzz test test-unit test-fuzz demo bench clean defconfig menuconfig

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
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

test-fuzz: build-fuzz
	cd $(FUZZ_BUILD) && SROCE_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure

test: test-unit test-fuzz
	@echo "make test: all suites passed"

demo: build
	$(BUILD)/bin/sroce-sim run demo

bench: build
	$(BUILD)/bin/sroce-sim run engine-bench --json

clean:
	rm -rf $(BUILD)
