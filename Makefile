# Thin wrapper over CMake: `make demo` and `make test` work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON := $(CURDIR)/.venv/bin/python
# The CUDA parts need nvcc (no GPU); without it the build goes on with the CPU backend alone.
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_FLAGS := $(if $(NVCC),-DTCI_CUDA=ON -DCMAKE_CUDA_COMPILER=$(NVCC),-DTCI_CUDA=OFF)

.PHONY: all setup build demo test clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@$(if $(NVCC),,echo "note: nvcc not found; building without the CUDA parts")
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PYTHON) $(CUDA_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/tcinfer models/demo/tiny_cnn.onnx models/demo/input.npy

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD)
