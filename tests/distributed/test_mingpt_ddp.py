"""pytorch/examples' distributed/minGPT-ddp, vendored under tests/examples/scripts/mingpt_ddp/
(commit 77f55b9, CPU edits only), run under ``python -m plugtorch.distributed.run`` as its
run_example.sh runs it under torchrun (``--standalone``), with ``import torch`` resolving to
plugtorch (mpi_scripts/torch_is_plugtorch.py). Hydra reads the example's own config; the command line
makes it tiny (2 layers of width 32 on 261 characters), local (the shortened input.txt for the
URL) and deterministic (no dropout; every rank seeds plugtorch alike, so random_split agrees).
trainer.py imports boto3 for s3:// snapshots only: a stand-in (standin/boto3.py) takes its
place, and raises if the trainer ever reaches it.

What is checked: both ranks train every epoch with the step counts DistributedSampler gives,
rank 0 writes the snapshot after each epoch, a second job resumes from it, and 2 ranks of
batch 8 (resumed after epoch 2) end with the parameters, optimizer steps and losses of one
process of batch 16 run straight through; torch, given the same vendored script and command
line, prints the same lines, writes a snapshot of the same structure and trains alike.
"""
from __future__ import annotations

import math
import pathlib
import re
import socket
import sys

import pytest
from mpi_harness import SCRIPTS, _env, needs_mpi, run

import plugtorch

pytest.importorskip("hydra", reason="minGPT-ddp reads its config with hydra: pip install hydra-core (a dev extra)")
fsspec = pytest.importorskip("fsspec", reason="minGPT-ddp opens its data and snapshots with fsspec: pip install fsspec")

MINGPT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "scripts" / "mingpt_ddp"
TEXT = MINGPT / "data" / "input.txt"
STAND_INS = pathlib.Path(__file__).parent / "standin"
TRUNCATE, BLOCK, BATCH = 0.01, 16, 8
TINY = [f"data_config.path={TEXT}", f"data_config.block_size={BLOCK}", f"data_config.truncate={TRUNCATE}",
        "gpt_config.n_layer=2", "gpt_config.n_head=2", "gpt_config.n_embd=32",
        "+gpt_config.embd_pdrop=0.0", "+gpt_config.resid_pdrop=0.0", "+gpt_config.attn_pdrop=0.0",
        "trainer_config.data_loader_workers=0", "trainer_config.save_every=1", "trainer_config.use_amp=false"]
LINE = re.compile(r"\[RANK(\d+)\] Epoch (\d+) \| Iter (\d+) \| (Train|Eval) Loss (\d+\.\d+)")


def chars() -> int:
    """How many characters CharDataset keeps: the first ``truncate`` of the text."""
    return int(len(TEXT.read_text(encoding="utf-8")) * TRUNCATE)


def train_samples() -> int:
    return int((chars() - BLOCK) * 0.9)  # random_split at train_split 0.9 of the (chars - block) windows


def steps(ranks: int, batch: int) -> int:
    """Optimizer steps an epoch on each rank: DistributedSampler pads to a multiple of the ranks."""
    return math.ceil(math.ceil(train_samples() / ranks) / batch)


def config(epochs: int, batch: int) -> list[str]:
    return [*TINY, f"trainer_config.max_epochs={epochs}", f"trainer_config.batch_size={batch}"]


def ok(result):
    assert result.returncode == 0, f"exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def mingpt(ranks: int, epochs: int, batch: int):
    """The example on ``ranks`` plugtorch workers in the current directory (where it keeps
    gpt_snapshot.pt), launched as run_example.sh launches it."""
    cmd = [sys.executable, "-m", "plugtorch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
           "-m", "torch_is_plugtorch", str(MINGPT / "main.py"), *config(epochs, batch)]
    return ok(run(cmd, timeout=60, env=_env(PYTHONPATH=f"{SCRIPTS}:{STAND_INS}", PLUGTORCH_TEST_SEED="0")))


def losses(stdout: str, kind: str = "Train") -> dict[tuple[int, int], float]:
    """{(rank, epoch): loss} of the "[RANKr] Epoch e | Iter 0 | <kind> Loss x" lines."""
    found = [(int(r), int(e), int(i), float(x)) for r, e, i, k, x in LINE.findall(stdout) if k == kind]
    assert all(i == 0 for _, _, i, _ in found), stdout  # only every 100th step is printed
    return {(r, e): x for r, e, _, x in found}


def saved(stdout: str) -> list[int]:
    return [int(e) for e in re.findall(r"Snapshot saved at epoch (\d+)", stdout)]


def snapshot(path: pathlib.Path, epoch: int, steps_run: int) -> dict:
    snap = plugtorch.load(path)
    assert sorted(snap) == ["finished_epoch", "model_state", "optimizer_state"], sorted(snap)
    assert snap["finished_epoch"] == epoch
    assert not any(k.startswith("module.") for k in snap["model_state"])  # the bare model's keys, not DDP's
    state = snap["optimizer_state"]["state"]
    assert len(state) == sum(not k.endswith(".mask") for k in snap["model_state"])  # every parameter, no buffer
    assert {int(s["step"]) for s in state.values()} == {steps_run}
    return snap


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """3 epochs of batch 16 on one plugtorch worker: (its stdout, its last snapshot, that file)."""
    where = tmp_path_factory.mktemp("mingpt_one_process")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(where)
        stdout = mingpt(1, epochs=3, batch=2 * BATCH).stdout
    path = where / "gpt_snapshot.pt"
    return stdout, snapshot(path, 3, 3 * steps(1, 2 * BATCH)), path


