"""Finite-difference checks of gradients (torch.autograd.gradcheck / gradgradcheck).

Written with public tensor ops only, so it runs on any backend.
"""
from __future__ import annotations

from ..core.grad_mode import no_grad
from ..core.ops.creation import arange, randn_like, zeros
from ..core.ops.shape import cat
from ..core.tensor import Tensor
from .functional import grad


class GradcheckError(RuntimeError):
    pass


def _outputs(fn, inputs):
    out = fn(*inputs)
    outs = (out,) if isinstance(out, Tensor) else tuple(o for o in out if isinstance(o, Tensor))
    return outs


def _flat(outs):
    return cat([o.reshape(-1).to(outs[0].dtype) for o in outs]) if outs else None


def _numerical_jacobian(fn, inputs, i, eps):
    """d(flattened outputs)/d(input i), column by column, by central differences."""
    x = inputs[i]
    n = x.numel()
    cols = []
    positions = arange(n, device=x.device)
    # Grad mode stays on: gradgradcheck's function itself calls autograd.grad.
    for j in range(n):
        with no_grad():
            delta = ((positions == j).to(x.dtype) * eps).reshape(x.shape)
            x_plus, x_minus = x.detach() + delta, x.detach() - delta
        plus, minus = list(inputs), list(inputs)
        plus[i] = x_plus.requires_grad_(x.requires_grad)
        minus[i] = x_minus.requires_grad_(x.requires_grad)
        f_plus = _flat(_outputs(fn, plus)).detach()
        f_minus = _flat(_outputs(fn, minus)).detach()
        cols.append((f_plus - f_minus) / (2 * eps))
    return cols  # cols[j][k] = d out_k / d x_j


def _analytical_jacobian(outs, inputs, i, create_graph=False):
    flat = _flat(outs)
    m = flat.numel()
    rows = []
    positions = arange(m, device=flat.device)
    for k in range(m):
        onehot = (positions == k).to(flat.dtype)
        gos = []
        start = 0
        for o in outs:
            gos.append(onehot[start:start + o.numel()].reshape(o.shape).to(o.dtype))
            start += o.numel()
        diff = [o for o in outs if o.requires_grad]
        go = [g for o, g in zip(outs, gos) if o.requires_grad]
        if not diff:
            rows.append(zeros(inputs[i].numel(), dtype=inputs[i].dtype, device=inputs[i].device))
            continue
        (g,) = grad(diff, (inputs[i],), go, retain_graph=True, allow_unused=True,
                    materialize_grads=True)
        rows.append(g.reshape(-1))
    return rows  # rows[k][j] = d out_k / d x_j


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False):
    """Compare autograd's Jacobian of ``func`` with central differences; inputs should be float64."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        numerical = _numerical_jacobian(func, inputs, i, eps)
        analytical = _analytical_jacobian(outs, inputs, i)
        n, m = x.numel(), sum(o.numel() for o in outs)
        for j in range(n):
            for k in range(m):
                a = float(analytical[k][j])
                num = float(numerical[j][k])
                if not abs(a - num) <= atol + rtol * abs(num):
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        f"Jacobian mismatch for output {k} with respect to input {i} at element {j}:\n"
                        f"numerical: {num}\nanalytical: {a}\n"
                        f"(|analytical - numerical| = {abs(a - num):.3g} > atol + rtol*|numerical| = "
                        f"{atol + rtol * abs(num):.3g})"
                    )
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, gen_non_contig_grad_outputs=False):
    """gradcheck of the first derivative: checks second derivatives of ``func``."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(randn_like(o).requires_grad_() for o in outs)
    grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_derivative(*args):
        xs, gos = args[:n_in], args[n_in:]
        ys = _outputs(func, xs)
        return grad(ys, [xs[i] for i in diff_idx], gos, create_graph=True, allow_unused=True,
                    materialize_grads=True)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
