"""Samples for resampling (interpolate's ops, pixel_shuffle/unshuffle), F.pad's modes and max_unpool."""
from __future__ import annotations

import math

from ._common import F, Sample, empty, np, scalar

SAMPLES: dict = {}


def _interp(**kw):
    return lambda m, x: F(m).interpolate(x, **kw)


def _interpolate_nearest(g):
    out = []
    for mode in ("nearest", "nearest-exact"):
        out += [
            Sample((g.randn(1, 2, 5),), call=_interp(size=7, mode=mode), desc=f"{mode} 1-D up"),
            Sample((g.randn(1, 1, 5, 4),), call=_interp(scale_factor=(0.6, 1.7), mode=mode),
                   desc=f"{mode} 2-D scale factors"),
            Sample((g.randn(1, 1, 2, 3, 2),), call=_interp(size=(3, 2, 4), mode=mode), desc=f"{mode} 3-D"),
        ]
    return out + [
        Sample((g.randn(1, 1, 3, 3),), call=_interp(scale_factor=1.5, recompute_scale_factor=True),
               desc="recompute_scale_factor"),
        Sample((empty(0, 2, 3),), call=_interp(size=5), desc="empty batch"),
        Sample((scalar(1.0),), call=_interp(size=2), raises=NotImplementedError, desc="0-d input"),
        Sample((g.randn(1, 1, 3),), call=_interp(size=2, align_corners=True), raises=ValueError,
               desc="align_corners with nearest"),
        Sample((g.randn(1, 1, 3),), call=_interp(size=2, scale_factor=2.0), raises=ValueError,
               desc="size and scale_factor"),
    ]


def _interpolate_linear(g):
    out = []
    for ac in (False, True):
        out += [
            Sample((g.randn(1, 2, 4),), call=_interp(size=7, mode="linear", align_corners=ac),
                   desc=f"linear up, align_corners={ac}"),
            Sample((g.randn(1, 1, 5, 4),), call=_interp(scale_factor=(0.6, 1.7), mode="bilinear", align_corners=ac),
                   desc=f"bilinear scale factors, align_corners={ac}"),
            Sample((g.randn(1, 1, 2, 3, 2),), call=_interp(size=(3, 2, 3), mode="trilinear", align_corners=ac),
                   desc=f"trilinear, align_corners={ac}"),
        ]
    return out + [
        Sample((g.randn(1, 1, 6, 5),), call=_interp(size=(3, 2), mode="bilinear", antialias=True),
               desc="bilinear antialias"),
        Sample((g.randn(1, 1, 3),), call=_interp(size=2, mode="linear"), desc="small"),
        Sample((empty(0, 1, 3, 3),), call=_interp(size=4, mode="bilinear"), desc="empty batch"),
        Sample((scalar(1.0),), call=_interp(size=2, mode="linear"), raises=NotImplementedError, desc="0-d input"),
        Sample((g.randn(1, 1, 3, 3),), call=_interp(size=2, mode="linear"), raises=NotImplementedError,
               desc="linear on 4-D input"),
    ]


def _interpolate_filtered(g):
    return [
        Sample((g.randn(1, 2, 4, 5),), call=_interp(size=(6, 3), mode="bicubic"), desc="bicubic"),
        Sample((g.randn(1, 1, 4, 5),), call=_interp(scale_factor=1.6, mode="bicubic", align_corners=True),
               desc="bicubic align_corners"),
        Sample((g.randn(1, 1, 7, 6),), call=_interp(size=(3, 4), mode="bicubic", antialias=True),
               desc="bicubic antialias"),
        Sample((g.randn(1, 1, 7, 6),), call=_interp(size=(3, 4), mode="lanczos", antialias=True), desc="lanczos"),
        Sample((g.randn(1, 1, 2, 2),), call=_interp(size=(3, 2), mode="bicubic"), desc="small"),
        Sample((empty(0, 1, 3, 3),), call=_interp(size=4, mode="bicubic"), desc="empty batch"),
        Sample((scalar(1.0),), call=_interp(size=2, mode="bicubic"), raises=NotImplementedError, desc="0-d input"),
        Sample((g.randn(1, 1, 3, 3),), call=_interp(size=2, mode="lanczos"), raises=ValueError,
               desc="lanczos without antialias"),
    ]


