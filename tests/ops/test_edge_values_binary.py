"""The binary elementwise functions at edge values, against torch: every pair of NaN, +-inf, +-0,
subnormals, 1e30 and ordinary numbers, in float32 and float64, values (with the sign of every
zero) and both gradients; the integer ops at their dtype's min and max; an integer zero divisor
refused as torch refuses it."""
from __future__ import annotations

import math

import numpy as np
import pytest

import plugtorch

# 1e-45 and 5e-324 are float32's and float64's smallest subnormals (5e-324 is 0 in float32),
# 1e-310 a float64 subnormal
EDGES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, -1e-45, 5e-324, 1e-310, -1.0, 1.0, 0.5, -2.5, 3.0,
         1e30, -1e30, 1e300]
PAIRS = [(a, b) for a in EDGES for b in EDGES]


def _fn(name):
    return lambda lib, a, b: getattr(lib, name)(a, b)


FLOAT_OPS = {
    **{name: _fn(name) for name in """add sub mul div true_divide pow maximum minimum fmax fmin remainder fmod
       atan2 hypot copysign logaddexp logaddexp2 xlogy nextafter float_power heaviside eq ne lt le gt ge
       floor_divide ldexp""".split()},
    "div_trunc": lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
    "xlog1py": lambda lib, a, b: lib.special.xlog1py(a, b),
    "add_alpha": lambda lib, a, b: lib.add(a, b, alpha=2.5),
    "sub_alpha": lambda lib, a, b: lib.sub(a, b, alpha=-0.5),
    "lerp": lambda lib, a, b: lib.lerp(a, b, 0.3),
}
# torch has no derivative for these (floor_divide's is an error in torch and 0 in plugtorch, which
# div(rounding_mode="floor") gives in both); the comparisons are bool
NO_GRADIENT = {"heaviside", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge"}


def _tiny(a):
    """Zero or subnormal in the dtype."""
    return np.abs(a) < np.finfo(a.dtype).tiny


def _quotient_overflows(a, b):
    """Finite a over non-zero b beyond the dtype's range."""
    with np.errstate(all="ignore"):
        q = np.abs(a.astype(np.float64) / b.astype(np.float64))
    return np.isfinite(a) & (b != 0) & (q > np.finfo(a.dtype).max)


# Where torch's CPU kernels are the less accurate ones, plugtorch keeps its values: op -> (the
# pairs left out, given the operands as arrays of the dtype, and why)
KNOWN = {
    # torch's vectorised fmod is a - trunc(a / b) * b: nan where a / b overflows (a subnormal
    # divisor); plugtorch's is C's fmod, exact
    "fmod": _quotient_overflows,
    "remainder": _quotient_overflows,
    # torch's alpha (and lerp's weight) is fused, one rounding (fma); plugtorch rounds the product
    # first: the two differ by one subnormal step, and in the sign of a zero, only where both
    # operands are zero or subnormal
    "add_alpha": lambda a, b: _tiny(a) & _tiny(b),
    "sub_alpha": lambda a, b: _tiny(a) & _tiny(b),
    "lerp": lambda a, b: _tiny(a) & _tiny(b),
    # log2(2**-1 + 2**-1) is 0; torch's log1p(exp2(-|a - b|)) / ln 2 + max gives -1.1e-8 (float32)
    "logaddexp2": lambda a, b: (a == b) & (a == -1),
}
# gradients: the products of a rule round in another order than torch's where they are subnormal
GRAD_KNOWN = {"ldexp": lambda a, b: _tiny(a)}


def _operands(lib, dtype, requires_grad=False):
    dt = getattr(lib, dtype)
    return (lib.tensor([p[0] for p in PAIRS], dtype=dt, requires_grad=requires_grad),
            lib.tensor([p[1] for p in PAIRS], dtype=dt, requires_grad=requires_grad))


def _kept(name, known, dtype):
    with np.errstate(over="ignore"):  # 1e300 is inf in float32, as in the tensors
        a, b = (np.array([p[i] for p in PAIRS], dtype=dtype) for i in (0, 1))
    return ~known[name](a, b) if name in known else np.ones(len(PAIRS), bool)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(FLOAT_OPS))
def test_binary_values_at_edge_pairs_match_torch(torch, name, dtype):
    ours = FLOAT_OPS[name](plugtorch, *_operands(plugtorch, dtype)).numpy()
    theirs = FLOAT_OPS[name](torch, *_operands(torch, dtype)).numpy()
    assert ours.dtype == theirs.dtype
    if theirs.dtype.kind == "f":
        same = np.isclose(ours, theirs, rtol=1e-6 if dtype == "float32" else 1e-14, atol=0, equal_nan=True)
        same &= (np.signbit(ours) == np.signbit(theirs)) | np.isnan(theirs)
    else:
        same = ours == theirs
    bad = np.flatnonzero(~same & _kept(name, KNOWN, dtype))
    assert not len(bad), [(PAIRS[i], ours[i].item(), theirs[i].item()) for i in bad[:8]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(set(FLOAT_OPS) - NO_GRADIENT))
