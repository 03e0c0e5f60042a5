#!/usr/bin/env bash
# Every GPU check and benchmark of the CuPy backend, in one command, for a machine with an
# NVIDIA GPU, CuPy (pip install -e ".[dev]" or ".[cupy13]") and, for the peer figures, torch
# with CUDA. Results land in $OUT (default gpu-results/): JUnit XML, JSON, logs. Each step
# stays under 10 minutes; the exit status is non-zero if any check failed.
#
#   bash benchmarks/gpu_check.sh            # or: OUT=/some/dir bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-results}"
mkdir -p "$OUT"
export PLUGTORCH_DATA="${PLUGTORCH_DATA:-$PWD/data}"
export CUPY_CACHE_DIR="${CUPY_CACHE_DIR:-$PWD/.cupy-cache}"  # NVRTC output, reused between runs
status=0
step() { echo "== $1"; shift; timeout 600 "$@" || { echo "FAILED: $*"; status=1; }; }

python -c "import plugtorch; b = plugtorch.get_registry().backends['cupy']; \
assert b.available, 'the CuPy backend is unavailable here: ' + b.unavailable_reason; \
print('cupy backend:', plugtorch.cuda.device_count(), 'device(s)')" || exit 1

# 1. the conformance kit on the real backend and on its primitives-only twin
step "conformance (cupy)" python -m pytest -q -p no:cacheprovider --plugtorch-conformance \
    --plugtorch-backends cupy --junitxml="$OUT/conformance_cupy.xml" tests/cupy_backend/conftest.py
step "conformance (cupy_bare)" python -m pytest -q -p no:cacheprovider --plugtorch-conformance \
    --plugtorch-backends cupy_bare --junitxml="$OUT/conformance_cupy_bare.xml" tests/cupy_backend/conftest.py
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
# 5. benchmarks beside raw CuPy and PyTorch (CUDA events, medians after warm-up)
step "benchmarks" sh -c "python benchmarks/gpu_bench.py > '$OUT/gpu_bench.json'"
echo "results in $OUT (exit status $status)"
exit $status
