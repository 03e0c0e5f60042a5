"""Calling one sample on plugtorch and on torch, and comparing what comes back.

The machinery under :mod:`plugtorch.testing.kit`: turning a sample's NumPy inputs into
tensors on either side, resolving how to call the op, and comparing results with
messages that name the op, the sample and the backend.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import plugtorch
from plugtorch.core.dispatch import call_op

from .sample import Sample, is_torch


class ConformanceError(AssertionError):
    pass


def _default_call(opdef, kwargs):
    name = opdef.name

    def call(m, *xs):
        fn = getattr(m, name, None)
        if fn is None and is_torch(m):
            fn = getattr(m.nn.functional, name, None)
        if fn is not None:
            return fn(*xs, **kwargs)
        if xs and hasattr(xs[0], name):
            return getattr(xs[0], name)(*xs[1:], **kwargs)
        if is_torch(m):
            return NotImplemented  # torch has no such op: compare with the NumPy reference only
        return call_op(opdef, tuple(xs), kwargs)
    return call


def _caller(opdef, sample: Sample, torch_side: bool):
    if torch_side and sample.torch_call is not None:
        return sample.torch_call
    if sample.call is not None:
        return sample.call
    return _default_call(opdef, sample.kwargs)


def _convert(sample, make, float_dtype):
    """Inputs for one side: arrays made into tensors by ``make(array, dtype, key)``.

    ``key`` locates the array: ``(i, None)`` for input i, ``(i, j)`` for item j of a list input.
    """
    out = []
    for i, v in enumerate(sample.inputs):
        if isinstance(v, np.ndarray):
            out.append(make(v, float_dtype if v.dtype.kind == "f" else None, (i, None)))
        elif isinstance(v, (list, tuple)) and any(isinstance(a, np.ndarray) for a in v):
            out.append(type(v)(make(a, float_dtype if a.dtype.kind == "f" else None, (i, j))
                               if isinstance(a, np.ndarray) else a for j, a in enumerate(v)))
        else:
            out.append(v)
    return out


def _grad_positions(sample):
    """Keys (see _convert) of the inputs to differentiate: the floating arrays, or grad_inputs."""
    if sample.grad_inputs is not None:
        return tuple((i, None) for i in sample.grad_inputs)
    keys: list[tuple[int, int | None]] = []
    for i, v in enumerate(sample.inputs):
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            keys.append((i, None))
        elif isinstance(v, (list, tuple)):
            keys.extend((i, j) for j, a in enumerate(v) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    return tuple(keys)


def _get(args, key):
    i, j = key
    return args[i] if j is None else args[i][j]


def _put(args, key, value):
    i, j = key
    if j is None:
        args[i] = value
    else:
        items = list(args[i])
        items[j] = value
        args[i] = type(args[i])(items)


def pt_inputs(sample: Sample, backend: str, float_dtype: str = "float64", requires_grad: bool = False) -> list:
    want = set(_grad_positions(sample)) if requires_grad else set()
    dt = getattr(plugtorch, float_dtype)

    def make(a, dtype, i):
        t = plugtorch.tensor(a, dtype=dt if dtype else None, device=backend)
        if i in want:
            t.requires_grad_(True)
        return t
    return _convert(sample, make, float_dtype)


def torch_inputs(torch: Any, sample: Sample, float_dtype: str = "float64", requires_grad: bool = False) -> list:
    want = set(_grad_positions(sample)) if requires_grad else set()
    dt = getattr(torch, float_dtype)

    def make(a, dtype, i):
        t = torch.tensor(a, dtype=dt if dtype else None)
        if i in want:
            t.requires_grad_(True)
        return t
    return _convert(sample, make, float_dtype)


def flat_outputs(out: Any) -> list:
    """Tensors (or numbers) of a result that may be a tensor, a tuple or a named tuple."""
    if isinstance(out, (list, tuple)):
        items = []
        for o in out:
            items.extend(flat_outputs(o))
        return items
    return [out]


def _host(v):
    if hasattr(v, "detach"):
        return np.asarray(v.detach().cpu().numpy() if hasattr(v, "cpu") else v.detach().numpy())
    return np.asarray(v)


def _dtype_name(v) -> str:
    d = getattr(v, "dtype", None)
    return str(d).split(".")[-1] if d is not None else type(v).__name__


def _where(op, sample, backend):
    return f"op '{op}', sample [{sample.label()}], backend '{backend}'"


def _compare(actual, expected, sample, what, check_dtype=True, atol=None, rtol=None):
    atol = sample.atol if atol is None else atol
    rtol = sample.rtol if rtol is None else rtol
    a_list, e_list = flat_outputs(actual), flat_outputs(expected)
    if len(a_list) != len(e_list):
        raise ConformanceError(f"{what}: {len(a_list)} outputs, the reference gives {len(e_list)}")
    for k, (a, e) in enumerate(zip(a_list, e_list)):
        ah, eh = _host(a), _host(e)
        if ah.shape != eh.shape:
            raise ConformanceError(f"{what}: output {k} has shape {list(ah.shape)}, "
                                   f"the reference {list(eh.shape)}")
        if check_dtype and hasattr(e, "dtype") and _dtype_name(a) != _dtype_name(e):
            raise ConformanceError(f"{what}: output {k} has dtype {_dtype_name(a)}, "
                                   f"the reference {_dtype_name(e)}")
        if ah.dtype.kind in "fc" or eh.dtype.kind in "fc":
            if ah.dtype.itemsize < 8 or eh.dtype.itemsize < 8:  # a float32/float16 result
                precision = 1e-3 if min(ah.dtype.itemsize, eh.dtype.itemsize) < 4 else 1e-5
                atol, rtol = max(atol, precision), max(rtol, precision)
            ok = np.allclose(ah.astype(np.float64), eh.astype(np.float64),
                             atol=atol, rtol=rtol, equal_nan=True)
        else:
            ok = np.array_equal(ah, eh)
        if not ok:
            diff = np.abs(ah.astype(np.float64) - eh.astype(np.float64))
            worst = np.nanmax(diff) if diff.size else 0
            raise ConformanceError(
                f"{what}: output {k} differs from the reference (max |diff| = {worst:.3g})\n"
                f"got:\n{ah}\nexpected:\n{eh}")


def _check_backend(out, backend, what):
    """Results stay on the inputs' backend (an op that builds a helper tensor on the default one fails)."""
    name = plugtorch.get_registry().resolve_name(backend)
    for k, o in enumerate(flat_outputs(out)):
        if isinstance(o, plugtorch.Tensor) and o.backend != name:
            raise ConformanceError(f"{what}: output {k} is on backend '{o.backend}', not on the inputs' "
                                   f"backend '{name}'")


