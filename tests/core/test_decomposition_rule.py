"""The derivative of an op that a kernel computed and that has no rule of its own: its
decomposition is re-run and differentiated (``opdef.decomposition_rule``). Each operand gets
its partial derivative only, even when one operand is computed from another, and the graph
below the operands is neither walked nor freed."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.core.ops import normalization

torch = pytest.importorskip("torch", reason="torch is the oracle for the double backward")


def _x():
    return np.random.default_rng(0).standard_normal((3, 4))


def test_the_op_runs_a_kernel_and_has_no_rule_of_its_own():
    # what this file tests: layer_norm_backward's gradient is its decomposition's
    assert plugtorch.get_registry().ops["layer_norm_backward"].derivative is None
    x = plugtorch.tensor(_x())
    assert "layer_norm_backward" in x._backend.kernels


@pytest.mark.parametrize("create_graph", [False, True])
def test_an_operand_computed_from_another_counts_once(create_graph):
    x, w = _x(), np.linspace(0.5, 1.5, 4)
    px = plugtorch.tensor(x, requires_grad=True)
    y = normalization.layer_norm_backward(px * 2, px, plugtorch.tensor(w), (4,), 1e-5)
    (gx,) = plugtorch.autograd.grad(y.sum(), px, create_graph=create_graph)

    tx = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.layer_norm(tx, (4,), torch.tensor(w), None, 1e-5)
    ty = torch.autograd.grad(out, tx, tx * 2, create_graph=True)[0]
    (tgx,) = torch.autograd.grad(ty.sum(), tx)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.numpy(), rtol=1e-10, atol=1e-12)


def test_the_graph_below_the_operands_survives_for_a_second_use():
    px = plugtorch.tensor(_x(), requires_grad=True)
    shared = px.exp()  # its node lies below both operands
    y = normalization.layer_norm_backward(shared, shared * 3, None, (4,), 1e-5)
    (first,) = plugtorch.autograd.grad(y.sum(), px, retain_graph=True)
    (again,) = plugtorch.autograd.grad(y.sum(), px)
    np.testing.assert_array_equal(first.numpy(), again.numpy())
