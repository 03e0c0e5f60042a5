"""A fused forward kernel for a composite op never slows a training step.

Each group times one training step (forward, ``(y * y).mean()`` or the loss, backward) on
three peers:

* ``plain``: a NumPy backend without any fused kernel, so the op runs its decomposition
  (as one graph node differentiated by the op's derivative);
* ``fused``: the same backend plus a fused NumPy *forward* kernel for the op, written at
  array level with the decomposition's own algorithm and memory layout, so the comparison
  is about dispatch, not about a better or worse kernel;
* ``torch``: PyTorch on the CPU.

The derivatives of conv2d, max_pool2d and cross_entropy are written with registered ops
(``conv2d_input_grad``/``conv2d_weight_grad``, ``max_pool2d_backward``,
``cross_entropy_backward``), so backward never re-runs the forward: ``fused`` should time
at most ``plain``. (A backward that re-ran the decomposition of a fused conv2d would take
about twice as long.)

Run: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m pytest benchmarks/bench_fused_composites.py
"""
from __future__ import annotations

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import make_backend

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
from plugtorch.core.plugins import unregister_plugin

PLAIN, FUSED = "bench_plain", "bench_fused"
CONV_X, CONV_W = (64, 16, 28, 28), (32, 16, 3, 3)
POOL_X = (64, 16, 28, 28)
LOGITS = [(64, 10), (512, 1000)]


def _torch():
    return pytest.importorskip("torch", reason="PyTorch is the comparison peer; pip install torch==2.13.0")


# -- fused NumPy forward kernels (the decompositions' algorithms, at array level) ----------------

def conv2d_kernel(x, w, b=None, *, stride, padding, dilation, groups):
    """im2col (channels first, batch second) + one matmul per group, like the decomposition; the
    result keeps its (O, N, OH, OW) memory layout, viewed as (N, O, OH, OW)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (ph, pw), (dh, dw), (sh, sw) = padding, dilation, stride
    if ph or pw:  # pad and move channels first in one pass
        xp = np.zeros((c, n, h + 2 * ph, wd + 2 * pw), x.dtype)
        xp[:, :, ph:ph + h, pw:pw + wd] = x.transpose(1, 0, 2, 3)
    else:
        xp = x.transpose(1, 0, 2, 3)
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    s_c, s_n, s_h, s_w = xp.strides
    cols = np.lib.stride_tricks.as_strided(
        xp, (groups, cg, kh, kw, n, oh, ow),
        (s_c * cg, s_c, s_h * dh, s_w * dw, s_n, s_h * sh, s_w * sw), writeable=False)
    out = np.matmul(w.reshape(groups, o // groups, cg * kh * kw), cols.reshape(groups, cg * kh * kw, -1))
    if b is not None:
        out += b.reshape(groups, o // groups, 1)
    return out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3)


def max_pool2d_kernel(x, *, kernel_size, stride, padding, dilation, ceil_mode):
    """A running maximum over the window offsets of a -inf-padded input (NaNs propagate)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, wd = x.shape

    def size(length, k, s, p, d):
        span = length + 2 * p - d * (k - 1) - 1
        if not ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        return out - 1 if (out - 1) * s >= length + p else out
    oh, ow = size(h, kh, sh, ph, dh), size(wd, kw, sw, pw, dw)
    need_h, need_w = (oh - 1) * sh + dh * (kh - 1) + 1, (ow - 1) * sw + dw * (kw - 1) + 1
    if ph or pw or need_h > h or need_w > wd:
        xp = np.full((n, c, max(h + 2 * ph, need_h), max(wd + 2 * pw, need_w)), -np.inf, x.dtype)
        xp[:, :, ph:ph + h, pw:pw + wd] = x
    else:
        xp = x
    s_n, s_c, s_h, s_w = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, (n, c, oh, ow, kh, kw), (s_n, s_c, s_h * sh, s_w * sw, s_h * dh, s_w * dw), writeable=False)
    out = win[..., 0, 0].copy()
    for i in range(kh):
        for j in range(kw):
            if i or j:
                np.maximum(out, win[..., i, j], out=out)
    return out


def cross_entropy_kernel(x, t, w=None, *, ignore_index, reduction, label_smoothing):
    """log-softmax + pick, in the decomposition's order of operations."""
    if t.dtype.kind == "f" or label_smoothing:  # not benchmarked: the op itself on NumPy
        with plugtorch.no_grad():
            return F.cross_entropy(*(None if a is None else plugtorch.from_numpy(a) for a in (x, t, w)),
                                   ignore_index=ignore_index, reduction=reduction).numpy()
    z = x - x.max(axis=1, keepdims=True)
    z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = valid.astype(x.dtype) if w is None else w[safe] * valid
    loss = -np.take_along_axis(z, safe[:, None], axis=1)[:, 0] * wt
    if reduction == "mean":
        return np.asarray(loss.sum() / wt.sum())
    return np.asarray(loss.sum()) if reduction == "sum" else loss


