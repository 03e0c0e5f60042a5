"""Discrete Fourier transforms: torch.fft's functions, over three ops on the ``fft`` primitive.

``fft_c2c`` (complex to complex, either direction), ``fft_r2c`` (real to the one-sided
complex half) and ``fft_c2r`` (that half back to real) compute; each has its derivative rule,
the adjoint transform (torch's ``_fft_*_backward``). The public functions (``fft_fft``,
``fft_rfftn``, ...; ``plugtorch.fft`` gives them torch's names) are decompositions: they
promote the input, crop or zero-pad it to ``n``/``s`` and call one of the three, so their
gradients come through those. ``hfft`` and ``ihfft`` are ``irfft``/``rfft`` of the conjugate,
with the normalisation taken from the other end.

``norm`` is numpy's: "backward" scales the inverse by 1/n, "forward" the forward transform,
"ortho" both by 1/sqrt(n). A transform's adjoint runs the other direction with the other
end's scaling (``_DUAL``).
"""
from __future__ import annotations

import builtins

from ..dtypes import get_default_dtype, to_complex
from ..optable import op
from ._args import wrap_dim
from .complex import conj, real
from .conversion import cast
from .creation import zeros
from .shape import cat

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _lower(kind):
    def lower(backend, x, *, axes, norm, **attrs):
        return backend.primitives["fft"](x, axes, kind(attrs), norm, attrs.get("last_size"))
    return lower


def _c2c_rule(ctx, g):
    a = ctx.attrs
    return fft_c2c(g, axes=a["axes"], forward=not a["forward"], norm=_DUAL[a["norm"]])


@op(lower=_lower(lambda a: "c2c" if a["forward"] else "ic2c"), derivative=_c2c_rule)
def fft_c2c(input, *, axes, forward, norm):
    """The complex transform of complex ``input`` over ``axes`` (forward: exp(-2 pi i ...))."""


def _r2c_rule(ctx, g):
    a = ctx.attrs
    axes, last = a["axes"], a["axes"][-1]
    n = ctx.meta[0][0][last]
    missing = n - g.shape[last]
    if missing:  # the half the one-sided transform left out contributes nothing
        shape = list(g.shape)
        shape[last] = missing
        g = cat([g, zeros(shape, dtype=g.dtype, device=g.device)], last)
    return real(fft_c2c(g, axes=axes, forward=False, norm=_DUAL[a["norm"]]))


@op(lower=_lower(lambda a: "r2c"), derivative=_r2c_rule)
def fft_r2c(input, *, axes, norm):
    """The forward transform of real ``input`` over ``axes``, the last of them one-sided
    (``size // 2 + 1`` entries: the rest are their conjugates)."""


def _c2r_rule(ctx, g):
    a = ctx.attrs
    last = a["axes"][-1]
    gi = fft_r2c(g, axes=a["axes"], norm=_DUAL[a["norm"]])
    m = gi.shape[last]
    doubled = a["last_size"] - m  # entries standing for a conjugate pair in the full spectrum
    if doubled > 0:
        from .creation import ones
        w = ones(m, dtype=real(gi).dtype, device=gi.device)
        w[1:1 + doubled] = 2.0
        gi = gi * w.reshape((m,) + (1,) * (gi.ndim - 1 - last))
    return gi


@op(lower=_lower(lambda a: "c2r"), derivative=_c2r_rule)
def fft_c2r(input, *, axes, norm, last_size):
    """The real inverse transform of the one-sided complex ``input`` over ``axes``: the last
    of them becomes ``last_size`` long."""


# -- argument handling ----------------------------------------------------------

def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise ValueError(f'{name}: Invalid normalization mode: "{norm}" (use "backward", "ortho" or "forward")')
    return norm


def _points(name, n):
    if n < 1:
        raise RuntimeError(f"{name}: Invalid number of data points ({n}) specified")
    return n


def _as_complex(x):
    if x.dtype.is_complex:
        return x
    return cast(x, to_complex(x.dtype if x.dtype.is_floating_point else get_default_dtype()))


