"""Installing the example plugin packages under examples/ as a user would, and running plugtorch with them.

``pip install --no-deps --no-build-isolation`` builds each package's wheel from its
pyproject.toml and installs it, ``.dist-info`` and entry point included, into one
directory per test session; the tests put that directory on ``PYTHONPATH`` of a fresh
interpreter, so plugtorch discovers the packages through their entry points exactly as
in a user's environment. A target directory rather than the running environment keeps
other tests (and other people's concurrent runs) from seeing the plugins, and leaves
nothing to uninstall if a run is interrupted.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PACKAGES = {"plugtorch-squareplus": EXAMPLES / "third_party_plugin",
            "plugtorch-arrayapi": EXAMPLES / "array_api_backend"}

_site: list[pathlib.Path] = []


def install_examples(tmp_path_factory) -> pathlib.Path:
    """Both example packages, pip-installed once per session into one directory; returns it."""
    if _site:
        return _site[0]
    pytest.importorskip("array_api_strict", reason="the backend example needs array-api-strict "
                        "(in plugtorch's test extra: pip install -e '.[test]')")
    target = tmp_path_factory.mktemp("site-packages")
    for name, source in PACKAGES.items():
        # pip builds in the tree it is given (build/, *.egg-info): give it a copy
        copy = tmp_path_factory.mktemp("src") / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--no-cache-dir", "--target", str(target), str(copy)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.fail(f"pip could not install {name} from {source}:\n{r.stdout}\n{r.stderr}")
    _site.append(target)
    return target


def environment(site: pathlib.Path, **env) -> dict:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    full = {**os.environ, "PYTHONPATH": path}
    for k in ("PLUGTORCH_PLUGINS", "PLUGTORCH_PLUGINS_ALLOW", "PLUGTORCH_DISABLE_PLUGIN_AUTOLOAD",
              "PLUGTORCH_CONFORMANCE_OPS", "PLUGTORCH_CONFORMANCE_BACKENDS"):
        full.pop(k, None)  # the tests say which of these they want
    full.update(env)
    return full


def run_python(site: pathlib.Path, code: str, timeout: int = 180, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environment(site, **env), timeout=timeout)


def run_cli(site: pathlib.Path, *args: str, **env) -> subprocess.CompletedProcess:
    """``plugtorch ARGS``: the console script, in the environment the packages are installed in."""
    return subprocess.run([sys.executable, "-m", "plugtorch", *args], capture_output=True, text=True,
                          env=environment(site, **env), timeout=180)


def run_conformance(site: pathlib.Path, workdir: pathlib.Path, *options: str,
                    timeout: int = 600) -> subprocess.CompletedProcess:
    """``pytest --plugtorch-conformance OPTIONS`` in an empty directory, as a plugin author runs it."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--plugtorch-conformance", *options], capture_output=True, text=True,
                          env=environment(site), cwd=workdir, timeout=timeout)


def guide_block(test_id: str) -> list[str]:
    """The lines of the docs/plugins.md output block marked ``<!-- output of: test_id -->``."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    marker = f"<!-- output of: {test_id} -->"
    assert marker in text, f"docs/plugins.md has no block marked {marker}"
    block = text[text.index(marker) + len(marker):].split("```text\n", 1)[1].split("```", 1)[0]
    return block.splitlines()
