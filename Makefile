# Two commands do all the set-up on a fresh machine:
#   make demo   install everything, then run the main job: python -m yirage_ext.bench (every op checked against
#               the float64 reference and timed: ours vs torch vs torch.compile, and peers where they run)
#   make test   install everything, then run the test suite
#   make cpp-example   build the library as a plain LibTorch shared library with CMake (no Python module) and
#                      run examples/cpp against it
#   make hip-check     the ROCm build check without AMD hardware: hipify a copy of csrc/ as a HIP build does,
#                      fail on CUDA names left untranslated, compile the hipified kernels with hipcc
#                      (needs hipcc: `apt-get install hipcc` on Debian 12 gives HIP 5.2)
# Everything goes into a virtual environment (.venv) with torch==$(TORCH_VERSION) (a CPU build; a bare
# `torch` would pull gigabytes of CUDA packages). The library is built as a wheel against that torch
# (--no-build-isolation) and installed from it, so tests exercise what users install.
PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DEPS := $(VENV)/.deps-$(TORCH_VERSION)
PYTEST_ARGS ?=

.PHONY: demo test install wheel bench clean cpp-example cuda-wheel cuda-test cuda-check hip-check

$(DEPS):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet "torch==$(TORCH_VERSION)" ninja pytest numpy expecttest setuptools wheel
	# the comparison framework's optional parts, so their tests run: Triton kernels (interpreted on CPU),
	# progress bar, PNG plots (together about 90 s of download and install, most of it Triton's 290 MB wheel)
	$(PIP) install --quiet triton tqdm matplotlib
	touch $@

wheel: $(DEPS)
	rm -rf dist
	$(PIP) wheel --no-build-isolation --no-deps --wheel-dir dist .

install: wheel
	$(PIP) install --quiet --force-reinstall --no-deps dist/yirage_ext-*.whl

# DEMO_ARGS go to the CLI, e.g. make demo DEMO_ARGS="--ops rms_norm softmax --backward --plot demo.png"
DEMO_ARGS ?=
# -I: the installed wheel, not the checkout's yirage_ext/ (python -m would put the current directory first)
demo: install
	$(PY) -I -m yirage_ext.bench $(DEMO_ARGS)

test: install
	$(VENV)/bin/pytest tests $(PYTEST_ARGS)

# Every benchmark in turn (each writes its table to benchmarks/results/); BENCH_ARGS go to each.
BENCH_ARGS ?=
bench: install
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b $(BENCH_ARGS); done

# The C++ (LibTorch) example: CMake finds torch through the venv's torch (its cmake prefix), Ninja builds,
# ccache is used when present. CPP_BUILD_DIR keeps its objects between runs.
CPP_BUILD_DIR ?= build/cpp-example
cpp-example: $(DEPS)
	cmake -S examples/cpp -B $(CPP_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_PREFIX_PATH="$$($(PY) -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
		$$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
	cmake --build $(CPP_BUILD_DIR)
	$(CPP_BUILD_DIR)/yirage_cpp_example

# The CUDA build check, on a machine without a GPU: a second venv with a CUDA build of torch
# (CUDA_TORCH_VERSION), the CUDA toolkit at CUDA_HOME (nvcc and cudart are enough: cuBLAS headers come from
# torch's own nvidia wheels), one arch. The CUDA-enabled library is built as a wheel, installed, must report
# its CUDA kernels registered, and passes the test suite (its CPU tests; the CUDA ones need a GPU).
CUDA_VENV ?= .venv-cuda
CUDA_TORCH_VERSION ?= 2.14.1
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 9.0a
CUDA_PY := $(CUDA_VENV)/bin/python
CUDA_DEPS := $(CUDA_VENV)/.deps-$(CUDA_TORCH_VERSION)
# The CPU kernel variants are the same sources as in make test: only the best one this CPU has is tested again.
# test_loader.py is left out: its JIT builds are CPU-only slim libraries, the same as in make test (6 minutes).
CUDA_CHECK_PYTEST_ARGS ?= -q -x --ignore=tests/test_loader.py

$(CUDA_DEPS):
	$(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_PY) -m pip install --quiet "torch==$(CUDA_TORCH_VERSION)" ninja pytest numpy expecttest setuptools wheel
	touch $@

# cuda-wheel builds from a copy of the tree (build/cuda-src), so it can run beside `make test` (which builds in
# the tree itself); cuda-test installs that wheel and checks it; cuda-check is both.
cuda-wheel: $(CUDA_DEPS)
	rm -rf build/cuda-src build/cuda-dist && mkdir -p build/cuda-src
	tar --exclude=./build --exclude=./dist --exclude='./.venv*' --exclude=./.git -cf - . | tar -xf - -C build/cuda-src
	@start=$$(date +%s); \
	cd build/cuda-src && CUDA_HOME=$(CUDA_HOME) TORCH_CUDA_ARCH_LIST="$(CUDA_ARCH)" YIRAGE_EXT_FORCE_CUDA=1 \
		../../$(CUDA_PY) -m pip wheel --quiet --no-build-isolation --no-deps --wheel-dir ../cuda-dist . && \
	echo "cuda-wheel: CUDA build took $$(( $$(date +%s) - start )) s"

cuda-test: $(CUDA_DEPS)
	$(CUDA_PY) -m pip install --quiet --force-reinstall --no-deps build/cuda-dist/yirage_ext-*.whl
	cd build && ../$(CUDA_PY) -I -c "import torch, yirage_ext; \
		info = yirage_ext.load_info(); \
		assert info.kind == 'prebuilt' and info.config['with_cuda'], info; \
		missing = [op for op in yirage_ext.backends.op_table() if not op.startswith('attention') and \
		           not torch._C._dispatch_has_kernel_for_dispatch_key('yirage::' + op, 'CUDA')]; \
		assert not missing, f'no CUDA kernel for {missing}'; \
		print('cuda-check: torch', torch.__version__, '- CUDA kernels registered for every op but attention')"
	YIRAGE_TEST_ISAS=best $(CUDA_VENV)/bin/pytest tests $(CUDA_CHECK_PYTEST_ARGS)

cuda-check: cuda-wheel
	$(MAKE) cuda-test

# HIP_PLATFORM=amd: Debian's hipcc would pick nvcc where it finds one. HIP_ARCH: the --offload-arch compiled for.
HIP_ARCH ?= gfx90a
hip-check: $(DEPS)
	HIP_PLATFORM=amd $(PY) .ci/hip_check.py --arch $(HIP_ARCH)

clean:
	rm -rf build dist *.egg-info yirage_ext/_C*.so yirage_ext/_C.build.json