@needs_mpi
def test_two_ranks_train_resume_and_match_one_process(tmp_path, monkeypatch, one_process):
    per_epoch = steps(2, BATCH)
    assert train_samples() % 2 == 0 and per_epoch == steps(1, 2 * BATCH)  # the two runs' batches pair up

    monkeypatch.chdir(tmp_path)
    first = mingpt(2, epochs=2, batch=BATCH)
    assert first.stdout.count(f"Data has {chars()} characters") == 2, first.stdout
    assert first.stdout.count("Snapshot not found. Training model from scratch") == 2, first.stdout
    assert sorted(losses(first.stdout)) == [(r, e) for r in (0, 1) for e in (1, 2)], first.stdout
    assert sorted(losses(first.stdout, "Eval")) == [(r, e) for r in (0, 1) for e in (1, 2)], first.stdout
    assert saved(first.stdout) == [1, 2], first.stdout  # by rank 0 only, after each epoch
    after_two = snapshot(tmp_path / "gpt_snapshot.pt", 2, 2 * per_epoch)

    resumed = mingpt(2, epochs=3, batch=BATCH)
    assert resumed.stdout.count("Resuming training from snapshot at Epoch 2") == 2, resumed.stdout
    assert sorted(losses(resumed.stdout)) == [(0, 3), (1, 3)], resumed.stdout  # epoch 3 only
    assert saved(resumed.stdout) == [3], resumed.stdout
    two = snapshot(tmp_path / "gpt_snapshot.pt", 3, 3 * per_epoch)

    # each rank's loss is the mean over its half of the single process's batch
    ranks = {**losses(first.stdout), **losses(resumed.stdout)}
    single = losses(one_process[0])
    for e in (1, 2, 3):
        assert (ranks[0, e] + ranks[1, e]) / 2 == pytest.approx(single[0, e], abs=3e-5), (e, ranks, single)
    moved = max((two["model_state"][k] - after_two["model_state"][k]).abs().max().item() for k in two["model_state"])
    assert moved > 1e-3  # so the tolerance below is far tighter than one epoch's change
    for name, p in two["model_state"].items():
        assert plugtorch.allclose(p, one_process[1]["model_state"][name], rtol=0, atol=5e-5), name


def structure(obj):
    """A snapshot with every tensor as (shape, dtype name) and optimizer steps as ints."""
    if isinstance(obj, dict):
        return {k: int(v) if k == "step" else structure(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [structure(v) for v in obj]
    if hasattr(obj, "shape"):
        return tuple(obj.shape), str(obj.dtype).rsplit(".", 1)[-1]
    return obj


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_mpi
def test_trains_and_snapshots_as_torch_does(tmp_path, monkeypatch, one_process):
    """The same script and command line on torch, as one process started the way torchrun starts
    its workers (torchrun itself would add seconds of start-up, not checks)."""
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    env = _env(PYTHONPATH=str(STAND_INS), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    theirs = ok(run([sys.executable, str(MINGPT / "main.py"), *config(3, 2 * BATCH)], timeout=60, env=env)).stdout
    mine = one_process[0]
    for kind in ("Train", "Eval"):
        assert sorted(losses(mine, kind)) == sorted(losses(theirs, kind)), (mine, theirs)
    assert saved(mine) == saved(theirs) == [1, 2, 3]
    reference = torch.load(tmp_path / "gpt_snapshot.pt", weights_only=False)
    # torch keeps each step as a float tensor, plugtorch as an int: compared as numbers
    assert structure(one_process[1]) == structure(reference)
    assert list(one_process[1]["model_state"]) == list(reference["model_state"])
    # each library reads the other's snapshot, plugtorch through fsspec as the trainer resumes
    with fsspec.open(str(tmp_path / "gpt_snapshot.pt")) as f:
        crossed = plugtorch.load(f, map_location="cpu")
    assert structure(crossed) == structure(reference)
    for name, p in crossed["model_state"].items():
        assert p.tolist() == reference["model_state"][name].tolist(), name
    assert structure(torch.load(one_process[2], weights_only=False)) == structure(one_process[1])
    # torch's run draws its own initial weights and split, so its losses agree only roughly:
    # both start at a uniform guess over the vocabulary and fall alike
    vocab = len(set(TEXT.read_text(encoding="utf-8")[:chars()]))
    for losses_ in (losses(mine), losses(theirs)):
        assert losses_[0, 1] == pytest.approx(math.log(vocab), abs=0.05), losses_
        assert losses_[0, 3] < losses_[0, 1] - 0.2, losses_
    assert losses(mine)[0, 3] == pytest.approx(losses(theirs)[0, 3], abs=0.15)
