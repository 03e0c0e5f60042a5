"""The CuPy backend's softmax, cross-entropy and optimizer-update kernels, run on the CPU from the
same CUDA source (``cpu_load``), against the NumPy backend's kernels: the same values (the
optimizer updates bit for bit), every option of each op, odd row lengths, empty batches, dims
that are not last, and no device value read on the host."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from plugtorch_backends.cupy_backend import loss_kernels, optim_kernels
from plugtorch_backends.numpy_backend import fused, fused_optim

FLOATS = [np.float32, np.float64]


class DeviceArray(np.ndarray):
    """A NumPy array that refuses to be read on the host, as a CuPy array would cost a sync."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError("a kernel wrapper read a device value on the host")

    __float__ = __int__ = __bool__ = __index__ = item = tolist = _refuse


class DeviceNumpy:
    """NumPy as the wrappers' ``xp``, handing out DeviceArrays."""

    def __getattr__(self, name):
        attr = getattr(np, name)
        if not callable(attr) or isinstance(attr, type):
            return attr

        def call(*args, **kwargs):
            out = attr(*args, **kwargs)
            return out.view(DeviceArray) if isinstance(out, np.ndarray) else out
        return call


def _device(a):
    return None if a is None else np.asarray(a).view(DeviceArray)


@pytest.fixture(scope="module")
def kernels(cpu_load):
    xp = DeviceNumpy()
    return {**loss_kernels.make_kernels(xp, cpu_load), **optim_kernels.make_kernels(xp, cpu_load)}


def _host(a):
    assert type(a) is DeviceArray, f"expected an array of the wrappers' xp, got {type(a).__name__}"
    return np.asarray(a)


def _close(got, want, dtype):
    got = _host(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    rtol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}[dtype]
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True)


# -- softmax / log_softmax --------------------------------------------------------------------

SHAPES = [((5, 1), -1), ((5, 7), 1), ((1, 255), 1), ((1, 256), -1), ((2, 257), 1), ((1, 1000), 1), ((0, 7), 1),
          ((5, 0), 0), ((7,), 0), ((3, 7, 2), 1), ((257, 3), 0), ((2, 3, 4), 0), ((2, 3, 4), 2)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", SHAPES, ids=lambda v: str(v))
def test_softmax_matches_the_numpy_kernel(kernels, name, dtype, shape, dim):
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 4).astype(dtype)
    got = kernels[name](_device(x), dim=dim)
    _close(got, getattr(fused, name)(x, dim % x.ndim), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_propagates_nan_and_inf_as_numpy(kernels, name, dtype):
    inf, nan = np.inf, np.nan
    x = np.array([[nan, 0, 1], [-inf, -inf, -inf], [inf, 0, 1], [1e4, 0, -1e4], [-inf, 0, 1], [-1e30, -1e30, 0]],
                 dtype)
    with np.errstate(invalid="ignore"):
        want = getattr(fused, name)(x, 1)
    got = _host(kernels[name](_device(x), dim=1))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    _close(_device(got), want, dtype)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_a_strided_view_a_0d_input_and_float16(kernels, name):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    _close(kernels[name](_device(x.T), dim=0), getattr(fused, name)(x.T, 0), np.float32)  # not C-contiguous
    _close(kernels[name](_device(np.float64(3.0)), dim=0), getattr(fused, name)(np.float64(3.0).reshape(1), 0)
           .reshape(()), np.float64)
    h = x.astype(np.float16)
    got = kernels[name](_device(h), dim=1)
    _close(got, getattr(fused, name)(h.astype(np.float32), 1).astype(np.float16), np.float16)


def test_softmax_rows_are_grid_strided(cpu_load):
    """Fewer blocks than rows, fewer threads than a row: every row still normalised."""
    x = np.random.default_rng(2).standard_normal((5, 70)).astype(np.float64)
    y = np.empty_like(x)
    cpu_load("softmax").get_function("softmax_f64")((2,), (32,), (x, y, np.int64(5), np.int64(70), np.int64(1)))
    np.testing.assert_allclose(y, fused.softmax(x, 1), rtol=1e-13)


# -- cross_entropy ----------------------------------------------------------------------------

def _ce_inputs(dtype, shape, kind, rng, ignore_index=-100):
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    c = shape[1]
    if kind == "index":
        t = rng.integers(0, c, (shape[0],) + shape[2:])
        t.flat[::4] = ignore_index                                  # ignored targets, the first included
    else:
        t = rng.random(shape).astype(dtype)
    return x, t, (rng.random(c) + 0.5).astype(dtype)


def _check_ce(kernels, x, t, w, dtype, **attrs):
    want = fused.cross_entropy(x, t, w, **attrs)
    got = kernels["cross_entropy"](_device(x), _device(t), _device(w), **attrs)
    _close(got, want, dtype)
    g = np.asarray(np.random.default_rng(3).standard_normal(want.shape), dtype=dtype)
    want_dx = fused.cross_entropy_backward(g, x, t, w, **attrs)
    _close(kernels["cross_entropy_backward"](_device(g), _device(x), _device(t), _device(w), **attrs), want_dx,
           dtype)


CE_CASES = list(itertools.product(["mean", "sum", "none"], [False, True], [0.0, 0.15], ["index", "probs"]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 2, 2)])
@pytest.mark.parametrize("reduction, weighted, ls, kind", CE_CASES)
def test_cross_entropy_matches_the_numpy_kernels(kernels, dtype, shape, reduction, weighted, ls, kind):
    x, t, w = _ce_inputs(dtype, shape, kind, np.random.default_rng(0))
    _check_ce(kernels, x, t, w if weighted else None, dtype, ignore_index=-100, reduction=reduction,
              label_smoothing=ls)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 255), (2, 256), (1, 257), (1, 1000), (2, 7, 3)])
