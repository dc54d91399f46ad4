# Thin wrapper over CMake: `make demo` and `make test` work on a fresh Debian machine.
#   make demo                 the library and the CLI only, then the demo model
#   make test                 everything, then ctest
#   make install PREFIX=DIR   libtcinfer.so/.a, tcinfer.h, the CLI, pkg-config and CMake files
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
DEMO_FLAGS := $(if $(filter-out 0,$(HAVE_GPU)),$(CUDA_FLAGS),-DTCI_CUDA=OFF -DTCI_BUILD_TESTS=OFF)

# the test venv's Python where it exists (make demo needs none)
PYTHON_FLAG := $(if $(wildcard $(PYTHON)),-DPython3_EXECUTABLE=$(PYTHON))
CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(PYTHON_FLAG) $(CUDA_FLAGS) >/dev/null

.PHONY: all setup setup-system build lib demo test install clean

all: build

setup:
	@scripts/setup.sh

setup-system:
	@scripts/setup.sh --system-only

build: setup
	@$(if $(NVCC),,echo "note: nvcc not found; building without the CUDA parts")
	$(CONFIGURE)
	cmake --build $(BUILD) -j$(JOBS)

# the libraries and the CLI, no tests
lib: setup-system
	@$(if $(NVCC),,echo "note: nvcc not found; building without the CUDA parts")
	$(CONFIGURE)
	cmake --build $(BUILD) -j$(JOBS) --target tcinfer tcinfer_shared tcinfer_cli

demo: setup-system
	@$(if $(filter-out 0,$(HAVE_GPU)),,echo "note: no GPU here: the demo builds the CPU backend alone, in $(DEMO_BUILD)")
	cmake -S . -B $(DEMO_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(PYTHON_FLAG) $(DEMO_FLAGS) >/dev/null
	cmake --build $(DEMO_BUILD) -j$(JOBS) --target tcinfer_cli
	$(DEMO_BUILD)/tcinfer models/demo/tiny_cnn.onnx models/demo/input.npy

install: lib
	cmake --install $(BUILD) --prefix $(PREFIX)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD)-demo
