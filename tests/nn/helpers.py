"""Shared helpers for comparing plugtorch nn layers with PyTorch's on the same weights."""
from __future__ import annotations

import numpy as np

import plugtorch


def copy_weights(pt_module, torch_module):
    """Load the torch module's state into the plugtorch module (through load_state_dict)."""
    state = {k: plugtorch.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    result = pt_module.load_state_dict(state)
    assert not result.missing_keys and not result.unexpected_keys


def check_against_torch(torch, pt_module, torch_module, x, *, atol=1e-5, rtol=1e-4, seed=0,
                        input_grad=True):
    """Forward the same input through both modules, backprop the same upstream gradient, and
    compare outputs, input gradients and parameter gradients."""
    copy_weights(pt_module, torch_module)
    x_pt = plugtorch.tensor(x, requires_grad=input_grad)
    x_t = torch.tensor(x, requires_grad=input_grad)
    y_pt, y_t = pt_module(x_pt), torch_module(x_t)
    np.testing.assert_allclose(y_pt.detach().numpy(), y_t.detach().numpy(), atol=atol, rtol=rtol)
    upstream = np.random.default_rng(seed).standard_normal(tuple(y_t.shape)).astype(x.dtype)
    (y_pt * plugtorch.tensor(upstream)).sum().backward()
    (y_t * torch.tensor(upstream)).sum().backward()
    if input_grad:
        np.testing.assert_allclose(x_pt.grad.numpy(), x_t.grad.numpy(), atol=atol, rtol=rtol)
    t_params = dict(torch_module.named_parameters())
    pt_params = dict(pt_module.named_parameters())
    assert set(t_params) == set(pt_params)
    for name, p in pt_params.items():
        assert p.grad is not None, f"{name} got no gradient"
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=atol,
                                   rtol=rtol, err_msg=name)
    return y_pt, y_t
