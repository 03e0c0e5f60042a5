"""pytorch/examples' distributed/ddp-tutorial-series scripts, vendored under
tests/examples/scripts/ddp_tutorial_series/ (commit 77f55b9, CPU edits only), run under
``python -m plugtorch.distributed.run`` as their README runs them under torchrun, with
``import torch`` resolving to plugtorch (mpi_scripts/torch_is_plugtorch.py).

Every job runs with a timeout (mpi_harness.run): a failing or hanging rank fails the test.
The scripts' model is ``Linear(20, 1)`` under a one-class cross entropy, whose loss is 0 and
whose gradients are 0 (upstream's choice), so what is checked is that the job trained every
epoch on every rank, step counts and batch sizes as torch's DistributedSampler gives them,
and wrote, resumed from and rewrote its snapshot as the tutorial describes.
"""
from __future__ import annotations

import pathlib
import re
import shlex
import sys

import pytest
from mpi_harness import SCRIPTS, _env, needs_mpi, run

import plugtorch
from plugtorch.distributed import netns

TUTORIAL = pathlib.Path(__file__).resolve().parents[1] / "examples" / "scripts" / "ddp_tutorial_series"
LAUNCH = [sys.executable, "-m", "plugtorch.distributed.run"]


def as_torch_script(name: str, *args) -> list[str]:
    """The launcher's target: the tutorial script run with ``torch`` being plugtorch."""
    return ["-m", "torch_is_plugtorch", str(TUTORIAL / name), *map(str, args)]


def ok(result):
    assert result.returncode == 0, f"exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def epochs(stdout: str) -> list[tuple[int, int, int, int]]:
    """(rank, epoch, batch size, steps) for each "[GPUr] Epoch e | Batchsize: b | Steps: s" line."""
    return [tuple(map(int, m)) for m in
            re.findall(r"\[GPU(\d+)\] Epoch (\d+) \| Batchsize: (\d+) \| Steps: (\d+)", stdout)]


def snapshot(path: pathlib.Path) -> dict:
    snap = plugtorch.load(path)
    assert sorted(snap) == ["EPOCHS_RUN", "MODEL_STATE"], sorted(snap)
    assert sorted(snap["MODEL_STATE"]) == ["bias", "weight"]  # the bare module's keys, not DDP's
    assert tuple(snap["MODEL_STATE"]["weight"].shape) == (1, 20)
    return snap


def env(**extra):
    return _env(PYTHONPATH=str(SCRIPTS), **extra)


def torchrun(*args, timeout=60, **extra_env):
    return run([*LAUNCH, *map(str, args)], timeout=timeout, env=env(**extra_env))


@needs_mpi
def test_multigpu_torchrun_trains_and_snapshots(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the script writes snapshot.pt where it runs
    result = ok(torchrun("--nproc-per-node", 2, *as_torch_script("multigpu_torchrun.py", 3, 1, "--batch_size", 16)))
    # 2048 samples over 2 ranks, 16 a batch: 64 steps an epoch on each rank, every epoch
    assert sorted(epochs(result.stdout)) == [(r, e, 16, 64) for r in (0, 1) for e in range(3)], result.stdout
    saved = re.findall(r"Epoch (\d+) \| Training snapshot saved at snapshot.pt", result.stdout)
    assert saved == ["0", "1", "2"], result.stdout  # rank 0 only, after each epoch (save_every 1)
    assert snapshot(tmp_path / "snapshot.pt")["EPOCHS_RUN"] == 2
    assert "Loading snapshot" not in result.stdout


@needs_mpi
def test_multigpu_torchrun_restarts_from_its_snapshot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # rank 1 dies at its 70th step: epoch 2 of 4 (32 steps each), after the snapshots of epochs 0 and 1
    result = ok(torchrun("--nproc-per-node", 2, "--max-restarts", 1,
                         *as_torch_script("multigpu_torchrun.py", 4, 1), PLUGTORCH_TEST_DIE_AT="1:69"))
    assert "worker group failed (attempt 0): rank: 1 (local_rank: 1)" in result.stderr, result.stderr
    assert "restarting (1/1)" in result.stderr
    first, _, second = result.stdout.partition("Loading snapshot")
    assert second, f"the restarted job did not load the snapshot:\n{result.stdout}"
    assert (0, 2, 32, 32) in epochs(first) and (0, 3, 32, 32) not in epochs(first), first
    assert second.count("Resuming training from snapshot at Epoch 1") == 2, second  # on both ranks
    # the tutorial resumes at the epoch its snapshot was taken after, so epochs 1 to 3 run again
    assert sorted(epochs(second)) == [(r, e, 32, 32) for r in (0, 1) for e in (1, 2, 3)], second
    assert snapshot(tmp_path / "snapshot.pt")["EPOCHS_RUN"] == 3


REASON = netns.why_unavailable() if sys.platform.startswith("linux") else "network namespaces exist on Linux only"


@needs_mpi
@pytest.mark.skipif(REASON is not None, reason=f"cannot build a cluster of network namespaces here: {REASON}")
def test_multinode_on_two_namespace_hosts(tmp_path, monkeypatch):
    """multinode.py on 2 "hosts" x 2 workers. torchrun starts one agent per node with
    ``--node-rank i``; plugtorch's launcher is started once, on node 0, with ``--hostfile``,
    and its mpiexec starts node 1's workers over the (namespace) ssh launcher."""
    monkeypatch.chdir(tmp_path)
    with netns.Cluster(hosts=2) as cluster:
        hostfile = tmp_path / "hosts"
        hostfile.write_text("".join(f"{a}:2\n" for a in cluster.addresses))
        launcher = [*LAUNCH, "--nnodes", 2, "--nproc-per-node", 2, "--hostfile", hostfile,
                    *as_torch_script("multinode.py", 2, 1, "--batch_size", 32)]
        # on host h1, as cluster.mpiexec starts its mpiexec; Hydra reaches h2 through the
        # cluster's ssh stand-in, and UCX keeps to TCP, so the gradients cross the link
        cmd = ["ip", "netns", "exec", cluster.namespaces[0], "unshare", "--uts", "sh", "-c",
               "hostname h1; exec " + " ".join(shlex.quote(str(a)) for a in launcher)]
        before = cluster.tx_bytes()
        result = run(cmd, timeout=90, env=env(HYDRA_LAUNCHER="ssh", HYDRA_LAUNCHER_EXEC=cluster.launcher,
                                               UCX_TLS="tcp,self", PLUGTORCH_TEST_SAY_HOST="1"))
        sent = [after - b for after, b in zip(cluster.tx_bytes(), before)]
    ok(result)
    where = sorted(re.findall(r"worker (\d) on (h\d), node (\d), local rank (\d)", result.stdout))
    assert where == [("0", "h1", "0", "0"), ("1", "h1", "0", "1"), ("2", "h2", "1", "0"), ("3", "h2", "1", "1")], \
        result.stdout
    # 2048 samples over 4 ranks, 32 a batch: 16 steps an epoch; "[GPUr]" prints the global rank
    assert sorted(epochs(result.stdout)) == [(r, e, 32, 16) for r in range(4) for e in range(2)], result.stdout
    assert snapshot(tmp_path / "snapshot.pt")["EPOCHS_RUN"] == 1  # written by global rank 0 only
    assert re.findall(r"Epoch (\d+) \| Training snapshot saved", result.stdout) == ["0", "1"], result.stdout
    # each step all-reduces the 21 float32 gradients between the hosts: traffic both ways
    assert min(sent) > 2 * 16 * 21 * 4, sent
