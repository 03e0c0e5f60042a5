"""Every batching rule against the per-example loop, on the op's own samples (plugtorch.testing).

The loop runs the op once per example, so it is right by construction; a rule must give the same
values for a batch of perturbed copies of each sample, with every input mapped and with only the
first mapped (the others shared by all examples).
"""
import warnings

import numpy as np
import pytest

import plugtorch as pt
import plugtorch.func as F
from plugtorch.core.optable import TABLE
from plugtorch.core.plugins import get_registry
from plugtorch.func import _batching
from plugtorch.testing import Sample, samples_for
from plugtorch.testing._calling import _caller, _convert

get_registry()  # fills the op table
B = 3
RULED = sorted(n for n in _batching.RULES if n in TABLE)


def _batched(a, dtype):
    """B copies of the array, floating ones scaled apart (signs kept, so domains stay valid)."""
    if a.dtype.kind == "f":
        return pt.tensor(np.stack([a * (1 + 0.1 * k) for k in range(B)]), dtype=pt.float64)
    return pt.tensor(np.stack([a] * B))


def _single(a, dtype):
    return pt.tensor(a, dtype=pt.float64 if a.dtype.kind == "f" else None)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _run(opdef, sample, first_only):
    call = _caller(opdef, sample, False)
    batched = _convert(sample, lambda a, dt, key: _batched(a, dt), "float64")
    single = _convert(sample, lambda a, dt, key: _single(a, dt), "float64")
    mapped = [i for i, v in enumerate(sample.inputs) if isinstance(v, np.ndarray)
              or (isinstance(v, (list, tuple)) and any(isinstance(a, np.ndarray) for a in v))]
    if not mapped:
        pytest.skip("no tensor input to map over")
    if first_only:
        mapped = mapped[:1]
    args = [batched[i] if i in mapped else single[i] for i in range(len(single))]
    in_dims = tuple(0 if i in mapped else None for i in range(len(args)))
    return _flat(F.vmap(lambda *xs: call(pt, *xs), in_dims=in_dims)(*args))


@pytest.mark.parametrize("first_only", [False, True], ids=["all-mapped", "first-mapped"])
@pytest.mark.parametrize("name", RULED)
def test_rule_matches_the_loop(name, first_only):
    opdef = TABLE[name]
    samples = [s for s in samples_for(opdef) if isinstance(s, Sample) and s.raises is None][:3]
    if not samples:
        pytest.skip(f"op '{name}' has no valid sample")
    rule = _batching.RULES[name]
    compared = 0
    for sample in samples:
        del _batching.RULES[name]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = _run(opdef, sample, first_only)
        except Exception:  # the loop cannot run this sample under vmap either: nothing to compare
            continue
        finally:
            _batching.RULES[name] = rule
        got = _run(opdef, sample, first_only)
        assert len(got) == len(want), (name, sample.desc)
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape), (name, sample.desc, g.shape, w.shape)
            assert g.dtype is w.dtype, (name, sample.desc)
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-10, atol=1e-12,
                                       equal_nan=True, err_msg=f"{name} {sample.desc}")
        compared += 1
    if not compared:
        pytest.skip(f"op '{name}': the loop runs none of its samples under vmap")


def test_a_plugin_rule_is_used_and_ops_without_one_loop():
    calls = []

    def doubling_relu(operands, bdims, attrs):
        calls.append(bdims)
        return pt.relu(operands[0]), 0
    saved = _batching.RULES.get("relu")
    F.register_batching_rule("relu", doubling_relu)
    try:
        x = pt.randn(4, 3)
        assert pt.allclose(F.vmap(pt.relu)(x), pt.relu(x))
        assert calls == [(0,)]
    finally:
        _batching.RULES["relu"] = saved
    with pytest.raises(TypeError, match="register_batching_rule"):
        F.register_batching_rule("relu", None)
