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

.PHONY: demo test install wheel bench bench-cuda bench-cuda-attention clean cpp-example cuda-wheel cuda-test cuda-check hip-check

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

# The CUDA grid on the visible GPU, one report: benchmarks/results/cuda-<gpu>-<date>.md. Memory-bound ops at
# 16384x4096, 65536x1024 and 4096x8192 (bf16, fp32), forward+backward, small shapes (their latency from Python to
# the result: --latency), RoPE, GEMM; ours vs eager, torch.compile and Liger (when installed) in the same run.
# BENCH_PY: the Python to run it with (a GPU machine's own, e.g. BENCH_PY=python3; the default is the CPU venv's).
BENCH_PY ?= $(PY)
CUDA_GRID := $(BENCH_PY) -m yirage_ext.bench --device cuda --providers yirage torch compile liger --progress never
bench-cuda:
	@set -e; rc=0; tmp=$$(mktemp -d); \
	gpu=$$($(BENCH_PY) -c "import re, torch; print(re.sub('[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-'))"); \
	out=benchmarks/results/cuda-$$gpu-$$(date +%F); \
	$(CUDA_GRID) --ops rms_norm fused_add_rms_norm layer_norm softmax log_softmax silu_and_mul gelu_and_mul gelu \
		--dtype bfloat16 float32 --shapes 16384x4096 65536x1024 4096x8192 --markdown $$tmp/1.md --csv $$tmp/1.csv || rc=1; \
	$(CUDA_GRID) --ops rms_norm layer_norm softmax silu_and_mul --dtype bfloat16 float32 --backward \
		--shapes 16384x4096 4096x8192 --markdown $$tmp/2.md --csv $$tmp/2.csv || rc=1; \
	$(CUDA_GRID) --ops rms_norm fused_add_rms_norm layer_norm softmax log_softmax silu_and_mul gelu_and_mul gelu \
		--dtype bfloat16 --shapes 1x4096 8x4096 64x4096 --latency --markdown $$tmp/3.md --csv $$tmp/3.csv || rc=1; \
	$(CUDA_GRID) --ops rotary_embedding --dtype bfloat16 --shapes 1x32x8x128 64x32x8x128 --latency \
		--markdown $$tmp/3r.md --csv $$tmp/3r.csv || rc=1; \
	$(CUDA_GRID) --ops rotary_embedding matmul linear --dtype bfloat16 float32 \
		--shapes rotary_embedding:16384x32x8x128 rotary_embedding:4096x32x8x128 matmul:2048x2048x2048 \
		matmul:4096x4096x4096 matmul:8192x8192x8192 linear:4096x4096x4096 linear:64x4096x4096 linear:1x4096x4096 \
		--markdown $$tmp/4.md --csv $$tmp/4.csv || rc=1; \
	cat $$tmp/1.md $$tmp/2.md $$tmp/3.md $$tmp/3r.md $$tmp/4.md > $$out.md; cat $$tmp/1.csv > $$out.csv; \
	for f in 2 3 3r 4; do tail -n +2 $$tmp/$$f.csv >> $$out.csv; done; \
	rm -rf $$tmp; echo "bench-cuda: wrote $$out.md and $$out.csv"; exit $$rc

# Attention on the visible GPU, bf16, one report: benchmarks/results/cuda-attention-<gpu>-<date>.md/.csv. Ours vs SDPA
# (torch: its default backend; flash, cudnn, efficient: one backend each). Prefill B4 H32 S4096 D128 and D64, S2048
# and S16384 D128, B4 H16 S4096 D256, full and causal (the shape suffix -full / -causal); forward+backward B4 H32 S4096 D128; decode
# B1 and B64, Hq32 Hk8, Sq1, Sk 1024 / 32768 / 131072, D128 (B64 Sk131072: 34 GB of K/V). Prefill rows give
# TFLOP/s and % of the dense bf16 matmul rate, decode rows GB/s and % of the copy bandwidth (both measured in the
# run). Parts 1 and 2 time the providers of each case in turn (--interleave): one after another, a long call that runs
# the GPU into its power limit slows the ones timed after it. Part 3 (decode) does not: taken in turns, B1 calls
# timed slower and noisy, intermittently (SDPA's flash backend 14.6 -> 83.9 us in one run), where a provider's host
# launch is about as long as the L2 flush that otherwise hides it (cuda-attention-decode-timing-h200-2026-11-28.md
# in benchmarks/results). Separate from bench-cuda, to fit a 10-minute call; each part can also be run alone
# (ATTN_PARTS="1 3").
ATTN_PARTS ?= 1 2 3
CUDA_ATTN := $(BENCH_PY) -m yirage_ext.bench --device cuda --ops attention --dtype bfloat16 \
	--providers yirage torch flash cudnn efficient --progress never
