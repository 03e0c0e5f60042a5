"""Samples for the Fourier transforms (``core/ops/fft.py``) and the complex views
(``core/ops/complex.py``). Their results are complex, which the kit's checks (float32, forward-mode
AD, gradcheck) take only as real tensors: each call returns ``view_as_real`` of the result, and
the gradients, checked against torch's for every function, n/s, dim and norm, are in
tests/fft/test_fft.py and tests/core/test_complex.py."""
from __future__ import annotations

from ._common import Sample, Waiver, empty, np, scalar

SAMPLES: dict = {}

_GRAD_WAIVER = Waiver("grad", "the kit's gradient checks run forward-mode AD, which complex tensors do not have; "
                      "tests/fft/test_fft.py and tests/core/test_complex.py compare the gradients with torch's")


def _real(m, y):
    return m.view_as_real(y.resolve_conj()) if y.is_complex() else y


def _transform(op, name, nd):
    def call(m, x, **kw):
        return _real(m, getattr(m.fft, name)(x, **kw))

    def ref(**kw):
        def numpy_ref(x):
            y = getattr(np.fft, name)(x, **kw)
            return np.stack([y.real, y.imag], -1) if np.iscomplexobj(y) else y
        return numpy_ref

    def samples(g):
        if nd:
            sized = Sample((g.randn(2, 4, 6),), call=lambda m, x: call(m, x, s=(3, 8), norm="ortho"),
                           ref=ref(s=(3, 8), axes=(-2, -1), norm="ortho"), grad=False, desc="s, ortho")
        else:
            sized = Sample((g.randn(3, 7),), call=lambda m, x: call(m, x, n=9, norm="forward"),
                           ref=ref(n=9, norm="forward"), grad=False, desc="n (zero-padded), forward")
        out = [Sample((g.randn(3, 4, 6),), call=call, ref=ref(**({"axes": (-2, -1)} if name.endswith("2") else {})),
                      grad=False),
               sized, _GRAD_WAIVER]
        if name in ("fftn", "ifftn"):  # torch transforms no dims of a 0-d tensor
            out.append(Waiver("zero_dim", "plugtorch's fftn asks for at least one dim to transform"))
        else:
            out.append(Sample((scalar(1.5),), call=call, raises=(IndexError, RuntimeError), desc="0-d: no dim"))
        out.append(Sample((empty(3, 0),), call=call, raises=(RuntimeError, ValueError), desc="no points"))
        return out
    SAMPLES[op] = samples


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _transform(f"fft_{_name}", _name, False)
for _name in ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"):
    _transform(f"fft_{_name}", _name, True)


def _round_trip(m, x):
    # (contiguous: view_as_complex refuses a last dim of stride other than 1, as torch's)
    return m.view_as_real(m.view_as_complex(x.contiguous()))


def _complex_views(g):
    ref = lambda x: x
    return [Sample((g.randn(3, 4, 2),), call=_round_trip, ref=ref, grad=False),
            Sample((g.randn(2),), call=_round_trip, ref=ref, grad=False, desc="one complex number"),
            Sample((empty(0, 3),), call=_round_trip, raises=RuntimeError, desc="empty: no pairs"),
            Sample((scalar(1.0),), call=_round_trip, raises=RuntimeError, desc="0-d: no pair"),
            _GRAD_WAIVER]


SAMPLES["view_as_real"] = SAMPLES["view_as_complex"] = _complex_views
# the three transforms the functions are written with have no public name of their own (torch's
# _fft_c2c & co. are private): their samples are those of the functions that reach them
SAMPLES["fft_c2c"] = SAMPLES["fft_fft"]
SAMPLES["fft_r2c"] = SAMPLES["fft_rfft"]
SAMPLES["fft_c2r"] = SAMPLES["fft_irfft"]