@pytest.mark.parametrize("kind", ["index", "probs"])
def test_cross_entropy_row_lengths(kernels, dtype, shape, kind):
    x, t, w = _ce_inputs(dtype, shape, kind, np.random.default_rng(4))
    for reduction in ("mean", "none"):
        _check_ce(kernels, x, t, w, dtype, ignore_index=-100, reduction=reduction, label_smoothing=0.1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kind", ["index", "probs"])
@pytest.mark.parametrize("shape", [(0, 5), (0, 3, 2), (2, 3, 0)])
def test_cross_entropy_of_an_empty_batch(kernels, reduction, kind, shape):
    x, t, w = _ce_inputs(np.float32, shape, kind, np.random.default_rng(5))
    for weight in (None, w):
        _check_ce(kernels, x, t, weight, np.float32, ignore_index=-100, reduction=reduction, label_smoothing=0.2)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.3])
def test_cross_entropy_with_every_target_ignored_is_nan_for_mean_with_zero_gradients(kernels, reduction, ls):
    """torch's: the mean over no targets is 0/0, and every row's gradient is exactly 0 (not the
    NaN of 0 * 1/0), so such a batch leaves the parameters alone."""
    x, _, w = _ce_inputs(np.float64, (4, 5), "index", np.random.default_rng(6))
    t = np.full(4, 2)
    attrs = dict(ignore_index=2, reduction=reduction, label_smoothing=ls)
    for weight in (None, w):
        _check_ce(kernels, x, t, weight, np.float64, **attrs)
        g = np.full((4,) if reduction == "none" else (), np.inf)  # an infinite upstream reaches no row either
        dx = kernels["cross_entropy_backward"](_device(g), _device(x), _device(t), _device(weight), **attrs)
        np.testing.assert_array_equal(_host(dx), np.zeros((4, 5)))
    if reduction == "mean":
        assert np.isnan(_host(kernels["cross_entropy"](_device(x), _device(t), None, **attrs)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_ignore_index_inside_the_class_range_and_batch_one(kernels, dtype):
    x, t, w = _ce_inputs(dtype, (1, 6, 5), "index", np.random.default_rng(7), ignore_index=3)
    t[0, 1] = 3
    for reduction, ls in itertools.product(("mean", "sum", "none"), (0.0, 0.25)):
        _check_ce(kernels, x, t, w, dtype, ignore_index=3, reduction=reduction, label_smoothing=ls)


def test_cross_entropy_of_strided_views_and_extreme_logits(kernels):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((7, 4)) * 3).T                          # (4, 7), not C-contiguous
    x[1, 2], x[2, :] = 1e300, -1e300
    t = np.array([1, 2, -100, 6])[::-1].copy()[::-1]
    w = np.linspace(0.5, 2, 14)[::2]
    for reduction in ("mean", "sum", "none"):
        _check_ce(kernels, x, t, w, np.float64, ignore_index=-100, reduction=reduction, label_smoothing=0.1)
    p = rng.random((7, 4)).T
    _check_ce(kernels, x, p, w, np.float64, ignore_index=-100, reduction="mean", label_smoothing=0.1)


def test_cross_entropy_in_float16_runs_in_float32_and_rounds_once(kernels):
    x, t, w = _ce_inputs(np.float32, (3, 5, 2), "index", np.random.default_rng(9))
    h, wh = x.astype(np.float16), w.astype(np.float16)
    attrs = dict(ignore_index=-100, reduction="mean", label_smoothing=0.1)
    want = fused.cross_entropy(h.astype(np.float32), t, wh.astype(np.float32), **attrs).astype(np.float16)
    _close(kernels["cross_entropy"](_device(h), _device(t), _device(wh), **attrs), want, np.float16)
    g = np.asarray(0.5, np.float16)
    want_dx = fused.cross_entropy_backward(g.astype(np.float32), h.astype(np.float32), t, wh.astype(np.float32),
                                           **attrs).astype(np.float16)
    _close(kernels["cross_entropy_backward"](_device(g), _device(h), _device(t), _device(wh), **attrs), want_dx,
           np.float16)


def test_a_target_out_of_range_gives_nan_not_a_stray_read(kernels):
    """A GPU cannot raise mid-kernel (the op's front checks the range in debug mode)."""
    x = np.zeros((3, 4))
    t = np.array([0, 4, -7])
    attrs = dict(ignore_index=-100, reduction="none", label_smoothing=0.0)
    loss = _host(kernels["cross_entropy"](_device(x), _device(t), None, **attrs))
    assert loss[0] == np.log(4) and np.isnan(loss[1:]).all()
    attrs["reduction"] = "mean"
    assert np.isnan(_host(kernels["cross_entropy"](_device(x), _device(t), None, **attrs)))
    dx = _host(kernels["cross_entropy_backward"](_device(np.asarray(1.0)), _device(x), _device(t), None, **attrs))
    assert np.isnan(dx).all()


# -- optimizer updates ------------------------------------------------------------------------

ADAM_OPTIONS = [dict(), dict(maximize=True), dict(weight_decay=0.1),
                dict(weight_decay=0.1, decoupled_weight_decay=True), dict(amsgrad=True), dict(beta1=0.3),
                dict(amsgrad=True, maximize=True, weight_decay=0.05),
                dict(amsgrad=True, weight_decay=0.02, decoupled_weight_decay=True, beta1=0.2)]


def _adam_args(options):
    options = dict(options)
    amsgrad = options.pop("amsgrad", False)
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, maximize=False,
              decoupled_weight_decay=False)
    kw.update(options)
    return amsgrad, kw


