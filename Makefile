# Thin wrapper over CMake. `make run` and `make test` are the two commands the
# README starts with; both install what is missing first.
BUILD      ?= build
TEST_BUILD ?= build-test
DEV_BUILD  ?= build-device
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
RUN_ARGS   ?=
PREFIX     ?= /usr/local

.PHONY: all build deps test-deps run test test-quick device-build install package rocm-check format format-check clean

all: build

deps:
	@scripts/install-deps.sh

# deps, and what only tests use (a Prometheus server for e2e/prometheus)
test-deps:
	@scripts/install-deps.sh --test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the best backend present (GPU if any, else CPU): only the
# aorta binary is built (CUDA only with a GPU), one progress line per stage.
run:
	@scripts/make-run.sh $(BUILD) $(JOBS) $(RUN_ARGS)

# -Werror, ASan and UBSan on the host code, then every test (GPU tests report
# "skipped" where no GPU is visible).
test: test-deps
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAORTA_SANITIZE=ON -DAORTA_WERROR=ON $(CMAKE_ARGS)
	cmake --build $(TEST_BUILD) -j $(JOBS)
	ctest --test-dir $(TEST_BUILD) --output-on-failure -j $(JOBS)

# bin/aorta, lib/aorta/ (its plugins and attach libraries), share/aorta/
# (configs, examples), share/doc/aorta/ under PREFIX.
# (The aorta target builds every file installed: plugins, attach libraries.)
install: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target aorta -j $(JOBS)
	cmake --install $(BUILD) --prefix $(PREFIX)

# build/aorta-VERSION-Linux.tar.gz and build/aorta_VERSION_ARCH.deb.
package: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target aorta -j $(JOBS)
	cd $(BUILD) && cpack

# The binary carried to the GPU machine: libyaml and yajl linked statically,
# no cairo (the machine has neither), sm_90.
device-build:
	cmake -S . -B $(DEV_BUILD) -DCMAKE_BUILD_TYPE=Release -DAORTA_STATIC_DEPS=ON -DAORTA_CAIRO=OFF \
	      -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=ON $(CMAKE_ARGS)
	cmake --build $(DEV_BUILD) -j $(JOBS)

# The HIP backend (HIP, RCCL, hipBLAS; gfx942 and gfx90a) built, linked and
# unit-tested inside a cached Debian 13 root with its ROCm packages; no AMD
# GPU needed (docs/rocm.md). Needs root and Debian's package mirror.
rocm-check:
	@JOBS=$(JOBS) scripts/rocm-check.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(DEV_BUILD) build-rocm
