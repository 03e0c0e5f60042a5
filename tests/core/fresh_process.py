"""Run a test's script in a fresh interpreter with one environment switch set or unset."""
from __future__ import annotations

import os
import subprocess
import sys


def script_lines(script: str, arg: str, variable: str, value: str | None) -> list[str]:
    """The stdout lines of ``python -c script arg`` with ``variable`` set to ``value`` (removed
    from the environment where None); a non-zero exit fails the test with the script's stderr."""
    env = {k: v for k, v in os.environ.items() if k != variable}
    if value is not None:
        env[variable] = value
    out = subprocess.run([sys.executable, "-c", script, arg], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()
