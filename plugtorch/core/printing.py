"""Tensor repr as torch prints it, built from a host copy (printing is an explicit host transfer).

The layout follows torch's ``_tensor_str``: one format for every element, chosen from the
values shown (integers, fixed point with ``precision`` decimals, or scientific when the
magnitudes span more than 1000x, exceed 1e8 or fall below 1e-4); rows wrapped at
``linewidth``; tensors of more than ``threshold`` elements summarised to ``edgeitems``
per edge with ``...``; then the suffixes (device, dtype where it is not a default one,
``grad_fn=<...>`` or ``requires_grad=True``). ``set_printoptions`` sets the same options
torch's does. Only the module name differs: dtypes print as ``plugtorch.float64``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

from .optable import public

__all__ = ["tensor_repr", "set_printoptions", "get_printoptions", "printoptions"]


@dataclasses.dataclass
class _Options:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


OPTIONS = _Options()
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


@public("plugtorch")
def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """How tensors print: decimals, the element count above which they are summarised, items
    kept per edge when summarised, the line width, a profile ("default", "short", "full")
    and scientific notation (None: chosen from the values)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; use one of "
                             f"{sorted(_PROFILES)}")
        (OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems,
         OPTIONS.linewidth) = _PROFILES[profile]
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(OPTIONS, name, value)
    OPTIONS.sci_mode = sci_mode


@public("plugtorch")
def get_printoptions() -> dict:
    """The current print options, as keyword arguments for set_printoptions."""
    return dataclasses.asdict(OPTIONS)


@public("plugtorch")
@contextlib.contextmanager
def printoptions(**kwargs):
    """``with plugtorch.printoptions(precision=2):`` — print options for one block."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """One width and style for every element, chosen from the values that will be shown."""

    def __init__(self, values, floating: bool):
        import numpy as np
        self.floating, self.int_mode, self.sci_mode, self.max_width = floating, True, False, 1
        if not floating:
            for v in values.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        shown = values[np.isfinite(values) & (values != 0)]
        if shown.size == 0:
            return
        magnitudes = np.abs(shown.astype(np.float64))
        low, high = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        if OPTIONS.sci_mode is None:
            self.sci_mode = bool(high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4)
        else:
            self.sci_mode = OPTIONS.sci_mode
        p = OPTIONS.precision
        for v in shown.tolist():
            if self.sci_mode:
                width = len(f"{v:.{p}e}")
            elif self.int_mode:
                width = len(f"{v:.0f}") + 1  # the "." that marks a float
            else:
                width = len(f"{v:.{p}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value) -> str:
        if not self.floating:
            text = f"{value}"
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{OPTIONS.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{OPTIONS.precision}f}"
        return (self.max_width - len(text)) * " " + text


class _ComplexFormatter:
    """torch's complex style: the real parts in one float format, the imaginary parts in another,
    joined with their sign (``1.5000+2.0000e+00j``)."""

    def __init__(self, values):
        self.real, self.imag = _Formatter(values.real, True), _Formatter(values.imag, True)
        self.max_width = self.real.max_width + self.imag.max_width + 1

    def format(self, value) -> str:
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return self.real.format(value.real) + ("" if imag[0] in "+-" else "+") + imag


def _summarized(a):
    """The elements a summarised print shows (only their values matter: they pick the format)."""
    import numpy as np
    e = OPTIONS.edgeitems
    if a.ndim == 0:
        return a.reshape(1)
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    if not e:
        return a.reshape(-1)[:0]
    rows = list(a[:e]) + list(a[-e:]) if a.shape[0] > 2 * e else list(a)
    return np.concatenate([_summarized(r) for r in rows])


def _vector(a, indent, summarize, fmt) -> str:
    e = OPTIONS.edgeitems
    per_line = max(1, math.floor((OPTIONS.linewidth - indent) / (fmt.max_width + 2)))
    if summarize and not e:
        items = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        items = ([fmt.format(v) for v in a[:e].tolist()] + [" ..."]
                 + [fmt.format(v) for v in a[-e:].tolist()])
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a, indent, summarize, fmt) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    e = OPTIONS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        rows = ([_nested(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."]
                + [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0] - e, a.shape[0])])
    else:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _body(host, floating, indent) -> str:
    summarize = host.size > OPTIONS.threshold
    shown = _summarized(host) if summarize else host.reshape(-1)
    fmt = _ComplexFormatter(shown) if host.dtype.kind == "c" else _Formatter(shown, floating)
    return _nested(host, indent, summarize, fmt)


def _with_suffixes(text, suffixes, indent) -> str:
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line + len(s) + 2 > OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + s)
            last_line = indent + len(s)
        else:
            parts.append(", " + s)
            last_line += len(s) + 2
    return "".join(parts) + ")"


def tensor_repr(t) -> str:
    import numpy as np  # host-side formatting of a host copy, never of backend data

    from .device import default_backend
    from .dtypes import bool_, get_default_dtype, int64, to_complex

    prefix = "tensor("
    indent = len(prefix)
    host = np.asarray(t._backend.primitives["to_host"](t._data))
    suffixes = []
    if t._backend is not default_backend() or t.device.index is not None:
        suffixes.append(f"device='{t.device}'")
    if host.size == 0:
        if host.ndim != 1:
            suffixes.append(f"size={tuple(host.shape)}")
        # nothing shows the dtype of an empty tensor, so any but the default float is named
        if t.dtype is not get_default_dtype():
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not OPTIONS.edgeitems:
            suffixes.append(f"size={tuple(host.shape)}")
        if t.dtype not in (get_default_dtype(), to_complex(get_default_dtype()), int64, bool_):
            suffixes.append(f"dtype={t.dtype!r}")
        body = _body(host, t.dtype.is_floating_point, indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn={t.grad_fn!r}")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
