"""The NumPy backend's glibc tuning (backends/numpy_backend/allocator.py): applied without any
environment variable, bounded memory, and each way of leaving it alone.

Each case runs in a fresh interpreter: mallopt is process-wide, and the test process has
long since registered its backends.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
    reason="the tuning applies to glibc only; elsewhere it is left alone (tested below on glibc)")

STEPS = r"""
import json, sys
import plugtorch as pt, plugtorch.nn as nn
from plugtorch_backends.numpy_backend import allocator

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

pt.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
opt = pt.optim.Adam(model.parameters())
rss = {}
for step in range(1, int(sys.argv[1]) + 1):
    x, y = pt.randn(256, 784), pt.randint(0, 10, (256,))   # fresh inputs every step, as a loader gives
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if step in (100, 1000):
        rss[step] = rss_mib()
print(json.dumps({"status": allocator.STATUS, "rss": rss}))
"""


def run(steps: int, **env) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PLUGTORCH_TUNE_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", STEPS, str(steps)], env={**clean, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_tuned_without_any_variable_and_memory_stays_flat_over_1000_steps():
    result = run(1000)
    assert result["status"] == "glibc mallopt: M_MMAP_THRESHOLD=33554432, M_TRIM_THRESHOLD=268435456"
    rss = result["rss"]
    # a step's temporaries are reused, not accumulated: no growth between step 100 and 1000
    assert rss["1000"] - rss["100"] < 8, rss


def test_opt_out():
    assert run(1, PLUGTORCH_TUNE_MALLOC="0")["status"] == "left alone: PLUGTORCH_TUNE_MALLOC=0"


def test_the_users_own_malloc_variables_win():
    status = run(1, MALLOC_TRIM_THRESHOLD_="1000000")["status"]
    assert status == ("glibc mallopt: M_MMAP_THRESHOLD=33554432, "
                      "M_TRIM_THRESHOLD left to MALLOC_TRIM_THRESHOLD_=1000000")
