"""The backend contract (plugtorch/backend_api.py) is all the built-in backends and the examples use.

Every ``.py`` under ``backends/`` and ``examples/`` is parsed, and each import of plugtorch (and
each attribute chain read off a name such an import bound) is held to the rules in
``backend_api``'s docstring: no name that starts with an underscore, nothing from
``plugtorch.core`` beyond ``PUBLIC_CORE_MODULES``, and ``plugtorch.testing``'s submodules only in
test support. A failure lists every offending file:line.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
from types import ModuleType

import pytest

import plugtorch
from plugtorch import backend_api
from plugtorch.core import geometry

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHECKED = ("backends", "examples")


def _is_plugtorch(path: str) -> bool:
    return path == "plugtorch" or path.startswith("plugtorch.")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _is_module(path: str) -> bool:
    try:
        return importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):  # a name inside a module, not a module
        return False


def offence(path: str, test_support: bool) -> str | None:
    """Why importing (or reading) the dotted ``path`` breaks the contract, or None."""
    if not _is_plugtorch(path):
        return None
    parts = path.split(".")
    private = [p for p in parts if _private(p)]
    if private:
        return f"{path}: {private[0]} is private"
    if parts[:2] == ["plugtorch", "core"]:
        if not any(path == m or path.startswith(m + ".") for m in backend_api.PUBLIC_CORE_MODULES):
            return f"{path}: plugtorch.core is private beyond {', '.join(backend_api.PUBLIC_CORE_MODULES)}"
    if parts[:2] == ["plugtorch", "testing"] and len(parts) > 2 and not test_support:
        if len(parts) > 3 or _is_module(".".join(parts[:3])):
            return (f"{path}: plugtorch.testing's submodules are for test support "
                    f"({backend_api.TEST_SUPPORT} = True, or a test)")
    return None


def _declares_test_support(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
            if any(isinstance(t, ast.Name) and t.id == backend_api.TEST_SUPPORT for t in node.targets):
                return True
    return False


def is_test_support(path: pathlib.Path, tree: ast.Module) -> bool:
    name = path.name
    return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or "tests" in path.parts or _declares_test_support(tree))


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"], or None when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def offences(source: str, filename: str, test_support: bool | None = None) -> list[str]:
    """``file:line: why`` for each import of plugtorch in ``source`` that breaks the contract."""
    tree = ast.parse(source, filename)
    if test_support is None:
        test_support = is_test_support(pathlib.Path(filename), tree)
    found: list[tuple[int, str]] = []
    bound: dict[str, str] = {}  # name in this file -> the plugtorch path it stands for

    def check(line: int, path: str) -> None:
        why = offence(path, test_support)
        if why:
            found.append((line, why))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_plugtorch(alias.name):
                    check(node.lineno, alias.name)
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound["plugtorch"] = "plugtorch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_plugtorch(node.module or ""):
            module = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    check(node.lineno, module)
                else:  # the name's whole path: its module's rules apply to it
                    check(node.lineno, f"{module}.{alias.name}")
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    attributes = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    # whole chains only: ``plugtorch.core.x`` is reported once, not again as ``plugtorch.core``
    inner = {id(n.value) for n in attributes if isinstance(n.value, ast.Attribute)}
    for node in attributes:
        parts = _chain(node) if id(node) not in inner else None
        if parts and parts[0] in bound:
            check(node.lineno, ".".join([bound[parts[0]], *parts[1:]]))
    return sorted({f"{filename}:{line}: {why}" for line, why in found})


def _files() -> list[pathlib.Path]:
    return sorted(p for d in CHECKED for p in (ROOT / d).rglob("*.py") if "build" not in p.parts)


def test_backends_and_examples_import_only_the_public_contract():
    assert len(_files()) > 40  # the walk found the packages
    bad = [o for p in _files() for o in offences(p.read_text(), str(p.relative_to(ROOT)))]
    assert not bad, "private imports of plugtorch:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, why", [
    ("from plugtorch.core.ops.conv import _chunks", "_chunks is private"),
    ("from plugtorch.core.dtypes import promote_types", "plugtorch.core is private"),
    ("from plugtorch.core import dtypes as D", "plugtorch.core is private"),
    ("import plugtorch.core.native", "plugtorch.core is private"),
    ("from plugtorch import _ops", "_ops is private"),
    ("import plugtorch\nplugtorch.core.ops.pooling.max_pool2d", "plugtorch.core is private"),
    ("import plugtorch as pt\npt.Tensor._make", "_make is private"),
    ("from plugtorch import nn\nnn._reduction", "_reduction is private"),
    ("from plugtorch.testing.cuda_cpu import CpuModule", "test support"),
    ("def f():\n    from plugtorch.testing import conformance", "test support"),
])
def test_the_check_finds_each_kind_of_private_import(source, why):
    found = offences(source, "backends/somewhere.py")
    assert len(found) == 1 and why in found[0], found


@pytest.mark.parametrize("source", [
    "from plugtorch.backend_api import Backend, hookimpl",
    "from plugtorch.core.geometry import window_count",
    "import plugtorch\nplugtorch.nn.Module\nplugtorch.__version__",
    "from plugtorch import library",
    "from plugtorch.testing import Sample",
    "from plugtorch.distributed import wire",
    "from plugtorch_backends.numpy_backend.xp_table import make_table",
    "from . import _kernels",
])
def test_the_public_contract_passes(source):
    assert offences(source, "backends/somewhere.py") == []


def test_test_support_may_import_the_testing_machinery():
    source = "PLUGTORCH_TEST_SUPPORT = True\nfrom plugtorch.testing.cuda_cpu import CpuModule\n"
    assert offences(source, "backends/cupy_backend/emulation.py") == []
    assert offences("from plugtorch.testing.conformance import *", "plugin/tests/test_kit.py") == []
    # still not the private core
    assert offences(source + "from plugtorch.core.tensor import Tensor\n", "backends/x.py")


def test_the_public_core_modules_are_in_the_contract():
    for name in backend_api.PUBLIC_CORE_MODULES:
        module = importlib.import_module(name)
        assert isinstance(module, ModuleType)
        missing = [n for n in module.__all__ if getattr(backend_api, n, None) is not getattr(module, n)]
        assert not missing, f"backend_api does not re-export {missing} from {name}"


def test_every_name_the_contract_lists_is_there():
    assert [n for n in backend_api.__all__ if not hasattr(backend_api, n)] == []
    assert backend_api.OpDef is importlib.import_module("plugtorch.core.opdef").OpDef


def test_what_rules_receive_is_a_rule_context():
    # an op's node is the ctx its rule is called with
    x = plugtorch.randn(2, 1, 5, 5, requires_grad=True)
    w = plugtorch.randn(3, 1, 3, 3)
    for y in (x.exp(), x.sum(dim=1), plugtorch.conv2d(x, w, padding=1), x * 2):
        ctx = y.grad_fn
        assert isinstance(ctx, backend_api.RuleContext), ctx
        assert isinstance(ctx.attrs, dict) and ctx.meta[0] == ((2, 1, 5, 5), plugtorch.float32)
        assert ctx.needs_input_grad[0] is True and len(ctx.next) == len(ctx.meta)


def test_registered_kernels_and_primitives_are_kernels():
    numpy_backend = plugtorch.get_registry().backends["numpy"]
    assert all(isinstance(fn, backend_api.Kernel) for fn in numpy_backend.kernels.values())
    assert set(numpy_backend.primitives) <= backend_api.PRIMITIVE_NAMES


def test_window_count_is_torchs_output_size(torch):
    # against torch for a spread of geometries, with and without ceil_mode
    import itertools
    for size, k, s, p, d, ceil in itertools.product((5, 7, 8), (1, 2, 3), (1, 2, 3), (0, 1), (1, 2),
                                                   (False, True)):
        if p > k // 2 or geometry.window_count(size, k, s, p, d) <= 0:
            continue
        x = torch.zeros(1, 1, size)
        want = torch.nn.functional.max_pool1d(x, k, s, p, d, ceil_mode=ceil).shape[-1]
        assert geometry.window_count(size, k, s, p, d, ceil) == want, (size, k, s, p, d, ceil)


def test_batch_chunks_cover_the_batch_in_order(monkeypatch):
    monkeypatch.setattr(geometry, "CHUNK_BYTES", 300)
    assert geometry.batch_chunks(7, 100) == [(0, 3), (3, 6), (6, 7)]
    assert geometry.batch_chunks(2, 10_000) == [(0, 1), (1, 2)]  # at least one image a chunk
    assert geometry.batch_chunks(0, 100) == [(0, 0)]
