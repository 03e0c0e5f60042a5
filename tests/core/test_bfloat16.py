"""plugtorch.bfloat16 against torch's: promotion, rounding, arithmetic, printing, checkpoints."""
from __future__ import annotations

import importlib.util
import io
import pickle

import numpy as np
import pytest

import plugtorch
from plugtorch.core import dtypes as D

OTHERS = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _bits(t):
    """A bfloat16 tensor's 16-bit patterns (ours or torch's), for bit-exact comparisons."""
    if isinstance(t, plugtorch.Tensor):
        return t.view(plugtorch.int16).numpy()
    import torch
    return t.view(torch.int16).numpy()


def _values(n, seed):
    rng = np.random.default_rng(seed)
    # a spread of magnitudes, signs and values that are not bfloat16 numbers (so rounding shows)
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)


@pytest.mark.parametrize("other", OTHERS)
def test_promotion_matches_torch(torch, other):
    expect = torch.promote_types(torch.bfloat16, getattr(torch, other))
    assert plugtorch.promote_types(plugtorch.bfloat16, D.dtype_from_name(other)).name == str(expect)[6:]
    assert plugtorch.promote_types(D.dtype_from_name(other), plugtorch.bfloat16).name == str(expect)[6:]


def test_result_type_with_scalars_and_zero_dim_tensors(torch):
    ours = plugtorch.ones(2, dtype=plugtorch.bfloat16)
    theirs = torch.ones(2, dtype=torch.bfloat16)
    for a, b in [(1.5, 1.5), (2, 2), (plugtorch.tensor(1.0), torch.tensor(1.0)),
                 (plugtorch.tensor(1.0, dtype=plugtorch.float16), torch.tensor(1.0, dtype=torch.float16)),
                 (plugtorch.ones(2, dtype=plugtorch.float16), torch.ones(2, dtype=torch.float16))]:
        assert (ours + a).dtype.name == str((theirs + b).dtype)[6:]


def test_float32_to_bfloat16_rounds_as_torch(torch):
    x = np.concatenate([_values(4000, 0), np.float32([0.0, -0.0, np.inf, -np.inf, 3.4e38, 1e-40, 1.00390625])])
    ours = plugtorch.tensor(x).to(plugtorch.bfloat16)
    theirs = torch.tensor(x).to(torch.bfloat16)
    assert np.array_equal(_bits(ours), _bits(theirs))
    assert np.array_equal(plugtorch.tensor(x, dtype=plugtorch.bfloat16).float().numpy(), theirs.float().numpy())
    assert plugtorch.tensor(x).bfloat16().dtype is plugtorch.bfloat16


@pytest.mark.parametrize("op", ["add", "mul", "sub", "div"])
def test_elementwise_is_bit_exact(torch, op):
    a, b = _values(3000, 1), _values(3000, 2)
    ours = getattr(plugtorch, op)(plugtorch.tensor(a).bfloat16(), plugtorch.tensor(b).bfloat16())
    theirs = getattr(torch, op)(torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16())
    assert ours.dtype is plugtorch.bfloat16
    assert np.array_equal(_bits(ours), _bits(theirs))


def test_reductions_accumulate_in_float32_as_torch(torch):
    x = np.random.default_rng(3).standard_normal((64, 500)).astype(np.float32)
    ours, theirs = plugtorch.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    # bfloat16 partial sums would drift by many ulps over 500 terms; float32 accumulation rounds once
    for o, t in [(ours.sum(1), theirs.sum(1)), (ours.mean(1), theirs.mean(1)), (ours.sum(), theirs.sum())]:
        assert o.dtype is plugtorch.bfloat16
        np.testing.assert_allclose(o.float().numpy(), t.float().numpy(), rtol=2 ** -8, atol=1e-6)