KERNELS = {"conv2d": conv2d_kernel, "max_pool2d": max_pool2d_kernel, "cross_entropy": cross_entropy_kernel}


def _plugin(name, backend, kernels):
    mod = type(plugtorch)(name)
    mod.PLUGTORCH_CONTRACT = CONTRACT_VERSION

    @hookimpl
    def plugtorch_register(registrar):
        registrar.add_backend(make_backend(name=backend, aliases=()))
        for op, fn in kernels.items():
            registrar.add_kernel(op, backend, fn)
    mod.plugtorch_register = plugtorch_register
    return mod


@pytest.fixture(scope="module", autouse=True)
def backends():
    defined = {op: fn for op, fn in KERNELS.items() if op in plugtorch.get_registry().ops}
    registered = [plugtorch.register_plugin(_plugin("bench_plain_plugin", PLAIN, {})),
                  plugtorch.register_plugin(_plugin("bench_fused_plugin", FUSED, defined))]
    yield
    for name in registered:
        unregister_plugin(name)


# -- the steps ---------------------------------------------------------------------------------

def _data(seed=0):
    rng = np.random.default_rng(seed)
    return {"conv_x": rng.standard_normal(CONV_X).astype(np.float32),
            "conv_w": (rng.standard_normal(CONV_W) * 0.1).astype(np.float32),
            "conv_b": rng.standard_normal(CONV_W[0]).astype(np.float32),
            "pool_x": rng.standard_normal(POOL_X).astype(np.float32),
            **{f"logits_{s}": rng.standard_normal(s).astype(np.float32) for s in LOGITS},
            **{f"target_{s}": rng.integers(0, s[1], s[0]) for s in LOGITS}}


DATA = _data()


def _conv(m, x, w, b):
    y = m.nn.functional.conv2d(x, w, b, padding=1)
    return y, (y * y).mean()


def _pool(m, x):
    y = m.nn.functional.max_pool2d(x, 2)
    return y, (y * y).mean()


def _cross_entropy(m, x, t):
    loss = m.nn.functional.cross_entropy(x, t)
    return loss, loss


# name -> (forward(m, *inputs) -> (the op's output, loss), input arrays, which inputs need grad)
STEPS = {
    "conv2d": (_conv, ["conv_x", "conv_w", "conv_b"], [False, True, True]),
    "max_pool2d": (_pool, ["pool_x"], [True]),
    **{f"cross_entropy {s[0]}x{s[1]}": (_cross_entropy, [f"logits_{s}", f"target_{s}"], [True, False])
       for s in LOGITS},
}


def _step(forward, m, *inputs):
    forward(m, *inputs)[1].backward()
    for t in inputs:
        t.grad = None


def _inputs(m, device, names, grads):
    if m is plugtorch:
        return [plugtorch.tensor(DATA[n], device=device, requires_grad=g) for n, g in zip(names, grads)]
    return [m.tensor(DATA[n], requires_grad=g) for n, g in zip(names, grads)]


def _check_fused_matches_plain(op, forward, names, grads):
    """The fused kernel serves the op, as one graph node, with the plain step's values and gradients."""
    name = op.split()[0]
    assert plugtorch.get_registry().backends[FUSED].kernels[name] is KERNELS[name]
    results = []
    for dev in (PLAIN, FUSED):
        inputs = _inputs(plugtorch, dev, names, grads)
        y, loss = forward(plugtorch, *inputs)
        assert y.grad_fn.op == name, f"{op} on {dev}: the output's node is {y.grad_fn.op}"
        loss.backward()
        results.append([y.detach().numpy()] + [t.grad.numpy() for t in inputs if t.grad is not None])
    for fused, plain in zip(results[1], results[0]):
        np.testing.assert_allclose(fused, plain, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("peer", ["plain", "fused", "torch"])
@pytest.mark.parametrize("op", list(STEPS))
def test_training_step(benchmark, op, peer):
    forward, names, grads = STEPS[op]
    if op.split()[0] not in plugtorch.get_registry().ops:
        pytest.skip(f"'{op.split()[0]}' is not a registered op in this build, so no kernel can fuse it")
    benchmark.group = f"{op} training step"
    if peer == "torch":
        torch = _torch()
        benchmark(_step, forward, torch, *_inputs(torch, None, names, grads))
        return
    if peer == "fused":
        _check_fused_matches_plain(op, forward, names, grads)
    benchmark(_step, forward, plugtorch, *_inputs(plugtorch, PLAIN if peer == "plain" else FUSED, names, grads))
