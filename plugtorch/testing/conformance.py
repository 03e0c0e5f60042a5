"""The conformance suite as pytest tests, over every registered op and every backend.

Run it with ``pytest --plugtorch-conformance`` (plugtorch installs a pytest plugin that
adds this module to the session), or import it into a test module (plugtorch's own
tests/conformance does)::

    from plugtorch.testing.conformance import *  # noqa: F401,F403

Ops, samples and backends are read from the registry when the module is imported,
so register a plugin (entry point, ``PLUGTORCH_PLUGINS`` or ``register_plugin`` in a
conftest) before that. ``PLUGTORCH_CONFORMANCE_OPS=op,op,plugin:NAME`` restricts the ops
(``plugin:NAME``: every op that plugin defines) and ``PLUGTORCH_CONFORMANCE_BACKENDS=name,name``
the backends; by default each available backend runs twice: as registered, and as its
``<name>_bare`` twin without fused kernels (so the core decompositions are checked).
"""
from __future__ import annotations

import os

import pytest

import plugtorch
from plugtorch.core.device import get_backend

from . import kit
from .backends import SUFFIX, bare_backend, conformance_backends, remove_backend
from .sample import Sample, samples_for

__all__ = ["conformance_backend", "reference_torch", "test_op_has_samples", "test_forward", "test_strides",
           "test_noncontiguous", "test_float32", "test_gradcheck", "test_gradgradcheck", "test_jvp",
           "test_out_variants"]

# gradgradcheck costs (inputs + outputs) double-backward passes per element; keep it to small samples
GRADGRAD_MAX_NUMEL = 24


def _selected_ops(reg) -> list[str]:
    """``PLUGTORCH_CONFORMANCE_OPS``: op names, or ``plugin:NAME`` for every op a plugin defines."""
    wanted = [w.strip() for w in os.environ.get("PLUGTORCH_CONFORMANCE_OPS", "").split(",") if w.strip()]
    if not wanted:
        return sorted(reg.ops)
    names: set[str] = set()
    for w in wanted:
        if w.startswith("plugin:"):
            names.update(n for n, d in reg.ops.items() if d.plugin == w[len("plugin:"):])
        elif w in reg.ops:
            names.add(w)
        else:
            raise ValueError(f"PLUGTORCH_CONFORMANCE_OPS names '{w}', which is not a registered op")
    return sorted(names)


def _collect():
    reg = plugtorch.get_registry()
    items, errors = {}, {}
    for name in _selected_ops(reg):
        try:
            items[name] = samples_for(reg.ops[name])
        except Exception as e:
            items[name], errors[name] = [], e
    return items, errors


_ITEMS, _ERRORS = _collect()
_env = os.environ.get("PLUGTORCH_CONFORMANCE_BACKENDS", "")
_BACKENDS = [b.strip() for b in _env.split(",") if b.strip()] or conformance_backends()


def _floating(s: Sample) -> bool:
    return any(a.dtype.kind == "f" for a in s.arrays())


def _params(pred, first_only=False):
    out = []
    for op, items in _ITEMS.items():
        for i, s in enumerate(items):
            if isinstance(s, Sample) and pred(s):
                out.append(pytest.param(op, i, id=f"{op}-{i}-{s.label()}"))
                if first_only:
                    break
    return out


def _sample(op, index):
    return plugtorch.get_registry().ops[op], _ITEMS[op][index]


@pytest.fixture(scope="module", params=_BACKENDS)
def conformance_backend(request):
    """A backend to run the checks on; ``<name>_bare`` twins are registered for the module's duration."""
    name = request.param
    created = name.endswith(SUFFIX) and name not in plugtorch.get_registry().backends
    if created:
        bare_backend(name[:-len(SUFFIX)])
    yield name
    if created:
        remove_backend(name)