def test_matmul_agrees_to_bfloat16_precision(torch):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((33, 300)).astype(np.float32), rng.standard_normal((300, 17)).astype(np.float32)
    ours = plugtorch.tensor(a).bfloat16() @ plugtorch.tensor(b).bfloat16()
    theirs = torch.tensor(a).bfloat16() @ torch.tensor(b).bfloat16()
    assert ours.dtype is plugtorch.bfloat16
    scale = np.abs(theirs.float().numpy()).max()
    # both round a float32-accumulated product once: they may differ by one bfloat16 ulp
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=2 ** -7, atol=scale * 2 ** -8)


def test_fused_kernels_take_bfloat16(torch):
    x = np.random.default_rng(5).standard_normal((4, 3, 8, 8)).astype(np.float32)
    ours, theirs = plugtorch.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    F, TF = plugtorch.nn.functional, torch.nn.functional
    for f in (lambda m, v: m.relu(v), lambda m, v: m.max_pool2d(v, 2), lambda m, v: m.softmax(v, -1),
              lambda m, v: m.layer_norm(v, (8,)), lambda m, v: m.gelu(v)):
        o, t = f(F, ours), f(TF, theirs)
        assert o.dtype is plugtorch.bfloat16
        np.testing.assert_allclose(o.float().numpy(), t.float().numpy(), rtol=2 ** -7, atol=2 ** -7)


def test_numpy_refuses_as_torch_and_values_still_reach_the_host(torch):
    x = plugtorch.tensor([1.5, 2.3], dtype=plugtorch.bfloat16)
    with pytest.raises(TypeError) as ours:
        x.numpy()
    with pytest.raises(TypeError) as theirs:
        torch.tensor([1.5, 2.3], dtype=torch.bfloat16).numpy()
    assert str(ours.value) == str(theirs.value)
    assert x.tolist() == [1.5, 2.296875] and x[1].item() == 2.296875
    assert x.type() == "plugtorch.BFloat16Tensor"


def test_printing_matches_torch(torch):
    x = [1.5, 2.3, -7.1e10, 1e-5]
    ours = repr(plugtorch.tensor(x, dtype=plugtorch.bfloat16))
    theirs = repr(torch.tensor(x, dtype=torch.bfloat16))
    assert ours == theirs.replace("torch.", "plugtorch.")


def test_gradient_flows_through_bfloat16_casts():
    w = plugtorch.randn(3, 4, requires_grad=True)
    (w.bfloat16() * 2).float().sum().backward()
    assert w.grad.dtype is plugtorch.float32 and w.grad.tolist() == [[2.0] * 4] * 3


def test_torch_saved_bfloat16_state_dict_loads_and_ours_loads_in_torch(torch, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).to(torch.bfloat16)
    torch.save(model.state_dict(), tmp_path / "t.pt")
    loaded = plugtorch.load(tmp_path / "t.pt")
    assert loaded["weight"].dtype is plugtorch.bfloat16
    assert np.array_equal(_bits(loaded["weight"]), _bits(model.weight.detach()))
    ours = plugtorch.nn.Linear(5, 3).bfloat16()
    assert ours.weight.dtype is plugtorch.bfloat16
    ours.load_state_dict(loaded)
    state = {"weight": ours.weight.detach().t(), "bias": ours.bias.detach()}  # a strided view too
    plugtorch.save(state, tmp_path / "p.pt")
    back = torch.load(tmp_path / "p.pt")
    assert back["weight"].dtype is torch.bfloat16
    assert torch.equal(back["weight"], model.weight.detach().t()) and torch.equal(back["bias"], model.bias.detach())


def test_pickle_round_trip():
    x = plugtorch.tensor([[1.5, -2.25], [3e-3, 7e10]], dtype=plugtorch.bfloat16)
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is plugtorch.bfloat16 and np.array_equal(_bits(y), _bits(x))
    buf = io.BytesIO()
    plugtorch.save(x, buf)
    buf.seek(0)
    assert np.array_equal(_bits(plugtorch.load(buf)), _bits(x))


