"""The type stubs of the API bound from the op table are generated, byte for byte up to date, and
typed: a type checker accepts torch's calls and refuses arguments of the wrong type."""
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


def test_nearly_every_parameter_has_a_type():
    # what the naming convention cannot type stays Any: indices, array-likes, *args of to()
    typed, total = stubs.typed_parameters()
    assert typed / total > 0.97, (typed, total)


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


TYPED = """\
import plugtorch
import plugtorch.nn.functional as F
x = plugtorch.randn(3, 4)
reveal_type(plugtorch.sum(x, dim=1))
plugtorch.sum(x, dim=(0, 1), keepdim=True, dtype=plugtorch.float64)
plugtorch.sum(x, dim="a")  # E
plugtorch.sum(x, keepdim="yes")  # E
plugtorch.sum(x, dtype="float32")  # E
reveal_type(plugtorch.sort(x, 1).indices)
reveal_type(plugtorch.split(x, 2))
plugtorch.zeros(2, 3, device="cpu", requires_grad=True)
plugtorch.zeros((2, 3), dtype=plugtorch.int64)
plugtorch.cat([x, x], dim=0)
plugtorch.cat(x, x)  # E
x.lerp(x, 0.5).add_(1, alpha=2).clamp_(min=0)
x.reshape(4, 3).permute(1, 0).sum(0, keepdim=True)
x.masked_fill(x > 0, 0.0)[0, 1:] = 2
F.cross_entropy(x, plugtorch.zeros(3, dtype=plugtorch.int64), reduction="sum", label_smoothing=0.1)
F.conv2d(x, x, stride=1.5)  # E
"""


def test_a_type_checker_checks_arguments_and_results(tmp_path):
    code = tmp_path / "typed.py"
    code.write_text(TYPED)
    r = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", str(code)],
                       capture_output=True, text=True)
    marked = {i for i, line in enumerate(TYPED.splitlines(), 1) if line.endswith("# E")}
    errors = {int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error:" in line}
    assert errors == marked, r.stdout
    revealed = [line.split('Revealed type is "')[1].rstrip('"').removeprefix("builtins.")
                for line in r.stdout.splitlines() if "Revealed type" in line]
    assert revealed == ["plugtorch.core.tensor.Tensor", "plugtorch.core.tensor.Tensor",
                        "tuple[plugtorch.core.tensor.Tensor, ...]"], r.stdout