def test_binary_gradients_at_edge_pairs_match_torch(torch, name, dtype):
    grads = []
    for lib in (plugtorch, torch):
        a, b = _operands(lib, dtype, requires_grad=True)
        out = FLOAT_OPS[name](lib, a, b)
        ga, gb = lib.autograd.grad(out, (a, b), lib.full(out.shape, 1.5, dtype=out.dtype), allow_unused=True)
        grads.append([np.zeros(len(PAIRS), dtype) if g is None else g.numpy() for g in (ga, gb)])
    tiny = np.finfo(dtype).smallest_subnormal
    kept = _kept(name, GRAD_KNOWN, dtype)
    for which, ours, theirs in zip(("input", "other"), *grads):
        same = np.isclose(ours, theirs, rtol=1e-6 if dtype == "float32" else 1e-14, atol=tiny, equal_nan=True)
        bad = np.flatnonzero(~same & kept)
        assert not len(bad), (which, [(PAIRS[i], ours[i].item(), theirs[i].item()) for i in bad[:8]])


INT_OPS = """add sub mul floor_divide remainder fmod maximum minimum bitwise_and bitwise_or bitwise_xor
eq lt ge""".split()


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_integer_ops_at_min_and_max_match_torch(torch, dtype):
    """Wrapping sums and products, floor and trunc division and both remainders of negative
    operands. Not min / -1, whose quotient overflows: torch's int32 and int64 kernels trap
    (SIGFPE) there."""
    info = np.iinfo(dtype)
    values = sorted({int(info.min), int(info.min) + 1, -7, -3, -1, 0, 1, 2, 3, 7, int(info.max) - 1, int(info.max)})
    values = [v for v in values if info.min <= v <= info.max]
    for name in INT_OPS + ["div_trunc", "div_floor", "true_divide"]:
        dividing = name in ("floor_divide", "remainder", "fmod", "div_trunc", "div_floor")
        pairs = [(a, b) for a in values for b in values if b != 0 and not (dividing and a == info.min and b == -1)]
        results = []
        for lib in (plugtorch, torch):
            a = lib.tensor([p[0] for p in pairs], dtype=getattr(lib, dtype))
            b = lib.tensor([p[1] for p in pairs], dtype=getattr(lib, dtype))
            out = lib.div(a, b, rounding_mode=name[4:]) if name.startswith("div_") else getattr(lib, name)(a, b)
            results.append(out.numpy())
        ours, theirs = results
        assert ours.dtype == theirs.dtype, name
        np.testing.assert_array_equal(ours, theirs, err_msg=name)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
@pytest.mark.parametrize("name", ["remainder", "fmod", "floor_divide", "div_trunc", "div_floor"])
def test_integer_division_by_zero_is_refused_as_torch(torch, name, dtype):
    def run(lib, other):
        a = lib.tensor([7, 0, 3], dtype=getattr(lib, dtype))
        if name.startswith("div_"):
            return lib.div(a, other, rounding_mode=name[4:])
        return getattr(lib, name)(a, other)

    for other in (lambda lib: lib.tensor([2, 0, 1], dtype=getattr(lib, dtype)), lambda lib: 0):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            run(torch, other(torch))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            run(plugtorch, other(plugtorch))
    # a float zero divisor is not refused: inf and nan, as torch
    ours = run(plugtorch, plugtorch.tensor([2.0, 0.0, -0.0])).numpy()
    theirs = run(torch, torch.tensor([2.0, 0.0, -0.0])).numpy()
    np.testing.assert_array_equal(ours, theirs)
    assert (np.signbit(ours) == np.signbit(theirs)).all()


def test_a_device_namespace_does_not_read_the_divisor_back():
    """The refusal reads the divisor (``all``); on a device that is a host synchronisation per
    integer division, so only NumPy's table checks, as torch's CUDA kernels do not."""
    from types import SimpleNamespace

    from plugtorch_backends.numpy_backend.xp_table import _torch_integer_division

    def host_read(*args, **kwargs):
        raise AssertionError("the divisor was read back to the host")

    device = SimpleNamespace(copyto=np.copyto, copysign=np.copysign, all=host_read)
    table = {"remainder": np.remainder, "fmod": np.fmod, "floor_divide": np.floor_divide}
    _torch_integer_division(device, table)
    with np.errstate(divide="ignore"):
        for name in table:
            table[name](np.array([7, 3]), np.array([2, 0]))
    host = {"remainder": np.remainder, "fmod": np.fmod, "floor_divide": np.floor_divide}
    _torch_integer_division(np, host)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        host["fmod"](np.array([7, 3]), np.array([2, 0]))


def test_rsub_is_sub_with_its_operands_swapped():
    """torch.rsub(input, other, alpha=1) = other - alpha * input, for a tensor or a number ``other``,
    integer and floating, with input's gradient -alpha (as torch)."""
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = plugtorch.rsub(x, 5, alpha=2)
    y.sum().backward()
    assert y.tolist() == [3.0, 1.0] and x.grad.tolist() == [-2.0, -2.0]
    assert plugtorch.rsub(plugtorch.tensor([1, 2]), 5, alpha=2).tolist() == [3, 1]
    assert plugtorch.rsub(plugtorch.tensor([1.0, 2.0]), plugtorch.tensor([3.0, 3.0])).tolist() == [2.0, 1.0]
    assert plugtorch.rsub(plugtorch.tensor([1, 2]), 5).dtype == plugtorch.int64
