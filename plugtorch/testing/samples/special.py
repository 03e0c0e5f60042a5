"""Samples for torch.special's ops (``core/ops/special.py``): smooth interiors for the gradient
checks, and each function's edge values without gradients. The NumPy references are SciPy's
functions, where SciPy is installed; torch's values are compared either way."""
from __future__ import annotations

import math

from ._common import Sample, empty, np, scalar

SAMPLES: dict = {}


def _scipy(name, *fixed):
    try:
        import scipy.special
    except ImportError:
        return None
    fn = getattr(scipy.special, name)

    def ref(*args):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*fixed, *args), dtype=np.float64)
    return ref


def _unary(op, domain, edges, scipy_name, call=None, grad=True, atol=1e-9):
    ref = _scipy(scipy_name)

    def samples(g):
        low, high = domain
        return [
            Sample((g.uniform(3, 4, low=low, high=high),), call=call, ref=ref, grad=grad, atol=atol),
            Sample((scalar((low + high) / 2),), call=call, ref=ref, grad=grad, atol=atol),
            Sample((empty(0, 3),), call=call, ref=ref, grad=grad),
            # (torch's values at the edges, which SciPy's differ from at some: lgamma(-inf) is inf)
            Sample((np.array(edges, dtype=np.float64),), call=call, grad=False, desc="edge values", atol=atol),
            Sample((g.ints(2, 3, low=1, high=4),), call=call, ref=ref, grad=False, desc="int64 input", atol=atol),
        ]
    SAMPLES[op] = samples


def _special_call(name):
    return lambda m, *args: getattr(m.special, name)(*args)


_INF, _NAN = math.inf, math.nan
_unary("lgamma", (0.3, 6), [0.0, -1.0, -2.5, _INF, -_INF, _NAN, 1e-300], "gammaln")
_unary("digamma", (0.3, 6), [0.0, -1.0, -2.5, _INF, _NAN, 1e-300], "psi")
_unary("erfc", (-3, 3), [0.0, _INF, -_INF, _NAN, 30.0], "erfc")
_unary("erfinv", (-0.9, 0.9), [0.0, 1.0, -1.0, 1.5, _NAN, 1 - 1e-12], "erfinv")
_unary("i0", (-4, 4), [0.0, _NAN, 30.0, -30.0], "i0")
_unary("special_i0e", (0.2, 4), [0.0, _INF, -_INF, _NAN, 1e10], "i0e", _special_call("i0e"))
_unary("special_i1", (0.2, 4), [0.0, _NAN, 30.0, -30.0], "i1", _special_call("i1"))
_unary("special_i1e", (0.2, 4), [0.0, _INF, -_INF, _NAN, 1e10], "i1e", _special_call("i1e"))
_unary("special_erfcx", (-2, 5), [0.0, _INF, _NAN, 30.0, 1e10], "erfcx", _special_call("erfcx"))
_unary("special_ndtri", (0.05, 0.95), [0.0, 1.0, 0.5, -0.5, _NAN, 1e-300], "ndtri", _special_call("ndtri"))
_unary("special_ndtr", (-3, 3), [0.0, _INF, -_INF, _NAN], "ndtr", _special_call("ndtr"))
_unary("special_log_ndtr", (-5, 3), [0.0, _INF, -_INF, _NAN, -30.0], "log_ndtr", _special_call("log_ndtr"))
# torch's J0 and J1 are off by up to 2e-7 near their zeros (plugtorch's are libm's)
_unary("special_bessel_j0", (-6, 6), [0.0, _NAN, 2.404825557695773], "j0", _special_call("bessel_j0"), grad=False,
       atol=1e-6)
_unary("special_bessel_j1", (-6, 6), [0.0, _NAN, 3.8317059702075125], "j1", _special_call("bessel_j1"), grad=False,
       atol=1e-6)