def _compare_requires_grad(actual, expected, what):
    """With differentiable inputs, an output tracks gradients exactly where torch's does."""
    for k, (a, e) in enumerate(zip(flat_outputs(actual), flat_outputs(expected))):
        ra, re = bool(getattr(a, "requires_grad", False)), bool(getattr(e, "requires_grad", False))
        if ra != re:
            raise ConformanceError(f"{what}: output {k} has requires_grad={ra}, torch's has {re} "
                                   "(with inputs that require grad)")


def _expect_raise(fn, exc, what):
    name = "/".join(e.__name__ for e in exc) if isinstance(exc, tuple) else exc.__name__
    try:
        fn()
    except exc as e:
        if not str(e):
            raise ConformanceError(f"{what}: raised {type(e).__name__} with an empty message") from e
        return e
    except Exception as e:
        raise ConformanceError(f"{what}: expected {name}, got {type(e).__name__}: {e}") from e
    raise ConformanceError(f"{what}: expected {name} for these invalid inputs, nothing was raised")


def _array_keys(sample):
    keys: list[tuple[int, int | None]] = []
    for i, v in enumerate(sample.inputs):
        if isinstance(v, np.ndarray):
            keys.append((i, None))
        elif isinstance(v, (list, tuple)):
            keys.extend((i, j) for j, a in enumerate(v) if isinstance(a, np.ndarray))
    return keys
