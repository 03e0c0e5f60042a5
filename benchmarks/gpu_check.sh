#!/usr/bin/env bash
# Every GPU check and benchmark of the CuPy backend, in one command, for a machine with an
# NVIDIA GPU, CuPy (pip install -e ".[dev]" or ".[cupy13]") and, for the peer figures, torch
# with CUDA. Results land in $OUT (default gpu-results/): JUnit XML, JSON, logs. The exit
# status is non-zero if any check failed.
#
#   bash benchmarks/gpu_check.sh            # or: OUT=/some/dir bash benchmarks/gpu_check.sh
#
# The conformance kit runs in pytest-xdist workers where xdist is installed (XDIST_WORKERS,
# default 8), while the parity, training and DDP checks run beside it in one background job
# (each is a host-bound loop, so they share the GPU without changing any result). The
# benchmarks run last, alone on the GPU. Each step is killed after STEP_TIMEOUT seconds (600).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-results}"
mkdir -p "$OUT"
export PLUGTORCH_DATA="${PLUGTORCH_DATA:-$PWD/data}"
export CUPY_CACHE_DIR="${CUPY_CACHE_DIR:-$PWD/.cupy-cache}"  # NVRTC output, reused between runs
STEP_TIMEOUT="${STEP_TIMEOUT:-600}"
status=0
step() {
    local name=$1 t0=$SECONDS; shift
    echo "== $name"
    if timeout "$STEP_TIMEOUT" "$@"; then echo "== $name: passed ($((SECONDS - t0)) s)"
    else echo "== $name: FAILED ($((SECONDS - t0)) s): $*"; status=1; fi
}

python -c "import plugtorch; b = plugtorch.get_registry().backends['cupy']; \
assert b.available, 'the CuPy backend is unavailable here: ' + b.unavailable_reason; \
print('cupy backend:', plugtorch.cuda.device_count(), 'device(s)')" || exit 1

# 2-4, in the background while the conformance kit runs
others() {
    # 2. parity: 50 MNIST CNN steps from one state_dict, same batches, dropout off, within 1e-4
    step "parity" sh -c "python benchmarks/cupy_parity.py --backend cupy --steps 50 --batch 64 > '$OUT/parity.json'"
    # ... and the same steps under plugtorch.compile (replayed, elementwise chains fused into one kernel each)
    step "parity (compiled)" sh -c "python benchmarks/cupy_parity.py --backend cupy --compile --steps 50 --batch 64 \
        > '$OUT/parity_compiled.json'"
    # 3. the training command: >= 98.8% test accuracy after 3 epochs
    step "train" plugtorch train --backend cupy --model cnn --epochs 3 --data-dir "$PLUGTORCH_DATA" \
        --metrics-json "$OUT/train_cnn_cupy.json"
    step "train accuracy" python -c "import json, sys; a = json.load(open('$OUT/train_cnn_cupy.json'))['test_accuracy']; \
print('test accuracy', a); sys.exit(a < 0.988)"
    # 4. DDP with CuPy tensors on 2 ranks ends with one process's parameters
    step "ddp" sh -c "python tests/distributed/mpi_scripts/train_mlp.py '$OUT/ddp_n1.npz' && \
        TRAIN_DEVICE=cupy mpiexec -n 2 python tests/distributed/mpi_scripts/train_mlp.py '$OUT/ddp_n2.npz' && \
        python -c \"import numpy as np; a, b = np.load('$OUT/ddp_n1.npz'), np.load('$OUT/ddp_n2.npz'); \
w = max(float(abs(a[k] - b[k]).max()) for k in a); print('max abs difference', w); assert w <= 1e-5\""
    return $status
}
others > "$OUT/others.log" 2>&1 &
others_pid=$!

# 1. the tests that need a GPU (hand-written kernels on the device against CuPy's own), then the
# conformance kit on the real backend and on its primitives-only twin
step "GPU tests" python -m pytest -q -p no:cacheprovider --tb=short --junitxml="$OUT/gpu_tests.xml" \
    tests/cupy_backend/test_on_gpu.py
xdist=()
if python -c "import xdist" 2>/dev/null; then xdist=(-n "${XDIST_WORKERS:-8}"); fi
step "conformance (cupy, cupy_bare)" python -m pytest -q -p no:cacheprovider --tb=short "${xdist[@]}" \
    --plugtorch-conformance --plugtorch-backends cupy,cupy_bare --junitxml="$OUT/conformance.xml" \
    tests/cupy_backend/conftest.py
wait "$others_pid" || status=1
cat "$OUT/others.log"

# 5. benchmarks beside raw CuPy and PyTorch (CUDA events, medians after warm-up), alone on the GPU
step "benchmarks" sh -c "python benchmarks/gpu_bench.py > '$OUT/gpu_bench.json'"
# 6. where an eager step's host time goes: the CuPy calls beside PyTorch's, and a cProfile
step "host overhead" sh -c "python benchmarks/gpu_host_overhead.py > '$OUT/gpu_host_overhead.json'"
step "profile" sh -c "python benchmarks/gpu_profile_step.py > '$OUT/profile_cnn_b64.txt'"
echo "results in $OUT (exit status $status)"
exit $status