ATTN_SHAPES_1 := --interleave --shapes 4x32x4096x128-full 4x32x4096x128-causal 4x32x4096x64-full 4x32x4096x64-causal \
	4x32x2048x128-full 4x32x2048x128-causal 4x32x16384x128-full 4x32x16384x128-causal \
	4x16x4096x256-full 4x16x4096x256-causal
ATTN_SHAPES_2 := --interleave --backward --shapes 4x32x4096x128-full 4x32x4096x128-causal 4x32x4096x64-full 4x16x4096x256-full
ATTN_SHAPES_3 := --shapes 1x32x8x1x1024x128-full 1x32x8x1x32768x128-full 1x32x8x1x131072x128-full \
	64x32x8x1x1024x128-full 64x32x8x1x32768x128-full 64x32x8x1x131072x128-full
bench-cuda-attention:
	@set -e; rc=0; tmp=$$(mktemp -d); \
	gpu=$$($(BENCH_PY) -c "import re, torch; print(re.sub('[^a-z0-9]+', '-', torch.cuda.get_device_name().lower()).strip('-'))"); \
	out=benchmarks/results/cuda-attention-$$gpu-$$(date +%F); \
	for p in $(ATTN_PARTS); do \
		case $$p in 1) shapes="$(ATTN_SHAPES_1)";; 2) shapes="$(ATTN_SHAPES_2)";; \
			3) shapes="$(ATTN_SHAPES_3)";; *) echo "ATTN_PARTS: expected 1, 2 or 3, got $$p"; exit 2;; esac; \
		$(CUDA_ATTN) $$shapes --markdown $$tmp/$$p.md --csv $$tmp/$$p.csv || rc=1; \
	done; \
	first=1; : > $$out.md; : > $$out.csv; \
	for p in $(ATTN_PARTS); do \
		[ -f $$tmp/$$p.md ] && cat $$tmp/$$p.md >> $$out.md; \
		if [ -f $$tmp/$$p.csv ]; then if [ $$first = 1 ]; then cat $$tmp/$$p.csv >> $$out.csv; first=0; \
			else tail -n +2 $$tmp/$$p.csv >> $$out.csv; fi; fi; \
	done; \
	rm -rf $$tmp; echo "bench-cuda-attention: wrote $$out.md and $$out.csv"; exit $$rc

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
		missing = [op for op in yirage_ext.backends.op_table() \
		           if not torch._C._dispatch_has_kernel_for_dispatch_key('yirage::' + op, 'CUDA')]; \
		assert not missing, f'no CUDA kernel for {missing}'; \
		print('cuda-check: torch', torch.__version__, '- CUDA kernels registered for every op')"
	YIRAGE_TEST_ISAS=best $(CUDA_VENV)/bin/pytest tests $(CUDA_CHECK_PYTEST_ARGS)

cuda-check: cuda-wheel
	$(MAKE) cuda-test

# HIP_PLATFORM=amd: Debian's hipcc would pick nvcc where it finds one. HIP_ARCH: the --offload-arch compiled for.
HIP_ARCH ?= gfx90a
hip-check: $(DEPS)
	HIP_PLATFORM=amd $(PY) .ci/hip_check.py --arch $(HIP_ARCH)

clean:
	rm -rf build dist *.egg-info yirage_ext/_C*.so yirage_ext/_C.build.json
