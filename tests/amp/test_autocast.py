"""plugtorch.autocast against torch.autocast on the CPU: the dtype each op runs in, values,
gradients, nesting and the autocast queries."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch
from plugtorch.core.optable import MODES, DispatchMode

BF16_TOL = dict(rtol=2 ** -6, atol=2 ** -6)  # a few bfloat16 roundings of values near 1


@pytest.fixture
def torch(torch):
    """torch on one thread: its threads and ours contend on a small machine (40 training steps
    took 15 s instead of 0.3)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(threads)


def _np(t):
    return t.detach().float().numpy()


def _pair(torch, *shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return plugtorch.tensor(x), torch.tensor(x)


def _name(dtype):
    return str(dtype).split(".")[-1]


# op -> how to call it from a namespace (plugtorch or torch) on float32 tensors a (4, 8), w (8, 8)
OPS = {
    "linear": lambda m, F, a, w: F.linear(a, w),
    "matmul": lambda m, F, a, w: a @ w,
    "mm": lambda m, F, a, w: m.mm(a, w),
    "bmm": lambda m, F, a, w: m.bmm(a[None], w[None]),
    "addmm": lambda m, F, a, w: m.addmm(a, a, w),
    "conv1d": lambda m, F, a, w: F.conv1d(a[None], w[:, :4, None].repeat(1, 1, 3)),
    "softmax": lambda m, F, a, w: F.softmax(a, -1),
    "softmax_of_lowered": lambda m, F, a, w: F.softmax(a @ w, -1),
    "log_softmax_of_lowered": lambda m, F, a, w: F.log_softmax(a @ w, -1),
    "layer_norm_of_lowered": lambda m, F, a, w: F.layer_norm(a @ w, (8,)),
    "sum_of_lowered": lambda m, F, a, w: (a @ w).sum(),
    "exp_of_lowered": lambda m, F, a, w: (a @ w).exp(),
    "mse_loss": lambda m, F, a, w: F.mse_loss(a @ w, a),
    "l1_loss": lambda m, F, a, w: F.l1_loss(a @ w, a),
    "cross_entropy": lambda m, F, a, w: F.cross_entropy(a @ w, m.tensor([0, 1, 2, 3])),
    "nll_loss": lambda m, F, a, w: F.nll_loss(a @ w, m.tensor([0, 1, 2, 3])),
    "prod": lambda m, F, a, w: (a @ w).prod(),
    "cat_mixed": lambda m, F, a, w: m.cat([a @ w, a]),
    "stack_mixed": lambda m, F, a, w: m.stack([a, a @ w]),
    "relu_of_lowered": lambda m, F, a, w: F.relu(a @ w),
    "float64_linear": lambda m, F, a, w: F.linear(a.double(), w.double()),
    "int_matmul": lambda m, F, a, w: a.long() @ w.long(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_runs_in_torchs_dtype(torch, name):
    a, ta = _pair(torch, 4, 8)
    w, tw = _pair(torch, 8, 8, seed=1)
    with plugtorch.autocast("cpu"):
        ours = OPS[name](plugtorch, plugtorch.nn.functional, a, w)
    with torch.autocast("cpu"):
        theirs = OPS[name](torch, torch.nn.functional, ta, tw)
    assert _name(ours.dtype) == _name(theirs.dtype)
    if ours.dtype.is_floating_point and name != "prod":  # prod of 64 rounded values: not a tolerance test
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=2 ** -6, atol=2 ** -4)


def _models(torch):
    """The same small network in both libraries: conv, linear, layer norm, softmax, loss."""
    tm = torch.nn.ModuleDict({"conv": torch.nn.Conv2d(3, 4, 3), "fc": torch.nn.Linear(4 * 6 * 6, 10),
                              "norm": torch.nn.LayerNorm(10)})
    pm = plugtorch.nn.ModuleDict({"conv": plugtorch.nn.Conv2d(3, 4, 3), "fc": plugtorch.nn.Linear(4 * 6 * 6, 10),
                                  "norm": plugtorch.nn.LayerNorm(10)})
    pm.load_state_dict({k: plugtorch.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return pm, tm


def _forward(m, F, mod, x, y):
    out = {"conv": mod["conv"](x)}
    out["fc"] = mod["fc"](F.relu(out["conv"]).flatten(1))
    out["norm"] = mod["norm"](out["fc"])
    out["softmax"] = F.softmax(out["norm"], -1)
    out["loss"] = F.cross_entropy(out["norm"], y)
    return out


def test_a_model_under_autocast_matches_torch_dtypes_values_and_float32_grads(torch):
    torch.manual_seed(0)
    pm, tm = _models(torch)
    x, tx = _pair(torch, 5, 3, 8, 8, seed=2)
    y = np.array([1, 0, 4, 9, 3])
    with plugtorch.autocast("cpu"):
        ours = _forward(plugtorch, plugtorch.nn.functional, pm, x, plugtorch.tensor(y))
    with torch.autocast("cpu"):
        theirs = _forward(torch, torch.nn.functional, tm, tx, torch.tensor(y))
    assert {k: _name(v.dtype) for k, v in ours.items()} == {k: _name(v.dtype) for k, v in theirs.items()}
    assert ours["conv"].dtype is plugtorch.bfloat16 and ours["loss"].dtype is plugtorch.float32
    for k in ours:
        np.testing.assert_allclose(_np(ours[k]), _np(theirs[k]), rtol=2 ** -5, atol=2 ** -5, err_msg=k)
    ours["loss"].backward()
    theirs["loss"].backward()
    for (name, p), tp in zip(pm.named_parameters(), tm.parameters()):
        assert p.grad.dtype is plugtorch.float32, name  # the casts' gradients cast back
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=2 ** -4, atol=2 ** -6, err_msg=name)


def test_queries_nesting_and_disabling_follow_torch(torch):
    a, ta = _pair(torch, 2, 2)
    assert plugtorch.get_autocast_dtype("cpu") is plugtorch.bfloat16
    assert plugtorch.get_autocast_dtype("cuda") is plugtorch.float16
    seen = []
    for m, dt in ((plugtorch, plugtorch.float16), (torch, torch.float16)):
        x = a if m is plugtorch else ta
        got = [m.is_autocast_enabled("cpu"), m.is_autocast_enabled()]
        with m.autocast("cpu"):
            got += [m.is_autocast_enabled("cpu"), m.is_autocast_enabled(), _name((x @ x).dtype)]
            with m.autocast("cpu", enabled=False):
                got += [m.is_autocast_enabled("cpu"), _name((x @ x).dtype)]
            with m.autocast("cpu", dtype=dt):
                got += [_name(m.get_autocast_dtype("cpu")), _name((x @ x).dtype)]
            got += [_name(m.get_autocast_dtype("cpu")), _name((x @ x).dtype)]
        got += [m.is_autocast_enabled("cpu"), _name((x @ x).dtype)]
        seen.append(got)
    assert seen[0] == seen[1]
    assert MODES.on == 0


def test_decorator_and_amp_spelling():
    x = plugtorch.randn(2, 3)

    @plugtorch.amp.autocast("cpu")
    def f(v):
        return v @ v.t()
    assert f(x).dtype is plugtorch.bfloat16 and f(x).dtype is plugtorch.bfloat16  # re-entered twice
    assert (x @ x.t()).dtype is plugtorch.float32 and MODES.on == 0


def test_an_unsupported_dtype_or_device_type_is_refused_as_torch(torch):
    messages = []
    for m in (plugtorch, torch):
        with pytest.warns(UserWarning) as caught, m.autocast("cpu", dtype=m.float64):
            assert not m.is_autocast_enabled("cpu")
        messages.append(str(caught[0].message).replace("torch.", "plugtorch.").replace("plugplugtorch", "plugtorch"))
    assert messages[0] == messages[1]
    with pytest.raises(RuntimeError, match="User specified an unsupported autocast device_type 'xyz'"):
        plugtorch.autocast("xyz")  # (torch refuses 'xyz' earlier, as no device type at all)


@pytest.mark.skipif(plugtorch.cuda.is_available(), reason="a CUDA backend is available: autocast('cuda') is on")
def test_cuda_autocast_without_cuda_warns_and_is_off():
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast."), plugtorch.autocast("cuda"):
        assert not plugtorch.is_autocast_enabled()


def test_cuda_autocast_leaves_host_tensors_alone_and_refuses_bfloat16(monkeypatch):
    monkeypatch.setattr(plugtorch.cuda, "is_available", lambda: True)  # the policy, without a GPU
    x = plugtorch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with plugtorch.autocast("cuda"):
            assert plugtorch.is_autocast_enabled() and plugtorch.get_autocast_dtype("cuda") is plugtorch.float16
            assert (x @ x.t()).dtype is plugtorch.float32
    with pytest.raises(RuntimeError, match="Current CUDA Device does not support bfloat16"):
        plugtorch.autocast("cuda", dtype=plugtorch.bfloat16)


class _Casts(DispatchMode):
    """Counts the casts autocast makes (it computes through the modes below it)."""

    def __init__(self):
        self.casts = 0

    def dispatch(self, opdef, operands, attrs):
        self.casts += opdef.name == "cast"
        return super().dispatch(opdef, operands, attrs)


@pytest.mark.parametrize("cache", [True, False])
def test_a_parameter_is_cast_once_per_region_when_caching(cache):
    lin = plugtorch.nn.Linear(4, 4, bias=False)
    x = plugtorch.randn(3, 4)
    with _Casts() as counter, plugtorch.autocast("cpu", cache_enabled=cache):
        lin(lin(lin(x)))
    # x once, then the weight once (cached) or three times
    assert counter.casts == (2 if cache else 4)


def test_custom_fwd_casts_inputs_and_custom_bwd_restores_the_state(torch):
    seen = {}

    class Square(plugtorch.autograd.Function):
        @staticmethod
        @plugtorch.amp.custom_fwd(device_type="cpu", cast_inputs=plugtorch.float32)
        def forward(ctx, v):
            seen["fwd"] = (v.dtype, plugtorch.is_autocast_enabled("cpu"))
            ctx.save_for_backward(v)
            return v @ v.t()

        @staticmethod
        @plugtorch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = plugtorch.is_autocast_enabled("cpu")
            (v,) = ctx.saved_tensors
            return (g + g.t()) @ v

    w = plugtorch.randn(3, 3, requires_grad=True)
    with plugtorch.autocast("cpu"):
        out = Square.apply(w.bfloat16())
    assert seen["fwd"] == (plugtorch.float32, False) and out.dtype is plugtorch.float32
    out.sum().backward()
    assert seen["bwd"] is False and w.grad.dtype is plugtorch.float32
    with pytest.raises(TypeError):
        plugtorch.amp.custom_fwd(lambda ctx: None)  # device_type is required, as in torch


def test_the_region_is_the_entering_threads_as_torchs(torch):
    """Autocast's state is per thread in torch: a thread started inside a region computes in
    float32 and reads the defaults, and its own region leaves the starting thread alone."""
    import threading
    seen = {}

    for lib in (torch, plugtorch):
        def probe(lib=lib):
            a = lib.ones(4, 4)
            seen[lib.__name__] = [lib.is_autocast_enabled("cpu"), str((a @ a).dtype).split(".")[-1],
                                  lib.is_autocast_cache_enabled(), str(lib.get_autocast_dtype("cpu")).split(".")[-1]]
            with lib.autocast("cpu", dtype=lib.float16):
                seen[lib.__name__].append(str((a @ a).dtype).split(".")[-1])

        with lib.autocast("cpu", cache_enabled=False):
            worker = threading.Thread(target=probe)
            worker.start()
            worker.join()
            b = lib.ones(2, 2)
            seen[lib.__name__] += [lib.is_autocast_enabled("cpu"), str((b @ b).dtype).split(".")[-1],
                                   lib.is_autocast_cache_enabled()]
    assert seen["plugtorch"] == seen["torch"] == [False, "float32", True, "bfloat16", "float16", True, "bfloat16",
                                                  False]
