"""Tensor repr in torch's style, built from a host copy (printing is an explicit host transfer)."""
from __future__ import annotations


def tensor_repr(t) -> str:
    import numpy as np  # host-side formatting of a host copy, never of backend data

    host = np.asarray(t._backend.primitives["to_host"](t._data))
    if t.dtype.is_floating_point:
        body = np.array2string(host, separator=", ", prefix="tensor(", precision=4,
                               floatmode="maxprec_equal", threshold=1000)
    else:
        body = np.array2string(host, separator=", ", prefix="tensor(", threshold=1000)
    extras = []
    from .device import default_backend
    if t._backend is not default_backend() or t.device.index is not None:
        extras.append(f"device='{t.device}'")
    default_dtypes = ("float32", "int64", "bool")
    if t.dtype.name not in default_dtypes or host.size == 0:
        extras.append(f"dtype=plugtorch.{t.dtype.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn={t.grad_fn!r}")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