def _shuffle(name, factor_of, indivisible):
    def samples(g):
        call = lambda r: lambda m, x: getattr(F(m), name)(x, r)
        return [
            Sample((g.randn(*factor_of(2, (1, 2, 2, 3))),), call=call(2)),
            Sample((g.randn(*factor_of(3, (2, 1, 1, 2))),), call=call(3), desc="factor 3"),
            Sample((g.randn(*factor_of(2, (2, 1, 1, 1, 2))),), call=call(2), desc="extra batch dim"),
            Sample((g.randn(*factor_of(2, (1, 1, 1))),), call=call(2), desc="unbatched (small)"),
            # torch returns an empty input unchanged (and its backward fails): checked against NumPy
            Sample((empty(*factor_of(2, (0, 1, 2, 2))),), call=call(2), torch_call=lambda m, x: NotImplemented,
                   ref=lambda x: np.zeros((0, 1, 4, 4) if name == "pixel_shuffle" else (0, 4, 2, 2)),
                   desc="empty batch"),
            Sample((scalar(1.0),), call=call(2), raises=RuntimeError, desc="0-d input"),
            Sample((g.randn(*indivisible),), call=call(2), raises=RuntimeError, desc="indivisible"),
        ]
    return samples


def _shuffled(r, shape):   # pixel_shuffle's input for an output of C = shape[-3] channels
    return shape[:-3] + (shape[-3] * r * r,) + shape[-2:]


def _unshuffled(r, shape):  # pixel_unshuffle's input
    return shape[:-2] + (shape[-2] * r, shape[-1] * r)


def _mode_pad(g):
    def p(pad, mode):
        return lambda m, x: F(m).pad(x, pad, mode=mode)
    out = []
    for mode in ("reflect", "replicate", "circular"):
        out += [
            Sample((g.randn(2, 2, 4),), call=p((2, 1), mode), desc=f"{mode} 1-D"),
            Sample((g.randn(1, 3, 4),), call=p((1, 2, 2, 1), mode), desc=f"{mode} 2-D unbatched"),
            Sample((g.randn(1, 1, 2, 3, 3),), call=p((1, 1, 0, 2, 1, 0), mode), desc=f"{mode} 3-D"),
            Sample((g.randn(1, 1, 4),), call=p((-1, 2), mode), desc=f"{mode} crop then pad"),
        ]
    return out + [
        Sample((empty(0, 2, 3),), call=p((1, 1), "reflect"), desc="empty batch"),
        Sample((scalar(1.0),), call=p((1, 1), "reflect"), raises=NotImplementedError, desc="0-d input"),
        Sample((g.randn(1, 1, 3),), call=p((3, 0), "reflect"), raises=RuntimeError, desc="reflect too wide"),
        Sample((g.randn(1, 1, 3),), call=p((4, 0), "circular"), raises=RuntimeError, desc="circular wraps twice"),
        Sample((g.randn(1, 1, 3),), call=lambda m, x: F(m).pad(x, (1, 1), mode="reflect", value=1.0),
               raises=RuntimeError, desc="a value with reflect"),
    ]


def _pool_indices(g, n, c, size, k):
    """Valid max_pool indices for windows k = stride over ``size``: a random cell of each window."""
    out = [s // k for s in size]
    idx = np.zeros((n, c) + tuple(out), dtype=np.int64)
    for pos in np.ndindex(*out):
        offs = g.ints(n, c, len(size), high=k)
        flat = 0
        for d in range(len(size)):
            flat = flat * size[d] + pos[d] * k + offs[..., d]
        idx[(Ellipsis,) + pos] = flat
    return idx


def _max_unpool(nd):
    name = f"max_unpool{nd}d"

    def samples(g):
        def u(*a, **kw):
            return lambda m, x, i: getattr(F(m), name)(x, i, *a, **kw)
        size = (4, 4, 2)[:nd]
        pooled = tuple(s // 2 for s in size)
        return [
            Sample((g.randn(2, 2, *pooled), _pool_indices(g, 2, 2, size, 2)), call=u(2)),
            Sample((g.randn(1, 1, *pooled), _pool_indices(g, 1, 1, size, 2)),
                   call=u(2, output_size=tuple(s + 1 for s in size)), desc="output_size"),
            Sample((g.randn(2, *pooled), _pool_indices(g, 1, 2, size, 2)[0]), call=u(2), desc="unbatched"),
            Sample((empty(0, 1, *pooled), np.zeros((0, 1) + pooled, np.int64)), call=u(2), desc="empty batch"),
            Sample((scalar(1.0), np.asarray(0)), call=u(2), raises=RuntimeError, desc="0-d input"),
            Sample((g.randn(1, 1, *pooled), np.full((1, 1) + pooled, math.prod(size), np.int64)), call=u(2),
                   raises=RuntimeError, desc="index out of range"),
        ]
    return samples


SAMPLES.update(
    interpolate_nearest=_interpolate_nearest, interpolate_linear=_interpolate_linear,
    interpolate_filtered=_interpolate_filtered,
    pixel_shuffle=_shuffle("pixel_shuffle", _shuffled, (1, 3, 2, 2)),
    pixel_unshuffle=_shuffle("pixel_unshuffle", _unshuffled, (1, 1, 3, 4)),
    mode_pad=_mode_pad,
    max_unpool1d=_max_unpool(1), max_unpool2d=_max_unpool(2), max_unpool3d=_max_unpool(3),
)