def _run_adam(kernel, arrays, grads, amsgrad, kw):
    for step, g in enumerate(grads, 1):
        out = kernel(arrays[0], g, arrays[1], arrays[2], arrays[3] if amsgrad else None, step=step, **kw)
        assert out is arrays[0]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_adam_step_is_the_numpy_kernel_bit_for_bit(kernels, dtype, options):
    amsgrad, kw = _adam_args(options)
    rng = np.random.default_rng(0)
    shape = (17, 5)
    want = [rng.standard_normal(shape).astype(dtype)] + [np.zeros(shape, dtype) for _ in range(3)]
    got = [_device(a.copy()) for a in want]
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(6)]
    grads[3][0, 0] = np.nan                                          # nan stays where NumPy puts it
    _run_adam(fused_optim.adam_step_, want, grads, amsgrad, kw)
    _run_adam(kernels["adam_step_"], got, [_device(g) for g in grads], amsgrad, kw)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), b)


SGD_OPTIONS = [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3), dict(momentum=0.9, nesterov=True),
               dict(weight_decay=0.1), dict(maximize=True, weight_decay=0.1),
               dict(momentum=0.5, dampening=0.1, nesterov=True, weight_decay=0.01, maximize=True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_sgd_step_is_the_numpy_kernel_bit_for_bit(kernels, dtype, options):
    rng = np.random.default_rng(1)
    shape = (600,)                                                   # three blocks
    kw = dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False)
    kw.update(options)
    has_buffer = kw["momentum"] != 0
    want = [rng.standard_normal(shape).astype(dtype), np.zeros(shape, dtype)]
    got = [_device(a.copy()) for a in want]
    for step in range(4):
        g = rng.standard_normal(shape).astype(dtype)
        for kernel, arrays, grad in ((fused_optim.sgd_step_, want, g), (kernels["sgd_step_"], got, _device(g))):
            out = kernel(arrays[0], grad, arrays[1] if has_buffer else None, first_step=step == 0, **kw)
            assert out is arrays[0]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_optimizer_updates_land_in_strided_arrays(kernels):
    """A state array that is a view is updated through a copy written back: same bits as NumPy's."""
    rng = np.random.default_rng(2)
    base = [np.abs(rng.standard_normal((6, 8))) for _ in range(4)]
    want = [a.copy().T[::2] for a in base]                           # (4, 6) views, not C-contiguous
    got = [_device(a.copy()).T[::2] for a in base]
    g = rng.standard_normal((6, 4)).T                                # a strided gradient too
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1, maximize=False,
              decoupled_weight_decay=True)
    for step in (1, 2):
        fused_optim.adam_step_(want[0], g, want[1], want[2], want[3], step=step, **kw)
        assert kernels["adam_step_"](got[0], _device(g), got[1], got[2], got[3], step=step, **kw) is got[0]
    for a, b in zip(got, want):
        assert not a.flags.c_contiguous
        np.testing.assert_array_equal(np.asarray(a), b)
    want = [base[0].copy().T, np.zeros((6, 8)).T]
    got = [_device(base[0].copy()).T, _device(np.zeros((6, 8))).T]
    g = rng.standard_normal((6, 8)).T
    for first in (True, False):
        for kernel, arrays, grad in ((fused_optim.sgd_step_, want, g), (kernels["sgd_step_"], got, _device(g))):
            kernel(arrays[0], grad, arrays[1], lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=True,
                   maximize=False, first_step=first)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_optimizer_updates_of_0d_and_empty_parameters(kernels):
    kw = dict(lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, maximize=False,
              decoupled_weight_decay=False)
    want = [np.array(1.5), np.array(0.0), np.array(0.0)]
    got = [_device(a.copy()) for a in want]
    fused_optim.adam_step_(want[0], np.array(0.25), want[1], want[2], step=1, **kw)
    kernels["adam_step_"](got[0], _device(np.array(0.25)), got[1], got[2], step=1, **kw)
    for a, b in zip(got, want):
        assert a.shape == () and np.asarray(a) == b
    empty = _device(np.zeros((0, 3), np.float32))
    assert kernels["adam_step_"](empty, empty, empty, empty, step=1, **kw) is empty
    assert kernels["sgd_step_"](empty, empty, None, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                                nesterov=False, maximize=False, first_step=False) is empty