def _as_real(name, x):
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {x.dtype!r}; take .real or .abs() "
                           "first, or use the complex transform")
    return x if x.dtype.is_floating_point else cast(x, get_default_dtype())


def _resize(x, axes, sizes):
    """``x`` cropped or zero-padded at the end of each of ``axes`` to ``sizes``."""
    for axis, size in zip(axes, sizes):
        have = x.shape[axis]
        if size < have:
            x = x.narrow(axis, 0, size)
        elif size > have:
            shape = list(x.shape)
            shape[axis] = size - have
            x = cat([x, zeros(shape, dtype=x.dtype, device=x.device)], axis)
    return x


def _dims_1d(name, input, n, dim):
    axis = wrap_dim(dim, input.ndim)
    return (axis,), [_points(name, input.shape[axis] if n is None else n)]


def _dims_nd(name, input, s, dim, all_dims=True):
    """torch's rule for ``s`` and ``dim``: both given, of one length; ``dim`` alone; ``s``
    alone over the last ``len(s)`` dims; neither, every dim (``fft2``'s default is (-2, -1))."""
    if dim is not None:
        dims = [dim] if isinstance(dim, builtins.int) else list(dim)
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"{name}: When given, dim and shape arguments must have the same length "
                               f"(got s={list(s)}, dim={dims})")
    elif s is not None:
        if len(s) > input.ndim:
            raise RuntimeError(f"{name}: Got shape with {len(s)} values but input tensor only has "
                               f"{input.ndim} dimensions.")
        dims = list(range(input.ndim - len(s), input.ndim))
    else:
        dims = list(range(input.ndim))
    axes = tuple(wrap_dim(d, input.ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{name}: FFT dims must be unique (got {dims})")
    if not axes:
        raise RuntimeError(f"{name}: needs at least one dim to transform")
    sizes = [_points(name, input.shape[a] if s is None or s[i] == -1 else s[i]) for i, a in enumerate(axes)]
    return axes, sizes


# -- torch.fft's functions ----------------------------------------------------------

def _c2c_args(name, forward, nd, default_dim=None):
    def bind(input, s=None, dim=default_dim, norm=None):
        x = _as_complex(input)
        axes, sizes = (_dims_nd if nd else _dims_1d)(name, x, s, dim)
        return (x,), {"axes": axes, "sizes": tuple(sizes), "forward": forward, "norm": _norm(name, norm)}
    return bind


def _c2c(input, *, axes, sizes, forward, norm):
    return fft_c2c(_resize(input, axes, sizes), axes=axes, forward=forward, norm=norm)


def _one_d(bind):
    def bind_1d(input, n=None, dim=-1, norm=None):
        return bind(input, n, dim, norm)
    return bind_1d


@op(bind=_one_d(_c2c_args("fft_fft", True, False)))
def fft_fft(input, *, axes, sizes, forward, norm):
    """torch.fft.fft: the one-dimensional transform along ``dim`` (``n`` points)."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


@op(bind=_one_d(_c2c_args("fft_ifft", False, False)))
def fft_ifft(input, *, axes, sizes, forward, norm):
    """torch.fft.ifft: the one-dimensional inverse transform."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


@op(bind=_c2c_args("fft_fft2", True, True, (-2, -1)))
def fft_fft2(input, *, axes, sizes, forward, norm):
    """torch.fft.fft2: the transform over two dims (the last two by default)."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


@op(bind=_c2c_args("fft_ifft2", False, True, (-2, -1)))
def fft_ifft2(input, *, axes, sizes, forward, norm):
    """torch.fft.ifft2."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


@op(bind=_c2c_args("fft_fftn", True, True))
def fft_fftn(input, *, axes, sizes, forward, norm):
    """torch.fft.fftn: the transform over ``dim`` (every dim, or the last ``len(s)``, by default)."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


@op(bind=_c2c_args("fft_ifftn", False, True))
def fft_ifftn(input, *, axes, sizes, forward, norm):
    """torch.fft.ifftn."""
    return _c2c(input, axes=axes, sizes=sizes, forward=forward, norm=norm)


def _r2c_args(name, nd, default_dim=None, hermitian=False):
    def bind(input, s=None, dim=default_dim, norm=None):
        x = _as_real(name, input)
        axes, sizes = (_dims_nd if nd else _dims_1d)(name, x, s, dim)
        return (x,), {"axes": axes, "sizes": tuple(sizes), "norm": _norm(name, norm), "hermitian": hermitian}
    return bind


def _r2c(input, *, axes, sizes, norm, hermitian):
    if hermitian:  # ihfft: the conjugate of the forward half, scaled from the other end
        return conj(fft_r2c(_resize(input, axes, sizes), axes=axes, norm=_DUAL[norm]))
    return fft_r2c(_resize(input, axes, sizes), axes=axes, norm=norm)


@op(bind=_one_d(_r2c_args("fft_rfft", False)))
def fft_rfft(input, *, axes, sizes, norm, hermitian):
    """torch.fft.rfft: the transform of a real signal, its ``n // 2 + 1`` non-negative frequencies."""
    return _r2c(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_r2c_args("fft_rfft2", True, (-2, -1)))
def fft_rfft2(input, *, axes, sizes, norm, hermitian):
    """torch.fft.rfft2."""
    return _r2c(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_r2c_args("fft_rfftn", True))
def fft_rfftn(input, *, axes, sizes, norm, hermitian):
    """torch.fft.rfftn: one-sided along the last of ``dim``."""
    return _r2c(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_one_d(_r2c_args("fft_ihfft", False, hermitian=True)))
def fft_ihfft(input, *, axes, sizes, norm, hermitian):
    """torch.fft.ihfft: the inverse of hfft, the one-sided half of a real signal's inverse transform."""
    return _r2c(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


def _c2r_args(name, nd, default_dim=None, hermitian=False):
    def bind(input, s=None, dim=default_dim, norm=None):
        x = _as_complex(input)
        axes, sizes = (_dims_nd if nd else _dims_1d)(name, x, s, dim)
        last = axes[-1]
        given = s if nd or s is None else [s]
        if given is None or given[-1] == -1:  # the default output length: 2 * (m - 1)
            sizes[-1] = _points(name, 2 * (x.shape[last] - 1))
        return (x,), {"axes": axes, "sizes": tuple(sizes), "norm": _norm(name, norm), "hermitian": hermitian}
    return bind


def _c2r(input, *, axes, sizes, norm, hermitian):
    half = list(sizes[:-1]) + [sizes[-1] // 2 + 1]
    x = _resize(input, axes, half)
    if hermitian:  # hfft: the real inverse transform of the conjugate, scaled from the other end
        return fft_c2r(conj(x), axes=axes, norm=_DUAL[norm], last_size=sizes[-1])
    return fft_c2r(x, axes=axes, norm=norm, last_size=sizes[-1])


@op(bind=_one_d(_c2r_args("fft_irfft", False)))
def fft_irfft(input, *, axes, sizes, norm, hermitian):
    """torch.fft.irfft: the real signal of ``n`` points (default ``2 * (m - 1)``) whose
    one-sided transform is ``input``."""
    return _c2r(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_c2r_args("fft_irfft2", True, (-2, -1)))
def fft_irfft2(input, *, axes, sizes, norm, hermitian):
    """torch.fft.irfft2."""
    return _c2r(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_c2r_args("fft_irfftn", True))
def fft_irfftn(input, *, axes, sizes, norm, hermitian):
    """torch.fft.irfftn."""
    return _c2r(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)


@op(bind=_one_d(_c2r_args("fft_hfft", False, hermitian=True)))
def fft_hfft(input, *, axes, sizes, norm, hermitian):
    """torch.fft.hfft: the real transform of a signal with Hermitian symmetry given by its
    one-sided half (``n`` points out, default ``2 * (m - 1)``)."""
    return _c2r(input, axes=axes, sizes=sizes, norm=norm, hermitian=hermitian)
