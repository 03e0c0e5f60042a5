"""The activations torch has in nn.functional and as modules, against torch."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F

MODULES = [
    ("Hardtanh", (), {}), ("Hardtanh", (-2.0, 2.0, True), {}), ("ReLU6", (), {}), ("ReLU6", (True,), {}),
    ("Hardsigmoid", (), {}), ("Hardsigmoid", (True,), {}), ("Hardswish", (), {}), ("Hardswish", (True,), {}),
    ("Softsign", (), {}), ("LogSigmoid", (), {}), ("Mish", (), {}), ("Mish", (True,), {}), ("CELU", (), {}),
    ("CELU", (2.0, True), {}), ("SELU", (), {}), ("SELU", (True,), {}), ("Tanhshrink", (), {}),
    ("Hardtanh", (), {"min_value": -0.5, "max_value": 0.5}), ("Threshold", (0.5, -2.0), {}),
    ("Threshold", (0.0, 20.0, True), {}), ("Threshold", (), {"threshold": -1.0, "value": 3}),
]
VALUES = np.array([[-4.0, -1.0, -0.3, 0.0], [0.5, 2.0, 3.5, 7.0]])


@pytest.mark.parametrize("name,args,kwargs", MODULES)
def test_module_output_gradient_and_repr_match_torch(torch, name, args, kwargs):
    ours_module = getattr(plugtorch.nn, name)(*args, **kwargs)
    theirs_module = getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours_module) == repr(theirs_module)

    def run(m, module):
        x = m.tensor(VALUES, dtype=m.float64, requires_grad=True)
        y = module(x * 1.0)  # an in-place module writes into this non-leaf
        y.backward(m.ones_like(y))
        return y.detach().numpy(), x.grad.numpy()
    for ours, theirs in zip(run(plugtorch, ours_module), run(torch, theirs_module)):
        assert np.allclose(ours, theirs, atol=1e-12)


@pytest.mark.parametrize("name", ["hardtanh", "relu6", "selu", "celu", "mish", "hardsigmoid", "hardswish"])
def test_functional_inplace_writes_into_the_input(torch, name):
    x = plugtorch.tensor(VALUES)
    out = getattr(F, name)(x, inplace=True)
    expected = getattr(torch.nn.functional, name)(torch.tensor(VALUES, dtype=torch.float32))
    assert out is x and np.allclose(x.numpy(), expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("name", ["hardsigmoid", "hardswish", "hardtanh", "relu6", "softsign", "logsigmoid",
                                  "mish", "celu", "selu", "tanhshrink"])
def test_functional_forms_exist_with_torchs_parameters(torch, name):
    import inspect
    ours = list(inspect.signature(getattr(F, name)).parameters)
    try:
        theirs = list(inspect.signature(getattr(torch.nn.functional, name)).parameters)
    except ValueError:  # a C builtin (log_sigmoid): torch takes (input) only
        theirs = ["input"]
    assert ours == theirs
