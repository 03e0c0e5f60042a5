"""Across hosts, really run: network namespaces on this machine, one "host" each, joined by
veth links, and ``mpiexec -hosts`` over them as on a cluster (plugtorch.distributed.netns).

MPI's data between hosts then crosses the links over TCP, which the tests check by the
bytes each link carried. Where namespaces cannot be created (no root, no iproute2, not
Linux) the tests skip and say why.
"""
from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest
from mpi_harness import _env, needs_mpi, run, script

from plugtorch.distributed import netns

REASON = (netns.why_unavailable() if sys.platform.startswith("linux")
          else "network namespaces exist on Linux only")
needs_netns = pytest.mark.skipif(REASON is not None,
                                 reason=f"cannot build a cluster of network namespaces here: {REASON}")


@needs_mpi
@needs_netns
def test_two_hosts_over_tcp_train_like_one_process(single_process_params, tmp_path):
    out = tmp_path / "two_hosts.npz"
    with netns.Cluster(hosts=2) as cluster:
        before = cluster.tx_bytes()
        result = run(cluster.mpiexec(script("train_mlp.py", out), ranks_per_host=2), timeout=90, env=_env())
        sent = [after - b for after, b in zip(cluster.tx_bytes(), before)]
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert sorted(re.findall(r"rank \d/4 on (h\d)", result.stdout)) == ["h1", "h1", "h2", "h2"], result.stdout
    params = np.load(out)
    worst = max(float(np.abs(params[k] - single_process_params[k]).max()) for k in params)
    assert worst <= 1e-5, f"max abs parameter difference {worst:g} after 50 steps on 2 hosts x 2 ranks"
    # every step's gradients (6,410 float32) crossed between the hosts, both ways
    gradient_bytes = 4 * sum(p.size for p in params.values())
    assert min(sent) > 50 * gradient_bytes / 2, sent


@needs_mpi
@needs_netns
def test_compression_halves_the_bytes_on_the_wire():
    with netns.Cluster(hosts=2) as cluster:
        result = run(cluster.mpiexec(script("wire_bytes.py", 5)), timeout=90, env=_env())
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    sent = json.loads(result.stdout.strip().splitlines()[-1])
    assert sent["none"] > 2 * 5 * 4 * 1_011_010 * 0.9, sent  # 5 steps of 1M float32 gradients, each way
    for hook in ("fp16_compress_hook", "bf16_compress_hook"):
        assert 0.47 < sent[hook] / sent["none"] < 0.53, sent
