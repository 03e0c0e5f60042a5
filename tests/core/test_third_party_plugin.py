"""A plugin shipped as its own pip package is discovered and used like the built-ins."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "third_party_plugin"


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory) -> pathlib.Path:
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(EXAMPLE)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"pip could not install the example plugin:\n{r.stderr}")
    return target


def run_with(site: pathlib.Path, code: str, **env):
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
            **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                          timeout=120)


def test_installed_plugin_is_discovered_through_its_entry_point(installed_example):
    r = run_with(installed_example, """
import plugtorch
reg = plugtorch.get_registry()
print(reg.ops["squareplus"].plugin, reg.kernel_owner("squareplus", "numpy"), "squareplus" in plugtorch.list_plugins())
""")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["squareplus", "squareplus", "True"]


def test_installed_plugin_op_runs_its_kernel_and_differentiates(installed_example):
    r = run_with(installed_example, """
import plugtorch
from plugtorch_squareplus import squareplus
from plugtorch.autograd import gradcheck
x = plugtorch.tensor([-2.0, 0.0, 3.0], dtype=plugtorch.float64, requires_grad=True)
y = squareplus(x)
print(y.grad_fn.name, [round(v, 6) for v in y.tolist()])
print(gradcheck(squareplus, (x,)))
""")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "squareplus [0.414214, 1.0, 3.302776]"  # the fused kernel ran and recorded the op
    assert second == "True"


def test_autoload_off_skips_installed_plugins(installed_example):
    r = run_with(installed_example, "import plugtorch; print('squareplus' in plugtorch.get_registry().ops)",
                 PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_plugin_author_runs_the_conformance_kit_on_their_op(installed_example, tmp_path):
    (tmp_path / "test_conformance.py").write_text("from plugtorch.testing.conformance import *  # noqa\n")
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed_example),
                                                         os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "squareplus",
                        str(tmp_path / "test_conformance.py")], capture_output=True, text=True,
                       env=full, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
