"""DDP communication hooks: fp16/bf16 compression halves the bytes and still trains.

mpi_scripts/comm_hooks.py checks each hook's numbers against the plain average and
counts the bytes each all-reduce puts on the wire; the training test runs the MLP
recipe of ``plugtorch train`` on 2 ranks with the fp16 hook and holds it to the
recipe's accuracy target (benchmarks/RESULTS.md: >= 97.5%).
"""
from __future__ import annotations

import json

import pytest
from mpi_harness import check, launch, needs_mpi


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_hooks_average_like_torch_and_halve_the_bytes(nprocs):
    check(launch(nprocs, "comm_hooks.py"), nprocs)


@needs_mpi
def test_fp16_compressed_training_reaches_the_mlp_target(data_root, tmp_path):
    result = launch(2, "train_with_hook.py", "fp16_compress_hook", data_root, timeout=240)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert metrics["bytes_ratio"] == pytest.approx(0.5, abs=1e-6), metrics
    assert metrics["test_accuracy"] >= 0.975, metrics
