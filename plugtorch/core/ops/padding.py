"""``F.pad``'s reflect, replicate and circular modes: one op, padding by gathering.

Every padded dimension is one ``index_select`` whose indices say, for each output
position, which input position it copies (computed with ``arange`` on the tensor's own
backend: no host round-trip). The gradient is index_select's: each input position
receives the sum of its copies. ``F.pad`` (``movement.pad``) routes the non-constant
modes here; ``nn.Conv*d``'s ``padding_mode`` uses them through ``F.pad``.

Negative widths, as in torch: reflect and replicate map output position ``i`` in
``[-before, n + after)`` to its source in the whole input (so ``(-1, 2)`` crops one on the
left and reflects about the uncropped last element on the right); circular crops first and
then wraps what is left.
"""
from __future__ import annotations

from ..optable import op
from ..tensor import Tensor
from . import elementwise as ew
from .creation import arange
from .index import index_select

MODES = ("reflect", "replicate", "circular")

# For each mode: the source index of every output position i in [-lo, n + hi) of a dim of size n.
_SOURCE = {
    "circular": lambda i, n: ew.remainder(i, n),
    "replicate": lambda i, n: ew.clamp(i, 0, n - 1),
    "reflect": lambda i, n: (n - 1) - ew.abs((n - 1) - ew.abs(i)),
}


_SUPPORTED = ("Supported combinations for non-constant padding:\n"
              "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
              "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
              "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _mode_pad_args(input, pad, mode, value=None):
    if not isinstance(input, Tensor):
        raise TypeError(f"pad(): argument 'input' must be Tensor, not {type(input).__name__}")
    if mode not in MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    pad = tuple(int(p) for p in pad)
    nd = len(pad) // 2
    if len(pad) % 2 or nd not in (1, 2, 3) or input.ndim not in (nd + 1, nd + 2):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.ndim}D input "
                                  f"tensor.\n{_SUPPORTED}")
    widths = tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(nd)))
    first = input.ndim - nd
    if any(s == 0 for s in input.shape[1:]):
        raise RuntimeError(f"pad(): expected {nd + 1}D or {nd + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: {list(input.shape)}")
    for k, (lo, hi) in enumerate(widths):
        n, dim = input.shape[first + k], first + k
        if mode == "circular":
            left = n - max(-lo, 0) - max(-hi, 0)
            if left < 0 or (left == 0 and left + max(lo, 0) + max(hi, 0) > 0):
                raise RuntimeError(f"pad(): input (size {n} at dim {dim}) is too small for padding "
                                   f"({lo}, {hi}): circular padding wraps what is left after cropping")
            if max(lo, hi) > n:  # torch's check, on the uncropped size; past a crop the
                # padding repeats what is left periodically, as torch's result where it has one
                raise RuntimeError("Padding value causes wrapping around more than once.")
            continue
        out = n + lo + hi
        if out < 0 or (nd == 1 and out == 0):  # torch's 1-d kernels refuse an empty result, 2-d and 3-d not
            name = "DHW"[3 - nd + k]
            raise RuntimeError(f"pad(): input ({name}: {n}) is too small. Calculated output {name}: {out}")
        if mode == "reflect" and max(lo, hi) >= n:
            raise RuntimeError(f"Argument #{2 * nd + 2}: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension {dim} of input "
                               f"{list(input.shape)}")
    return (input,), {"widths": widths, "mode": mode}


@op(bind=_mode_pad_args)
def mode_pad(input, *, widths, mode):
    """``F.pad`` with mode 'reflect', 'replicate' or 'circular' (torch's rules on which ranks each
    padding length applies to; negative widths crop, see the module's docstring).

    A backend kernel receives the input and, by name, ``widths`` (one (before, after) pair per
    padded trailing dim, first dim first; negative crops) and ``mode``.
    """
    x = input
    nd = len(widths)
    for k, (lo, hi) in enumerate(widths):
        dim = x.ndim - nd + k
        n = x.shape[dim]
        if mode == "circular" and (lo < 0 or hi < 0):  # circular wraps what is left after cropping
            x = x.narrow(dim, max(-lo, 0), n - max(-lo, 0) - max(-hi, 0))
            n, lo, hi = x.shape[dim], max(lo, 0), max(hi, 0)
        if lo or hi:
            x = index_select(x, dim, _SOURCE[mode](arange(-lo, n + hi, device=x._backend.name), n))
    return x
