"""plugtorch.distributed, DDP and the MPI plugin under ``mpiexec``.

Each test launches ``mpiexec -n N python mpi_scripts/<script>`` in a subprocess with
a timeout. A failed assert on any rank aborts the job (the plugin's excepthook), so
the launcher's exit status is the verdict, and the output is shown on failure.
These run in the normal ``python -m pytest`` command; ``-m mpi`` selects just them.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from mpi_harness import MPIEXEC, _env, check, launch, needs_mpi

import plugtorch


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_collectives(nprocs):
    check(launch(nprocs, "collectives.py"), nprocs)


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_ddp_training_matches_one_process(nprocs, single_process_params, tmp_path):
    """The property users rely on: 50 SGD steps of an MLP with the global batch split over N
    ranks end with the parameters of one process (float32 reduction-order error only)."""
    out = tmp_path / f"n{nprocs}.npz"
    result = launch(nprocs, "train_mlp.py", out)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    params = np.load(out)
    assert set(params) == set(single_process_params)
    worst = max(float(np.abs(params[k] - single_process_params[k]).max()) for k in params)
    assert worst <= 1e-5, f"max abs parameter difference {worst:g} after 50 steps on {nprocs} ranks"


@needs_mpi
def test_ddp_behaviours():
    check(launch(2, "ddp_features.py"), 2)


@needs_mpi
def test_a_failing_rank_ends_the_job_promptly():
    start = time.monotonic()
    result = launch(2, "fault.py", timeout=30)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert elapsed < 30
    assert "ValueError: injected failure on rank 1 at step 20" in result.stderr, result.stderr
    assert "uncaught ValueError on rank 1 of 2" in result.stderr
    assert "outlived" not in result.stdout


@needs_mpi
def test_debug_mode_detects_mismatched_collectives():
    check(launch(2, "debug_mismatch.py", env=_env(PLUGTORCH_DISTRIBUTED_DEBUG="1")), 2)


def _plain_python(code: str, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(**env), timeout=60)


def test_plugin_import_does_not_start_mpi():
    """A plain single-process run loads the MPI plugin but never imports mpi4py.MPI."""
    result = _plain_python(
        "import sys, plugtorch, plugtorch.distributed as d\n"
        "assert 'mpi' in plugtorch.list_plugins(), plugtorch.list_plugins()\n"
        "d.init()\n"
        "assert d.get_backend() == 'single' and d.get_world_size() == 1\n"
        "assert 'mpi4py.MPI' not in sys.modules\n")
    assert result.returncode == 0, result.stderr


def test_launched_without_mpi4py_falls_back_with_a_warning():
    result = _plain_python(
        "import sys, warnings; sys.modules['mpi4py'] = None\n"
        "import plugtorch.distributed as d\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always'); d.init()\n"
        "assert d.get_world_size() == 1\n"
        "assert any('mpi4py is not installed' in str(x.message) for x in w), [str(x.message) for x in w]\n"
        "d.destroy_process_group()\n"
        "try: d.init_process_group('mpi')\n"
        "except RuntimeError as e: assert 'mpi4py is not installed' in str(e), e\n"
        "else: raise AssertionError('backend=mpi without mpi4py must fail')\n",
        PMI_SIZE="2", PMI_RANK="0")
    assert result.returncode == 0, result.stderr


# -- plugtorch train: one process and N ranks train the same model; checkpoints cross world sizes

def train(nprocs, data_root, tmp_path, name, epochs, resume_from=None):
    """Run ``plugtorch train`` (MLP, MNIST subset); returns (metrics, checkpoint path, stdout)."""
    ckpt = tmp_path / f"{name}.ckpt"
    if resume_from is not None:
        ckpt.write_bytes(resume_from.read_bytes())
    metrics = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "plugtorch", "train", "--dataset", "mnist", "--model", "mlp",
           "--optimizer", "sgd", "--lr", "0.05", "--lr-schedule", "constant", "--batch-size", "64",
           "--epochs", str(epochs),
           "--limit-train", "1024", "--limit-test", "300", "--data-dir", str(data_root),
           "--no-download", "--checkpoint", str(ckpt), "--metrics-json", str(metrics), "--quiet"]
    if resume_from is not None:
        cmd.append("--resume")
    if nprocs > 1:
        cmd = [MPIEXEC, "-n", str(nprocs)] + cmd
    result = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120)
    assert result.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(metrics.read_text()), ckpt, result.stdout


def params(ckpt):
    return {k: v.numpy() for k, v in plugtorch.load(ckpt)["model"].items()}


def assert_trained_alike(a, b):
    """Two runs that saw the same batches end with the same parameters up to rounding, except
    where a ReLU's input lay within rounding of 0: the two runs sum a batch's rows in different
    orders (64 rows, or 2 x 32 and an all-reduce), so such a unit may be on in one and off in
    the other, and its gradient for that sample changes by a whole term (a few hidden units
    moved by up to ~1e-3, seen on an Intel Xeon). A data-parallel bug (gradients summed instead
    of averaged, a rank's dropped, a stale bucket) changes every update: most parameters would
    then differ by far more than rounding, which is what the median and 90th percentile catch."""
    d = np.concatenate([np.abs(a[k] - b[k]).ravel() for k in a])
    assert np.median(d) < 5e-6 and np.percentile(d, 90) < 5e-5 and d.max() < 5e-3, (
        f"parameter differences: median {np.median(d):.3g}, 90th percentile {np.percentile(d, 90):.3g}, "
        f"max {d.max():.3g}")


@needs_mpi
def test_two_ranks_train_like_one_and_checkpoints_cross_world_sizes(data_root, tmp_path):
    m1, ck1, out1 = train(1, data_root, tmp_path, "one", epochs=1)
    m2, ck2, out2 = train(2, data_root, tmp_path, "two", epochs=1)
    assert m2["world_size"] == 2 and m1["world_size"] == 1
    assert out2.count("final test accuracy") == 1, "only rank 0 prints"
    # the global batch of 64 is split 32 + 32: same samples per step, same parameters
    assert_trained_alike(params(ck1), params(ck2))
    assert m2["test_loss"] == pytest.approx(m1["test_loss"], abs=1e-3)
    assert m2["test_samples"] == m1["test_samples"] == 300  # eval metrics summed over ranks

    # a 2-rank checkpoint resumes on 1 process, and a 1-process checkpoint on 2 ranks
    r1, ck21, _ = train(1, data_root, tmp_path, "two_then_one", epochs=2, resume_from=ck2)
    r2, ck12, _ = train(2, data_root, tmp_path, "one_then_two", epochs=2, resume_from=ck1)
    assert len(r1["history"]) == len(r2["history"]) == 2
    assert_trained_alike(params(ck21), params(ck12))
    assert r1["test_loss"] == pytest.approx(r2["test_loss"], abs=1e-3)


@needs_mpi
def test_train_error_on_one_rank_ends_the_job(data_root, tmp_path):
    """Rank 1 cannot find its data and returns an error status instead of raising; the
    CLI must still end rank 0, which is already waiting for it in a collective."""
    common = ["-m", "plugtorch", "train", "--epochs", "1", "--limit-train", "256", "--limit-test",
              "100", "--no-download", "--quiet"]
    cmd = [MPIEXEC, "-n", "1", sys.executable, *common, "--data-dir", str(data_root), ":",
           "-n", "1", sys.executable, *common, "--data-dir", str(tmp_path / "nowhere")]
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=60)
    assert time.monotonic() - start < 30
    assert result.returncode == 1, result.stderr
    assert "plugtorch train: error: MNIST files not found" in result.stderr
