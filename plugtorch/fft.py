"""``plugtorch.fft``: torch.fft's discrete Fourier transforms and their helpers.

The transforms are ops declared in ``core/ops/fft.py`` (registered, so the conformance kit
and the catalog cover them); this module gives them torch.fft's names. ``fftfreq``,
``rfftfreq``, ``fftshift`` and ``ifftshift`` are built from ``arange`` and ``roll``.
"""
from __future__ import annotations

from ._ops import arange, roll
from .core.dtypes import get_default_dtype
from .core.ops.fft import fft_fft as fft
from .core.ops.fft import fft_fft2 as fft2
from .core.ops.fft import fft_fftn as fftn
from .core.ops.fft import fft_hfft as hfft
from .core.ops.fft import fft_ifft as ifft
from .core.ops.fft import fft_ifft2 as ifft2
from .core.ops.fft import fft_ifftn as ifftn
from .core.ops.fft import fft_ihfft as ihfft
from .core.ops.fft import fft_irfft as irfft
from .core.ops.fft import fft_irfft2 as irfft2
from .core.ops.fft import fft_irfftn as irfftn
from .core.ops.fft import fft_rfft as rfft
from .core.ops.fft import fft_rfft2 as rfft2
from .core.ops.fft import fft_rfftn as rfftn

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _freq(n, d, count, dtype, device, requires_grad, wrap):
    if n < 0:
        raise RuntimeError(f"fftfreq: n must be non-negative, got {n}")
    ks = arange(count, dtype=dtype or get_default_dtype(), device=device)
    if wrap:  # the upper half of the indices stands for the negative frequencies
        ks[(n + 1) // 2:] -= n
    # torch multiplies by the reciprocal, inf where n * d is 0 (rfftfreq(0) is [nan]): k / 0 says the same
    out = ks * (1.0 / (n * d)) if n * d else ks / 0.0
    return out.requires_grad_(requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point transform: ``[0, 1, ..., -(n // 2), ..., -1] / (d * n)``."""
    return _freq(n, d, n, dtype, device, requires_grad, wrap=True)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The non-negative sample frequencies of an ``n``-point ``rfft``: ``[0, ..., n // 2] / (d * n)``."""
    return _freq(n, d, n // 2 + 1, dtype, device, requires_grad, wrap=False)


def _shift(input, dim, half):
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return input.clone()
    return roll(input, [half(input.shape[d]) for d in dims], dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle of ``dim`` (every dim by default)."""
    return _shift(input, dim, lambda n: n // 2)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift``."""
    return _shift(input, dim, lambda n: (n + 1) // 2)