@pytest.fixture(scope="session")
def reference_torch():
    """PyTorch as the oracle, or None where it is not installed (NumPy references still run)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


# Samples that check a warned-about case on purpose, as torch warns: var/std of one element
# (a nan result), a regression target that broadcasts, the legacy size_average/reduce pair.
_WARNING_FILTERS = (
    "ignore:.*degrees of freedom is <= 0:UserWarning",
    "ignore:.*Using a target size .* that is different to the input size:UserWarning",
    "ignore:size_average and reduce args will be deprecated:UserWarning",
)


def _EXPECTED_WARNINGS(test):
    for spec in _WARNING_FILTERS:
        test = pytest.mark.filterwarnings(spec)(test)
    return test


def _no_reference():
    pytest.skip("no reference for this sample: PyTorch is not installed and the sample has no "
                "NumPy ref; `pip install torch` to run it")


@pytest.mark.parametrize("op", sorted(_ITEMS))
def test_op_has_samples(op):
    if op in _ERRORS:
        raise kit.ConformanceError(f"op '{op}': building its samples failed: {_ERRORS[op]!r}") from _ERRORS[op]
    kit.check_coverage(plugtorch.get_registry().ops[op], _ITEMS[op])


@pytest.mark.parametrize("op,index", _params(lambda s: True))
@_EXPECTED_WARNINGS
def test_forward(op, index, conformance_backend, reference_torch):
    opdef, sample = _sample(op, index)
    if not kit.check_forward(opdef, sample, conformance_backend, reference_torch):
        _no_reference()


@pytest.mark.parametrize("op,index", _params(lambda s: s.raises is None))
@_EXPECTED_WARNINGS
def test_strides(op, index, conformance_backend, reference_torch):
    opdef, sample = _sample(op, index)
    if reference_torch is None:
        pytest.skip("output strides are compared with torch's, and PyTorch is not installed")
    rule, why = kit.layout_rule(op, sample)
    if rule == "waived":
        pytest.skip(f"'{op}': torch's output layout is not compared: {why}")
    if not kit.check_strides(opdef, sample, conformance_backend, reference_torch, contiguity_only=rule == "contiguity"):
        pytest.skip("no tensor output to compare with torch's (torch has no such op, or returns no tensor)")


@pytest.mark.parametrize("op,index", _params(lambda s: s.raises is None and any(a.ndim >= 2 for a in s.arrays())))
@_EXPECTED_WARNINGS
def test_noncontiguous(op, index, conformance_backend):
    opdef, sample = _sample(op, index)
    kit.check_noncontiguous(opdef, sample, conformance_backend)


@pytest.mark.parametrize("op,index", _params(lambda s: s.raises is None and _floating(s)))
@_EXPECTED_WARNINGS
def test_float32(op, index, conformance_backend, reference_torch):
    opdef, sample = _sample(op, index)
    kit.check_float32(opdef, sample, conformance_backend, reference_torch)


@pytest.mark.parametrize("op,index", _params(lambda s: s.grad and s.raises is None and _floating(s)))
@_EXPECTED_WARNINGS
def test_gradcheck(op, index, conformance_backend, reference_torch):
    opdef, sample = _sample(op, index)
    kit.check_gradcheck(opdef, sample, conformance_backend, reference_torch)


# forward-mode AD on each differentiable op's first float64 sample: how its tangents are computed
# (its jvp, its decomposition, its rule transposed) is per op, not per sample
@pytest.mark.parametrize("op,index", _params(lambda s: s.grad and s.raises is None and _floating(s), first_only=True))
@_EXPECTED_WARNINGS
def test_jvp(op, index, conformance_backend):
    opdef, sample = _sample(op, index)
    kit.check_jvp(opdef, sample, conformance_backend)


def _gradgrad_ok(s):
    return (s.grad and s.gradgrad and s.raises is None and _floating(s)
            and sum(a.size for a in s.arrays()) <= GRADGRAD_MAX_NUMEL and not s.empty)


def _gradgrad_params():
    # every small sample of an op with a hand-written derivative rule (where double-backward
    # bugs live); the first one of the others, which autograd differentiates through
    rules = {n for n, op in plugtorch.get_registry().ops.items() if op.derivative is not None}
    chosen = {(p.values[0], p.values[1]) for p in _params(_gradgrad_ok, first_only=True)}
    return [p for p in _params(_gradgrad_ok) if p.values[0] in rules or tuple(p.values) in chosen]


def test_out_variants(conformance_backend):
    """Every out= variant the backend declares, on the first sample of each op over its
    primitive that it takes (kit.check_out_variant); one test per backend, naming each failure."""
    reg = plugtorch.get_registry()
    declared = get_backend(conformance_backend).out_variants
    if not declared:
        pytest.skip(f"backend '{conformance_backend}' declares no out= variants (Backend.out_variants): "
                    "its in-place ops and compiled replays allocate every result")
    reached: set[str] = set()
    checked: set[str] = set()
    failures: list[str] = []
    for op, items in _ITEMS.items():  # the selected ops (--plugtorch-ops)
        opdef = reg.ops[op]
        primitive = opdef.primitive
        if primitive is None or primitive not in declared or primitive in checked:
            continue
        reached.add(primitive)
        for s in items:
            if not isinstance(s, Sample):
                continue
            try:
                done = kit.check_out_variant(opdef, s, conformance_backend)
            except kit.ConformanceError as e:
                failures.append(str(e))
                done = True
            if done:
                checked.add(primitive)
                break
    if not reached:
        pytest.skip(f"no selected op computes through one of backend '{conformance_backend}''s out= variants")
    unchecked = sorted(reached - checked)
    assert not failures, "\n".join(failures)
    assert not unchecked, (f"backend '{conformance_backend}': no op's samples reach the out= variants of "
                           f"{unchecked}; give the op over each a sample of positional arrays and numbers")


@pytest.mark.parametrize("op,index", _gradgrad_params())
@_EXPECTED_WARNINGS
def test_gradgradcheck(op, index, conformance_backend):
    opdef, sample = _sample(op, index)
    kit.check_gradgradcheck(opdef, sample, conformance_backend)
