"""Sample-table entries for ops not (yet) in the registry still run, so they are sound when the op is registered.

conv2d and the average pools are compositions today (covered through the window op's
samples); their own entries wait for them to become registered ops.
"""
from __future__ import annotations

import pytest

import plugtorch
from plugtorch.core.registry import OpDef
from plugtorch.testing import Sample, kit
from plugtorch.testing.sample import SampleGen
from plugtorch.testing.samples import SAMPLES

_WAITING = sorted(set(SAMPLES) - set(plugtorch.get_registry().ops))


def test_every_table_entry_names_a_registered_or_announced_op():
    assert not _WAITING, f"sample-table entries for ops that are not registered: {_WAITING}"


@pytest.mark.parametrize("name", _WAITING or ["(none waiting)"])
def test_samples_of_ops_not_yet_registered_pass_the_kit(name, backend, torch):
    if name not in SAMPLES:
        pytest.skip("every op in the sample table is registered; the conformance suite runs them")
    op = OpDef(name)
    items = SAMPLES[name](SampleGen(name))
    kit.check_coverage(op, items)
    for s in items:
        if not isinstance(s, Sample):
            continue
        kit.check_forward(op, s, backend, torch)
        if s.raises is None:
            kit.check_float32(op, s, backend, torch)
            if s.grad:
                kit.check_gradcheck(op, s, backend, torch)
