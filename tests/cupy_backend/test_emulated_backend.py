"""The CuPy backend's code path, run on the CPU: ``cupy_emulated`` (backends/cupy_backend/emulation.py).

NumPy computes, checked call by call against the installed CuPy's API; the hand-written
kernels run from their .cu sources under plugtorch.testing.cuda_cpu. Each check runs in a
subprocess that loads the emulation plugin, so this suite's registry is left as it is:

* the whole conformance kit (values, dtypes, gradients, invalid inputs) on it;
* MNIST CNN training steps equal to NumPy's (the GPU parity check, shortened);
* DDP under mpiexec with its tensors (staged through host memory) equal to one process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plugtorch_backends.cupy_backend.probe import installed as cupy_installed

from plugtorch.testing.cuda_cpu import compiler_missing

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "plugtorch_backends.cupy_backend.emulation"

if not cupy_installed():
    pytest.skip("CuPy is not installed, and the emulated backend checks its calls against CuPy's API "
                "(pip install 'plugtorch[cupy13]')", allow_module_level=True)
if compiler_missing():
    pytest.skip(f"the kernels cannot be executed on the CPU: {compiler_missing()}", allow_module_level=True)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUGTORCH_CONFORMANCE")}
    env.update(PLUGTORCH_PLUGINS=PLUGIN, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **extra)
    return env


def _run(cmd, timeout, **extra):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=_env(**extra))
    return done, done.stdout[-6000:] + "\n" + done.stderr[-6000:]


def test_the_conformance_kit_passes_on_the_cupy_code_path(tmp_path):
    report = tmp_path / "conformance.xml"
    done, output = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--plugtorch-conformance",
                         "--plugtorch-backends", "cupy_emulated", f"--junitxml={report}",
                         str(ROOT / "tests" / "cupy_backend" / "conftest.py")], timeout=1500)
    assert done.returncode == 0, output
    assert " passed" in done.stdout and "failed" not in done.stdout.splitlines()[-1], output


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_cnn_training_steps_match_numpy(data_root, compiled):
    """Eager, and replayed by plugtorch.compile with the fuser's generated kernels."""
    done, output = _run([sys.executable, str(ROOT / "benchmarks" / "cupy_parity.py"), "--backend", "cupy_emulated",
                         "--steps", "10", "--batch", "8", "--data-dir", str(data_root)]
                        + (["--compile"] if compiled else []), timeout=600)
    assert done.returncode == 0, output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["max_rel_diff"] <= 1e-4 and len(result["cupy_emulated"]) == 10
    assert result["compiled"] is compiled


def test_ddp_with_its_tensors_matches_one_numpy_process(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "distributed"))
    try:
        from mpi_harness import HAVE_MPI4PY, MPIEXEC, launch
    finally:
        sys.path.pop(0)
    if MPIEXEC is None or not HAVE_MPI4PY:
        pytest.skip("no mpiexec/mpi4py: pip install mpich mpi4py")
    one, two = tmp_path / "n1.npz", tmp_path / "n2.npz"
    single = launch(0, "train_mlp.py", one, env=_env())
    assert single.returncode == 0, single.stderr
    result = launch(2, "train_mlp.py", two, timeout=240, env=_env(TRAIN_DEVICE="cupy_emulated"))
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    a, b = np.load(one), np.load(two)
    worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    assert worst <= 1e-5, f"max abs parameter difference {worst:g} after 50 steps on 2 ranks"


COMPILED_STEPS = r"""
import json, sys
import numpy as np
import plugtorch, plugtorch.nn.functional as F
from plugtorch import nn
from plugtorch.apps.train import MLP

def mlp():  # MNIST's MLP with Adam: no fusable chain, so the replay is bitwise eager's
    return MLP(), lambda ps: plugtorch.optim.Adam(ps, lr=1e-3), 784, 10, None

def tanh_net():  # a tanh layer and a tanh penalty: chains the fuser compiles into kernels
    net = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
    return (net, lambda ps: plugtorch.optim.SGD(ps, lr=0.1, momentum=0.9), 20, 4,
            lambda h: 0.01 * ((h * 0.5).tanh() ** 2).mean())

def run(net, compiled, steps):
    plugtorch.manual_seed(0)
    model, make_opt, features, classes, penalty = net()
    model.to("cupy_emulated")
    opt = make_opt(model.parameters())
    def step(x, y):
        opt.zero_grad()
        h = model(x)
        loss = F.cross_entropy(h, y) if penalty is None else F.cross_entropy(h, y) + penalty(h)
        loss.backward(); opt.step(); return loss
    f = plugtorch.compile(step, fullgraph=True) if compiled else step
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = plugtorch.tensor(rng.standard_normal((8, features)).astype(np.float32), device="cupy_emulated")
        y = plugtorch.tensor(rng.integers(0, classes, 8), device="cupy_emulated")
        losses.append(f(x, y).detach().cpu().numpy().item())
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], f

eager, compiled = run(mlp, False, 6), run(mlp, True, 6)
(l0, p0, _), (l1, p1, f) = run(tanh_net, False, 20), run(tanh_net, True, 20)
def chain(x):  # an elementwise chain: one generated kernel (the fuser's), run here under cuda_cpu
    return ((x * x + 1.0).sqrt() * 2.0 - 1.0).exp()
x = plugtorch.randn(16, 8).to("cupy_emulated")
c = plugtorch.compile(chain, fullgraph=True)
c(x), c(x)
close = bool(np.allclose(c(x).cpu().numpy(), chain(x).cpu().numpy(), rtol=1e-6, atol=0))  # libm's expf, sqrtf
print(json.dumps({"losses": eager[0] == compiled[0],
                  "params": all(np.array_equal(a, b) for a, b in zip(eager[1], compiled[1])),
                  "replays": compiled[2].replays, "chain": [close, c.fused],
                  "fused_net": {"fused": f.fused, "replays": f.replays,
                                "loss": max(abs(a - b) / abs(a) for a, b in zip(l0, l1)),
                                "params": max(float(np.abs(a - b).max()) for a, b in zip(p0, p1))}}))
"""


def test_plugtorch_compile_replays_the_cupy_code_path():
    done, output = _run([sys.executable, "-c", COMPILED_STEPS], timeout=300)
    assert done.returncode == 0, output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    fused_net = result.pop("fused_net")
    assert result == {"losses": True, "params": True, "replays": 4, "chain": [True, 1]}
    # a net with fused chains: the fused tanh is glibc's here (CUDA's on a GPU), not NumPy's, so
    # compiled and eager agree to float32 rounding, not bit for bit
    assert fused_net["fused"] >= 2 and fused_net["replays"] == 18, fused_net
    assert fused_net["loss"] < 1e-5 and fused_net["params"] < 1e-5, fused_net
