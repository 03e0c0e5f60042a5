"""Bad input never surfaces an exception from inside a backend kernel (or a bare KeyError).

Every valid conformance sample is mutated (each int argument to an out-of-range dim, each
array to a 0-d, a 5x7 and an empty 2x0x3 one); whatever the op does with that, an error
must be raised by plugtorch's own code, where it can name the op and the shapes.
"""
from __future__ import annotations

import os
import traceback
import warnings

import numpy as np
import pytest

import plugtorch
from plugtorch.testing import Sample
from plugtorch.testing._calling import _caller, pt_inputs
from plugtorch.testing.sample import SampleGen
from plugtorch.testing.samples import SAMPLES

NOT_YET = {"index_put_zeros": "internal adjoint of getitem; only its own rule calls it, with matching shapes"}
_BACKEND_DIRS = (os.sep + "numpy" + os.sep, os.sep + "backends" + os.sep)


def _mutations(sample):
    for i, v in enumerate(sample.inputs):
        if isinstance(v, int) and not isinstance(v, bool):
            for w in (7, -8):
                yield i, w
        if isinstance(v, np.ndarray):
            for w in (np.asarray(1.0), np.ones((5, 7)), np.ones((2, 0, 3))):
                yield i, w.astype(v.dtype)


def _ops():
    reg = plugtorch.get_registry()
    return sorted(n for n in reg.ops if reg.ops[n].plugin == "plugtorch.core" and n in SAMPLES)


@pytest.mark.parametrize("op", _ops())
def test_mutated_inputs_raise_plugtorch_errors_not_kernel_errors(op):
    if op in NOT_YET:
        pytest.skip(NOT_YET[op])
    opdef = plugtorch.get_registry().ops[op]
    leaks = []
    for sample in SAMPLES[op](SampleGen(op)):
        if not isinstance(sample, Sample) or sample.raises is not None:
            continue
        for i, value in _mutations(sample):
            inputs = list(sample.inputs)
            inputs[i] = value
            mutated = Sample(tuple(inputs), call=sample.call, kwargs=sample.kwargs)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _caller(opdef, mutated, False)(plugtorch, *pt_inputs(mutated, "numpy"))
            except Exception as e:
                where = traceback.extract_tb(e.__traceback__)[-1].filename
                if isinstance(e, (KeyError, AttributeError)) or any(d in where for d in _BACKEND_DIRS):
                    leaks.append(f"input {i} -> {np.shape(value)}: {type(e).__name__}: {e} (raised in {where})")
    assert not leaks, f"op '{op}' lets kernel errors through:\n" + "\n".join(leaks[:5])
