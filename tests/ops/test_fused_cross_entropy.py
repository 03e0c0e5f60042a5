"""The NumPy backend's cross_entropy / cross_entropy_backward kernels (NumPy's, and the native
ones, which compute (N, C) rows with index targets in C and hand other forms to NumPy's) agree
with the op's decomposition for every option, keep float32 in float32, and are what dispatch runs.
(Against torch: the conformance kit runs every cross_entropy sample on the kernel's backend.)"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import fused, native

import plugtorch as pt

# the ops' decompositions: what a backend without these kernels runs
_cross_entropy, _cross_entropy_backward = (pt.get_registry().ops[name].decompose
                                           for name in ("cross_entropy", "cross_entropy_backward"))
NATIVE_KERNELS = native.kernels()  # empty where the extension is not built (the cases skip, saying why)
NATIVE = pytest.mark.skipif(not NATIVE_KERNELS, reason=native.status())
KERNELS = [pytest.param((fused.cross_entropy, fused.cross_entropy_backward), id="numpy"),
           pytest.param((NATIVE_KERNELS.get("cross_entropy"), NATIVE_KERNELS.get("cross_entropy_backward")),
                        id="native", marks=NATIVE)]

CASES = list(itertools.product(["mean", "sum", "none"], [None, "weight"], [0.0, 0.15], ["index", "probs"]))


def _inputs(dtype, shape, target_kind, rng):
    x = rng.standard_normal(shape).astype(dtype) * 3
    c = shape[1]
    if target_kind == "index":
        t = rng.integers(0, c, (shape[0],) + shape[2:])
        t.flat[::4] = -100                                     # some ignored targets
    else:
        t = rng.random(shape).astype(dtype)
    return x, t, rng.random(c).astype(dtype) + 0.5


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 5), (3, 4, 2, 3)])
@pytest.mark.parametrize("reduction, weight, ls, target_kind", CASES)
def test_kernels_match_the_decomposition(dtype, shape, reduction, weight, ls, target_kind, kernels):
    forward, backward = kernels
    rng = np.random.default_rng(0)
    x, t, w = _inputs(dtype, shape, target_kind, rng)
    w = w if weight else None
    attrs = dict(ignore_index=-100, reduction=reduction, label_smoothing=ls)
    out = forward(x, t, w, **attrs)
    g = np.asarray(rng.standard_normal(out.shape), dtype=dtype)
    grad = backward(g, x, t, w, **attrs)
    tw = None if w is None else pt.tensor(w)
    want = _cross_entropy(pt.tensor(x), pt.tensor(t), tw, **attrs).numpy()
    want_grad = _cross_entropy_backward(pt.tensor(g), pt.tensor(x), pt.tensor(t), tw, **attrs).numpy()
    assert isinstance(out, np.ndarray) and out.dtype == dtype and grad.dtype == dtype
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out, want, **tol)
    np.testing.assert_allclose(grad, want_grad, **tol)


def test_dispatch_runs_the_kernels(numpy_kernel_calls):
    calls = numpy_kernel_calls("cross_entropy", "cross_entropy_backward")
    x = pt.randn(4, 3, requires_grad=True)
    pt.nn.functional.cross_entropy(x, pt.tensor([0, 2, 1, 0])).backward()
    assert calls == ["cross_entropy", "cross_entropy_backward"]


@NATIVE
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["strided", "large logits", "all ignored", "nan row"])
def test_native_kernels_on_awkward_rows(case, reduction):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((10, 6)) * 3).astype(np.float32)
    t = rng.integers(0, 6, 10)
    if case == "strided":
        x = np.ascontiguousarray(x.T).T[:, ::-1]
    elif case == "large logits":   # exp of these overflows without the row maximum taken out
        x *= 3000
    elif case == "all ignored":    # mean over no targets: 0/0 = nan, as torch; every gradient 0
        t[:] = -100
    else:
        x[2, 3] = np.nan
    attrs = dict(ignore_index=-100, reduction=reduction, label_smoothing=0.0)
    out = NATIVE_KERNELS["cross_entropy"](x, t, None, **attrs)
    g = np.asarray(rng.standard_normal(out.shape), dtype=np.float32)
    grad = NATIVE_KERNELS["cross_entropy_backward"](g, x, t, None, **attrs)
    with np.errstate(invalid="ignore", divide="ignore"):  # the decomposition's 0/0 when all are ignored
        want = _cross_entropy(pt.tensor(x.copy()), pt.tensor(t), None, **attrs).numpy()
        want_grad = _cross_entropy_backward(pt.tensor(g), pt.tensor(x.copy()), pt.tensor(t), None, **attrs).numpy()
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-6, atol=1e-6)


@NATIVE
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [10, 37, 2000])  # the scalar pass; 16-lane blocks and a tail; a vocabulary
@pytest.mark.parametrize("case", ["plain", "strided", "-inf entries", "+inf", "all -inf", "nan ignored",
                                  "all ignored"])
def test_native_kernels_match_torch(case, c, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((12, c)) * 4).astype(dtype)
    t = rng.integers(0, c, 12)
    t[::5] = -100
    if case == "strided":
        x = np.ascontiguousarray(x.T).T[:, ::-1]
    elif case == "-inf entries":    # masked classes: exp(-inf) = 0, the rest as usual
        x[:, ::3] = -np.inf
        t[t % 3 == 0] += 1
        t[t >= c] = 1
    elif case == "+inf":            # NaN rows, as torch's log_softmax gives them
        x[1, 4] = x[3, 0] = np.inf
    elif case == "all -inf":
        x[2] = -np.inf
    elif case == "all ignored":     # mean: a nan loss, and zero gradients
        t[:] = -100
    else:                           # NaN in an ignored row still gives a NaN gradient row, as torch's
        x[0, 7] = np.nan
    for reduction in ("mean", "sum", "none"):
        attrs = dict(ignore_index=-100, reduction=reduction, label_smoothing=0.0)
        out = NATIVE_KERNELS["cross_entropy"](x, t, None, **attrs)
        g = np.asarray(rng.standard_normal(out.shape), dtype=dtype)
        grad = NATIVE_KERNELS["cross_entropy_backward"](g, x, t, None, **attrs)
        tx = torch.tensor(x.copy(), requires_grad=True)
        want = torch.nn.functional.cross_entropy(tx, torch.tensor(t), reduction=reduction)
        want.backward(torch.tensor(g))
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out, want.detach().numpy(), **tol)
        np.testing.assert_allclose(grad, tx.grad.numpy(), **tol)


@NATIVE
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_rows_split_over_two_threads_give_the_same_bits(dtype, two_threads):
    """The C kernels' rows split over the pool (as many jobs as BLAS threads): the same values, count
    and gradient as on one thread, and an out-of-range target still names the first bad row."""
    from plugtorch_backends.numpy_backend.native import _kernels
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((300, 400)) * 3).astype(dtype)
    t = rng.integers(0, 400, 300)
    t[::7] = -100
    scale = np.array([1.0], dtype)

    def both(targets):
        loss, dx = np.empty(300, dtype), np.empty_like(x)
        count = _kernels.cross_entropy(x, targets, -100, loss)
        _kernels.cross_entropy_backward(x, targets, -100, scale, True, dx)
        return loss, count, dx

    with threadpool_limits(limits=1, user_api="blas"):
        one = both(t)
    with two_threads():
        calls = _kernels.pool_info()[2]
        two = both(t)
        assert _kernels.pool_info()[2] - calls == 2  # each call split
        bad = t.copy()
        bad[[40, 250]] = 400, -3  # the first bad row in the first job's half, another in the second's
        for fn, args in ((_kernels.cross_entropy, (np.empty(300, dtype),)),
                         (_kernels.cross_entropy_backward, (scale, True, np.empty_like(x)))):
            with pytest.raises(IndexError, match="cross_entropy: target of row 40 is out of range"):
                fn(x, bad, -100, *args)
    np.testing.assert_array_equal(one[0], two[0])
    assert one[1] == two[1] == 300 - len(t[::7])
    np.testing.assert_array_equal(one[2], two[2])


ROUTES = [pytest.param(lambda *a, **k: _cross_entropy_backward(*[None if v is None else pt.tensor(v) for v in a],
                                                               **k).numpy(), id="decomposition"),
          pytest.param(fused.cross_entropy_backward, id="numpy"),
          pytest.param(NATIVE_KERNELS.get("cross_entropy_backward"), id="native", marks=NATIVE)]


@pytest.mark.parametrize("backward", ROUTES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case, weighted, ls", [("all ignored", False, 0.0), ("all ignored", True, 0.0),
                                               ("all ignored", False, 0.1), ("all ignored", True, 0.1),
                                               ("zero total weight", True, 0.0), ("zero total weight", True, 0.1)])
def test_ignored_targets_get_zero_gradients_as_in_torch(backward, reduction, case, weighted, ls):
    """An ignored target's row of the gradient is exactly 0 whatever reaches it: torch's masked
    gradient. 'mean' over no targets (or over targets of weight 0) divides by 0 and a 'none'
    gradient may be inf where the loss was 0; multiplied by the ignored rows' zero weights, those
    had made every row NaN, and one all-padding batch then turned every parameter into NaN."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 5)) * 2
    w = rng.random(5) + 0.5 if weighted else None
    if case == "all ignored":
        t = np.full(4, -100)
    else:  # the counted targets' class has weight 0: their rows are 0 * (1/0), NaN as in torch
        t = np.array([0, -100, 0, -100])
        w[0] = 0.0
    g = np.where(t == -100, np.inf, rng.standard_normal(4)) if reduction == "none" else np.asarray(1.5)
    attrs = dict(ignore_index=-100, reduction=reduction, label_smoothing=ls)
    with np.errstate(invalid="ignore", divide="ignore"):
        got = backward(g, x, t, w, **attrs)
    tx = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.cross_entropy(tx, torch.tensor(t), None if w is None else torch.tensor(w), **attrs)
    out.backward(torch.tensor(g))
    np.testing.assert_array_equal(got[t == -100], 0.0)
    if case == "zero total weight" and ls and reduction == "mean":
        # the counted rows: the smoothing term (not 0) times 1/0, inf here and NaN in torch's
        # order of operations; both not finite, as the loss is
        assert not np.isfinite(got[t != -100]).any() and not np.isfinite(tx.grad.numpy()[t != -100]).any()
        return
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-12, atol=1e-14, equal_nan=True)


def test_nll_loss_of_ignored_targets_has_zero_gradients_as_in_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(12).standard_normal((3, 4))
    for t, reduction in [(np.full(3, -100), "mean"), (np.array([1, -100, 2]), "none")]:
        g = np.where(t == -100, np.inf, 2.0) if reduction == "none" else np.asarray(1.0)
        px, tx = pt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        pt.nn.functional.nll_loss(px, pt.tensor(t), reduction=reduction).backward(pt.tensor(g))
        torch.nn.functional.nll_loss(tx, torch.tensor(t), reduction=reduction).backward(torch.tensor(g))
        np.testing.assert_array_equal(px.grad.numpy(), tx.grad.numpy())