def test_float16_parameters_update_in_float32_rounded_once_per_step(kernels):
    rng = np.random.default_rng(3)
    shape = (9, 3)
    state = [rng.standard_normal(shape).astype(np.float16)] + [np.zeros(shape, np.float16) for _ in range(3)]
    got = [_device(a.copy()) for a in state]
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-4, weight_decay=0.01, maximize=False,
              decoupled_weight_decay=True)
    for step in range(1, 4):
        g = rng.standard_normal(shape).astype(np.float16)
        wide = [a.astype(np.float32) for a in state]
        fused_optim.adam_step_(wide[0], g.astype(np.float32), *wide[1:], step=step, **kw)
        state = [a.astype(np.float16) for a in wide]
        kernels["adam_step_"](got[0], _device(g), *got[1:], step=step, **kw)
    for a, b in zip(got, state):
        assert a.dtype == np.float16
        np.testing.assert_array_equal(np.asarray(a), b)


def test_the_kernels_refuse_integer_arrays(kernels):
    p = _device(np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="no CUDA optimizer kernel for int64"):
        kernels["sgd_step_"](p, p, None, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                             maximize=False, first_step=False)
    with pytest.raises(TypeError, match="no CUDA kernel for int64"):
        kernels["softmax"](p, dim=0)


def test_the_update_is_grid_strided(cpu_load):
    """One block of 32 threads covers all 600 elements."""
    rng = np.random.default_rng(4)
    p, g, buf = rng.standard_normal(600), rng.standard_normal(600), np.zeros(600)
    want = p.copy()
    fused_optim.sgd_step_(want, g, None, lr=0.5, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                          maximize=False, first_step=False)
    i32, f64 = np.int32, np.float64
    cpu_load("optim").get_function("sgd_step_f64")((1,), (32,), (
        p, g, buf, np.int64(600), i32(0), i32(0), f64(0), i32(0), i32(0), f64(0), f64(1), i32(0), f64(-0.5)))
    np.testing.assert_array_equal(p, want)


def test_the_ops_run_on_these_kernels_as_registered(cpu_load, monkeypatch):
    """Through plugtorch's ops, autograd and optimizers (keyword attrs as dispatch passes them), a few
    training steps on these kernels give what the NumPy kernels give."""
    import plugtorch as pt
    backend = pt.get_registry().backends["numpy"]
    mine = {**loss_kernels.make_kernels(np, cpu_load), **optim_kernels.make_kernels(np, cpu_load)}

    def train():
        pt.manual_seed(0)
        model = pt.nn.Sequential(pt.nn.Linear(6, 5), pt.nn.Linear(5, 4))
        opts = [pt.optim.AdamW(model[0].parameters(), lr=0.05, weight_decay=0.01, amsgrad=True),
                pt.optim.SGD(model[1].parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)]
        x, t = pt.randn(5, 6), pt.tensor([0, 1, 2, -100, 1])
        for _ in range(3):
            for opt in opts:
                opt.zero_grad()
            out = model(x)
            loss = pt.nn.functional.cross_entropy(out, t, weight=pt.ones(4) * 0.5, label_smoothing=0.1) + \
                (pt.softmax(out, 0) * pt.log_softmax(out, 1)).sum() * 0.1
            loss.backward()
            for opt in opts:
                opt.step()
        return [p.detach().numpy().copy() for p in model.parameters()]

    want = train()
    called = set()
    for name, fn in mine.items():
        monkeypatch.setitem(backend.kernels, name, lambda *a, _f=fn, _n=name, **k: called.add(_n) or _f(*a, **k))
    got = train()
    assert called == set(mine)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
