# Thin wrapper over CMake: `make demo` and `make test` work on a fresh Debian machine.
#   make demo                 the library and the CLI only, then the demo model
#   make test                 everything, then ctest
#   make install PREFIX=DIR   libtcinfer.so/.a, tcinfer.h, the CLI, pkg-config and CMake files
#   make asan                 the CPU build under ASan+UBSan: unit tests and the malformed corpus
#   make fuzz SECONDS=N       the libFuzzer targets (clang), each for N seconds
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
PYTHON := $(CURDIR)/.venv/bin/python
# The CUDA parts need nvcc (no GPU); without it the build goes on with the CPU backend alone.
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_FLAGS := $(if $(NVCC),-DTCI_CUDA=ON -DCMAKE_CUDA_COMPILER=$(NVCC),-DTCI_CUDA=OFF)

# `make demo` runs on the GPU where there is one; elsewhere it needs only the CPU backend, built
# without the CUDA parts in its own folder (a cold CUDA build takes far longer than the demo)
HAVE_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU')
DEMO_BUILD := $(if $(filter-out 0,$(HAVE_GPU)),$(BUILD),$(BUILD)-demo)
DEMO_FLAGS := $(if $(filter-out 0,$(HAVE_GPU)),$(CUDA_FLAGS),-DTCI_CUDA=OFF)

# The tests run under the venv's Python, which `setup` creates (on a fresh clone there is no .venv
# when make reads this file, and CMake would find a Python without the test tooling). make demo and
# make lib need no Python: on a new build folder they configure without the tests.
CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CUDA_FLAGS) >/dev/null
NO_TESTS_IF_NEW = $(if $(wildcard $(1)/CMakeCache.txt),,-DTCI_BUILD_TESTS=OFF)

.PHONY: all setup setup-system build lib demo test install clean fuzz asan

# libFuzzer targets (clang, ASan+UBSan, CPU backend): make fuzz SECONDS=N runs each for N s
FUZZ_BUILD ?= build-fuzz
SECONDS ?= 60
# The CPU library and unit tests under ASan+UBSan, and the malformed corpus (no conformance)
ASAN_BUILD ?= build-asan

all: build

setup:
	@scripts/setup.sh

setup-system:
	@scripts/setup.sh --system-only

build: setup
	@$(if $(NVCC),,echo "note: nvcc not found; building without the CUDA parts")
	$(CONFIGURE) -DTCI_BUILD_TESTS=ON -DPython3_EXECUTABLE=$(PYTHON)
	cmake --build $(BUILD) -j$(JOBS)

# the libraries and the CLI, no tests
lib: setup-system
	@$(if $(NVCC),,echo "note: nvcc not found; building without the CUDA parts")
	$(CONFIGURE) $(call NO_TESTS_IF_NEW,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS) --target tcinfer tcinfer_shared tcinfer_cli

demo: setup-system
	@$(if $(filter-out 0,$(HAVE_GPU)),,echo "note: no GPU here: the demo builds the CPU backend alone, in $(DEMO_BUILD)")
	cmake -S . -B $(DEMO_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(DEMO_FLAGS) \
	  $(call NO_TESTS_IF_NEW,$(DEMO_BUILD)) >/dev/null
	cmake --build $(DEMO_BUILD) -j$(JOBS) --target tcinfer_cli
	$(DEMO_BUILD)/tcinfer models/demo/tiny_cnn.onnx models/demo/input.npy

install: lib
	cmake --install $(BUILD) --prefix $(PREFIX)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

fuzz: setup
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCI_CUDA=OFF \
	  -DTCI_FUZZ=ON -DBUILD_TESTING=OFF -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_model fuzz_gpu_plan fuzz_tensor fuzz_engine_file
	scripts/run_fuzz.sh $(FUZZ_BUILD) $(SECONDS)

asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTCI_CUDA=OFF -DTCI_SANITIZE=ON \
	  -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) -L 'unit|malformed'

clean:
	rm -rf $(BUILD) $(BUILD)-demo $(FUZZ_BUILD) $(ASAN_BUILD)
