"""In-place elementwise ops with no graph to keep (``p.add_(g, alpha=-lr)`` under no_grad, running
statistics) write straight into the tensor's memory through the backend's out= variant, instead
of computing a new array and copying it back. The values are the general path's, bit for bit;
views see the write; version counters still catch a saved tensor modified before backward; and
the general path still runs wherever the shortcut would differ (integers, other dtypes, a kernel
registered over the primitive, a plugtorch.compile capture)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch as pt
from plugtorch.core.ops import inplace

BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "copysign")
UNARY = ("neg", "exp", "log", "log1p", "expm1", "sqrt", "abs", "sign", "sin", "cos", "tan", "tanh",
         "asin", "acos", "atan", "asinh", "acosh", "atanh", "floor", "ceil", "round")


def _x(dtype):
    rng = np.random.default_rng(0)
    return rng.uniform(0.2, 0.9, (3, 4)).astype(dtype)


def _both_ways(monkeypatch, name, x, *args, **kwargs):
    """(the tensor after x.<name>_(...) on the shortcut, after the general path), from one start."""
    fast = pt.tensor(x)
    memory = fast._data
    out = getattr(fast, name + "_")(*args, **kwargs)
    assert out is fast and fast._data is memory, "written into the tensor's own array"
    with monkeypatch.context() as m:
        m.setattr(inplace, "_into", lambda *a: None)
        for seen in inplace._SEEN:  # the methods' inline shortcut runs only on an answer _into kept
            seen.clear()
        slow = getattr(pt.tensor(x), name + "_")(*args, **kwargs)
    return fast, slow


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_equal_the_general_path(monkeypatch, name, dtype):
    x = _x(dtype)
    others = {"same shape": pt.tensor(_x(dtype)[::-1].copy()), "broadcast row": pt.tensor(_x(dtype)[:1]),
              "float": 0.75, "int": 2}
    for what, other in others.items():
        fast, slow = _both_ways(monkeypatch, name, x, other)
        assert fast.dtype == slow.dtype
        np.testing.assert_array_equal(fast.numpy(), slow.numpy(), err_msg=f"{name}_ with {what}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_equal_the_general_path(monkeypatch, name, dtype):
    fast, slow = _both_ways(monkeypatch, name, _x(dtype) * 2 - 0.5)  # acosh's and log's nan included
    np.testing.assert_array_equal(fast.numpy(), slow.numpy(), err_msg=name)


@pytest.mark.parametrize("name,alpha", [("add", -0.01), ("sub", 3)])
def test_alpha_scales_the_operand_first(monkeypatch, name, alpha):
    fast, slow = _both_ways(monkeypatch, name, _x(np.float32), pt.tensor(_x(np.float32)), alpha=alpha)
    np.testing.assert_array_equal(fast.numpy(), slow.numpy())


def test_against_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is the oracle; pip install torch==2.13.0")
    x, g = _x(np.float32), _x(np.float32)[::-1].copy()
    p, tp = pt.tensor(x), torch.tensor(x)
    for t, lib in ((p, pt), (tp, torch)):
        with lib.no_grad():
            t.mul_(0.5).add_(lib.tensor(g), alpha=-0.1).sqrt_().div_(lib.tensor(g[:1]))
    np.testing.assert_allclose(p.numpy(), tp.numpy(), rtol=1e-6)


def test_a_view_writes_through_to_its_base():
    base = pt.zeros(3, 4)
    base[1].add_(pt.ones(4))
    base[:, 2].mul_(0.5).add_(2.0)
    np.testing.assert_array_equal(base.numpy()[1], [1, 1, 2.5, 1])
    np.testing.assert_array_equal(base.numpy()[:, 2], [2, 2.5, 2])


def test_a_saved_tensor_modified_in_place_still_fails_backward():
    w = pt.ones(3, requires_grad=True)
    x = pt.tensor([1.0, 2.0, 3.0])
    y = (w * x).sum()
    x.mul_(2)  # no graph is built by this call (x needs no grad), but mul saved x
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_integers_and_other_dtypes_take_the_general_path():
    i = pt.tensor([1, 2, 3])
    np.testing.assert_array_equal(i.add_(2).numpy(), [3, 4, 5])
    with pytest.raises(RuntimeError, match="div_: result type float32 can't be cast"):
        i.div_(2)
    f = pt.tensor([1.0, 2.0])
    np.testing.assert_array_equal(f.add_(pt.tensor([1.0, 1.0], dtype=pt.float64)).numpy(), [2, 3])
    with pytest.raises(RuntimeError, match=r"shapes \[2\] and \[3\] do not broadcast|size of tensor"):
        f.add_(pt.ones(3))


def test_an_operand_that_broadcasts_past_the_tensor_is_refused_as_torch_does():
    x = pt.ones(3)
    x.add_(pt.ones(3))  # the shortcut's answer kept: the next calls take it first
    for other in (pt.ones(2, 3), pt.ones(1, 3)):
        with pytest.raises(RuntimeError, match=r"add_: output with shape \[3\] doesn't match the broadcast shape "
                                               rf"\[{other.shape[0]}, 3\]"):
            x.add_(other)
    np.testing.assert_array_equal(x.numpy(), [2, 2, 2])  # nothing written
    x.mul_(pt.tensor([2.0]))  # smaller operands broadcast into it
    x.sub_(pt.tensor(1.0))
    np.testing.assert_array_equal(x.numpy(), [3, 3, 3])


def test_the_shortcut_is_the_general_paths_answer_for_grad_and_backends():
    w = pt.ones(3, requires_grad=True)
    x = pt.ones(3)
    x.add_(pt.ones(3))  # the shortcut's answer kept
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.add_(x)  # grad mode on and w requires grad: the graph path refuses a leaf
    y = pt.ones(3)
    y.add_(w)  # an operand requiring grad puts y in the graph, as torch does
    assert y.requires_grad and y.grad_fn is not None
    with pt.no_grad():
        w.add_(x)  # an optimizer's update: written in place
        assert w.grad_fn is None
    np.testing.assert_array_equal(w.detach().numpy(), [3, 3, 3])


def test_a_kernel_registered_over_the_primitive_runs(numpy_kernel_calls):
    calls = numpy_kernel_calls("add")
    x = pt.ones(3)
    x.add_(pt.ones(3))
    assert calls == ["add"]
    np.testing.assert_array_equal(x.numpy(), [2, 2, 2])


def test_a_kernel_registered_after_the_first_call_runs(monkeypatch):
    # the shortcut's answer is kept per backend with the kernel it was found for
    x = pt.ones(3)
    x.add_(pt.ones(3))  # the shortcut, its answer kept
    b = x._backend
    calls = []

    def recorded(*args, **kwargs):
        calls.append(args)
        return b.primitives["add"](*args, **kwargs)

    with monkeypatch.context() as m:
        m.setitem(b.kernels, "add", recorded)
        x.add_(pt.ones(3))
        assert len(calls) == 1
    x.add_(pt.ones(3))  # the primitive again: the shortcut, not the kernel gone
    assert len(calls) == 1
    np.testing.assert_array_equal(x.numpy(), [4, 4, 4])


def test_a_compiled_step_replays_the_update():
    p = pt.zeros(4)
    g = pt.ones(4)

    def step():
        with pt.no_grad():
            p.add_(g, alpha=-0.5)
        return p * 1

    compiled = pt.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a capture that fell back to eager would warn
        for _ in range(3):
            compiled()
    np.testing.assert_array_equal(p.numpy(), [-1.5] * 4)  # each replay made the update


@pytest.mark.parametrize("write", [
    lambda x: x.add_(1), lambda x: x.mul_(pt.ones(2, 3)), lambda x: x.zero_(), lambda x: x.fill_(2.0),
    lambda x: x.copy_(pt.ones(2, 3)), lambda x: x.__setitem__(0, 5.0), lambda x: x.clamp_(0, 1),
    lambda x: x.normal_()], ids=["add_", "mul_", "zero_", "fill_", "copy_", "setitem", "clamp_", "normal_"])
@pytest.mark.parametrize("tracked", [False, True], ids=["no graph", "in a graph"])
def test_writing_into_an_expanded_view_is_refused_as_torch_does(write, tracked):
    # NumPy would raise its own read-only error; CuPy would let the writes race
    leaf = pt.tensor([1.0, 2.0, 3.0], requires_grad=tracked)
    base = leaf * 1
    with pytest.raises(RuntimeError, match=r"more than one element of the written-to tensor \(shape \[2, 3\], "
                                           r"strides \[0, 1\]\) refers to a single memory location.*clone\(\)"):
        write(base.expand(2, 3))
    np.testing.assert_array_equal(base.detach().numpy(), [1, 2, 3])


def test_size_one_dims_with_stride_zero_are_fine():
    x = pt.ones(1, 3).expand(1, 3)
    x.add_(1)
    np.testing.assert_array_equal(x.numpy(), [[2, 2, 2]])


def test_an_empty_tensor_with_zero_strides_takes_writes():
    x = pt.zeros(0, 3).expand(0, 3)
    x.add_(1)
    x[...] = 2.0
    assert x.shape == (0, 3)
