# Thin wrapper over CMake: `make demo` and `make test` work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON := $(CURDIR)/.venv/bin/python
# The CUDA parts need nvcc (no GPU); without it the build goes on with the CPU backend alone.
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_FLAGS := $(if $(NVCC),-DTCI_CUDA=ON -DCMAKE_CUDA_COMPILER=$(NVCC),-DTCI_CUDA=OFF)

.PHONY: all setup build demo test clean fuzz asan

# libFuzzer targets (clang, ASan+UBSan, CPU backend): make fuzz SECONDS=N runs each for N s
FUZZ_BUILD ?= build-fuzz
SECONDS ?= 60
# The CPU library and unit tests under ASan+UBSan, and the malformed corpus (no conformance)
ASAN_BUILD ?= build-asan

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

fuzz: setup
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCI_CUDA=OFF \
	  -DTCI_FUZZ=ON -DBUILD_TESTING=OFF -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_model fuzz_tensor fuzz_engine_file
	scripts/run_fuzz.sh $(FUZZ_BUILD) $(SECONDS)

asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTCI_CUDA=OFF -DTCI_SANITIZE=ON \
	  -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS) -L 'unit|malformed'

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(ASAN_BUILD)
