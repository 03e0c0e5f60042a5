"""The type stubs of the API bound from the op table are generated and up to date."""
from __future__ import annotations

import subprocess
import sys

import plugtorch
from plugtorch.core import stubs
from plugtorch.core.optable import API


def test_committed_stubs_match_the_op_table():
    stale = stubs.stale()
    assert not stale, (f"{[str(p) for p in stale]} are stale; regenerate them with "
                       "`python -m plugtorch.core.stubs`")


def test_every_bound_name_is_in_a_stub():
    text = {p.name if "functional" not in str(p) else "F": t for p, t in stubs.generated().items()}
    for name in API["plugtorch"]:
        assert f"def {name}(" in text["_ops.pyi"], name
        assert name in plugtorch.__all__, name
    for name in API["nn.functional"]:
        assert f"def {name}(" in text["F"], name
    for name in API["Tensor"]:
        assert f"def {name}(" in text["_tensor_api.pyi"], name


def test_a_type_checker_sees_the_bound_api(tmp_path):
    # what an IDE user writes: functions, methods, operators and in-place forms, all known
    code = tmp_path / "user.py"
    code.write_text(
        "import plugtorch\n"
        "import plugtorch.nn.functional as F\n"
        "x = plugtorch.randn(3, 4)\n"
        "y = (x.exp() + 1).softmax(1).sum(0).relu_()\n"
        "z = F.conv2d(plugtorch.zeros(1, 1, 3, 3), plugtorch.ones(1, 1, 2, 2)) @ plugtorch.eye(2)\n"
        "w: plugtorch.Tensor = plugtorch.where(x > 0, x, 0.0).clamp(min=0).T\n"
        "x.no_such_method()\n"
    )
    r = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", str(code)],
                       capture_output=True, text=True)
    lines = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert len(lines) == 1 and "no_such_method" in lines[0], r.stdout