def test_cupy_backend_refuses_bfloat16_by_name():
    from plugtorch_backends.numpy_backend.xp_table import make_dtype_maps

    class CupyLike:  # any array namespace but NumPy's: the CuPy backend's tables are built this way
        dtype = staticmethod(np.dtype)

    to_native, _ = make_dtype_maps(CupyLike)
    assert to_native[plugtorch.float16] == np.float16
    with pytest.raises(TypeError, match=r"plugtorch\.bfloat16 is not supported by the CuPy backend"):
        to_native[plugtorch.bfloat16]


_EMULATED = """
import plugtorch as pt
b = pt.get_backend("cupy_emulated")
if not b.available:
    print("unavailable:", b.unavailable_reason)
    raise SystemExit
for make in (lambda: pt.ones(2).to("cupy_emulated").bfloat16(), lambda: pt.ones(2).bfloat16().to("cupy_emulated"),
             lambda: pt.zeros(2, dtype=pt.bfloat16, device="cupy_emulated")):
    try:
        make()
        print("accepted")
    except TypeError as e:
        print("refused:", e)
"""


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None,
                    reason="CuPy is not installed: the emulated CuPy backend checks its code against CuPy's API")
def test_the_cupy_backends_own_code_refuses_bfloat16():
    """The CuPy backend's code run on the CPU (cupy_emulated, in a subprocess so this registry
    stays as it is): a cast, a move and a creation in bfloat16 are each refused by name."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PLUGTORCH_PLUGINS="plugtorch_backends.cupy_backend.emulation")
    out = subprocess.run([sys.executable, "-c", _EMULATED], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("unavailable:"):
        pytest.skip(f"the emulated CuPy backend cannot run here: {out.stdout.strip()}")
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("refused: plugtorch.bfloat16 is not supported by the CuPy backend")
                                   for line in lines), lines


def test_shared_memory_carries_bfloat16_between_processes():
    from multiprocessing.reduction import ForkingPickler

    import plugtorch.multiprocessing  # registers the tensor reductions
    x = plugtorch.tensor([1.5, -2.25, 3.3], dtype=plugtorch.bfloat16)
    y = ForkingPickler.loads(ForkingPickler.dumps(x))  # what a queue to a worker does
    assert y.dtype is plugtorch.bfloat16 and x.is_shared()
    y[0] = 7.0  # one shared segment: the write shows through
    assert x.tolist() == [7.0, -2.25, 3.296875]


def test_ops_with_python_numbers_keep_bfloat16_as_torch(torch):
    # torch takes the number in bfloat16, except mul and div, which use it in float32
    x = _values(500, 6)
    ours, theirs = plugtorch.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    for f in (lambda m, v: m.where(v > 0, v, 0.1), lambda m, v: m.where(v > 0, 1.3, v),
              lambda m, v: v.clamp(min=0.1), lambda m, v: v.masked_fill(v > 0, 2.3), lambda m, v: v / 3.0,
              lambda m, v: v - 0.1, lambda m, v: v ** 2.0, lambda m, v: v * 1.1, lambda m, v: v / 0.1,
              lambda m, v: v.fmod(0.3), lambda m, v: v.div(0.3, rounding_mode="floor")):
        o, t = f(plugtorch, ours), f(torch, theirs)
        assert o.dtype is plugtorch.bfloat16
        assert np.array_equal(_bits(o), _bits(t))


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu"])
def test_activation_gradients_of_bfloat16_match_torch(torch, name):
    # their backward kernels compute bfloat16 in float32 and round once, as torch's do; the C
    # kernels leave bfloat16 to their NumPy path, which does so (native/activation.py)
    x = np.random.default_rng(6).standard_normal((4, 33)).astype(np.float32)
    g = np.random.default_rng(7).standard_normal((4, 33)).astype(np.float32)
    grads = []
    for m in (plugtorch, torch):
        v = m.tensor(x).bfloat16().requires_grad_()
        getattr(m, name)(v).backward(m.tensor(g).bfloat16())
        assert v.grad.dtype == m.bfloat16
        grads.append(v.grad)
    ours, theirs = grads
    assert (_bits(ours) == _bits(theirs)).mean() > 0.99  # at most an odd ulp where the forward rounded apart
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=2 ** -7, atol=2 ** -7)