_unary("special_entr", (0.1, 3), [0.0, -1.0, _INF, _NAN], "entr", _special_call("entr"))
_unary("sinc", (0.1, 3), [0.0, _INF, _NAN, 1.0], "sinc")
_unary("logit", (0.05, 0.95), [0.0, 1.0, 0.5, -0.5, _NAN], "logit")
SAMPLES["sinc"] = (lambda base: lambda g: base(g)[:3] + base(g)[4:] + [  # NumPy's sinc is torch's
    Sample((np.array([0.0, 1.0, -2.5, _NAN]),), ref=lambda x: np.sinc(x), grad=False, desc="edge values")])(
    SAMPLES["sinc"])


def _polygamma(g):
    ref = _scipy("polygamma")
    return [Sample((g.uniform(3, 4, low=0.3, high=5),), call=lambda m, x, n=n: m.polygamma(n, x),
                   ref=None if ref is None else (lambda x, n=n: ref(n, x)), desc=f"n={n}") for n in (0, 1, 3)] + [
        Sample((scalar(1.5),), call=lambda m, x: m.polygamma(2, x), ref=None if ref is None else (lambda x: ref(2, x)),
               desc="0-d"),
        Sample((empty(0, 3),), call=lambda m, x: m.polygamma(1, x), ref=lambda x: x, desc="empty")]


SAMPLES["polygamma"] = _polygamma


def _second_only(op, scipy_name, call, low_high_a, low_high_x):
    ref = _scipy(scipy_name)

    def samples(g):
        a, x = g.uniform(3, 4, low=low_high_a[0], high=low_high_a[1]), g.uniform(3, 4, low=low_high_x[0],
                                                                                 high=low_high_x[1])
        return [
            Sample((a, x), call=call, ref=ref, grad_inputs=(1,), desc="differentiable in the second argument"),
            Sample((a[:1], x), call=call, ref=ref, grad_inputs=(1,), desc="broadcast"),
            Sample((scalar(a[0, 0]), scalar(x[0, 0])), call=call, ref=ref, grad_inputs=(1,), desc="0-d"),
            Sample((empty(0, 3), empty(0, 3)), call=call, ref=ref, grad_inputs=(1,), desc="empty"),
            Sample((np.array([1.0, 0.0, 2.0, _NAN]), np.array([0.0, 1.0, 3.0, 1.0])), call=call, ref=ref,
                   grad=False, desc="edge values"),
        ]
    SAMPLES[op] = samples


_second_only("special_zeta", "zeta", _special_call("zeta"), (1.5, 6), (0.3, 4))
_second_only("igamma", "gammainc", None, (0.3, 6), (0.1, 8))
_second_only("igammac", "gammaincc", None, (0.3, 6), (0.1, 8))


def _x_log(op, scipy_name, call=None, low=0.1):
    ref = _scipy(scipy_name)

    def samples(g):
        return [
            Sample((g.uniform(3, 4, low=-2, high=2), g.uniform(3, 4, low=low, high=3)), call=call, ref=ref),
            Sample((scalar(1.5), scalar(0.5)), call=call, ref=ref, desc="0-d"),
            Sample((empty(0, 3), empty(0, 3)), call=call, ref=ref, desc="empty"),
            Sample((np.array([0.0, 0.0, 1.0, 0.0]), np.array([0.0, _NAN, 0.0, 2.0])), call=call, ref=ref,
                   grad=False, desc="0 * log 0 is 0, nan stays"),
        ]
    SAMPLES[op] = samples


_x_log("xlogy", "xlogy")
_x_log("special_xlog1py", "xlog1py", _special_call("xlog1py"), low=-0.5)


def _mvlgamma(g):
    ref = _scipy("multigammaln")
    return [Sample((g.uniform(3, 4, low=2, high=6),), call=lambda m, x, p=p: m.mvlgamma(x, p),
                   ref=None if ref is None else (lambda x, p=p: np.vectorize(lambda v: ref(v, p))(x)),
                   desc=f"p={p}") for p in (1, 3)] + [
        Sample((scalar(2.5),), call=lambda m, x: m.mvlgamma(x, 2), ref=None if ref is None else (lambda x: ref(x, 2)),
               desc="0-d"),
        Sample((empty(0, 3),), call=lambda m, x: m.mvlgamma(x, 2), ref=lambda x: x, desc="empty")]


SAMPLES["mvlgamma"] = _mvlgamma
