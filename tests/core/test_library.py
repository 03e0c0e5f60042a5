"""plugtorch.library: custom ops, their kernels and derivatives, kernels for existing ops, backends."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch import library
from plugtorch.core.errors import PluginError
from plugtorch.testing import Sample, check_coverage, check_forward, check_gradcheck

from .plugin_helpers import make_primitives

_counter = [0]


def _ns():
    """A fresh namespace per test (libraries are process-wide, like torch's)."""
    _counter[0] += 1
    return f"testlib{_counter[0]}"


@pytest.fixture
def ns():
    name = _ns()
    yield name
    lib = library._LIBRARIES.pop(name, None)
    if lib is not None and name in plugtorch.get_registry().plugin_names():
        plugtorch.unregister_plugin(name)


def _swish(ns):
    @library.custom_op(f"{ns}::swish", mutates_args=())
    def swish(x: plugtorch.Tensor, beta: float = 1.0) -> plugtorch.Tensor:
        """x * sigmoid(beta * x)"""
        return x / (1 + np.exp(-beta * x))
    return swish


def _swish_grad(ctx, grad):
    x, beta = ctx.inputs["x"], ctx.inputs["beta"]
    s = plugtorch.sigmoid(x * beta)
    return grad * (s + x * beta * s * (1 - s)), None


def test_a_custom_op_runs_on_arrays_and_is_reachable_by_name(ns):
    swish = _swish(ns)
    x = plugtorch.tensor([-1.0, 0.5, 2.0])
    expected = x.numpy() / (1 + np.exp(-2.0 * x.numpy()))
    np.testing.assert_allclose(swish(x, 2.0).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(getattr(plugtorch.ops, ns).swish(x, beta=2.0).numpy(), expected, rtol=1e-6)
    reg = plugtorch.get_registry()
    assert reg.ops[f"{ns}::swish"].plugin == ns and ns in reg.plugin_names()


def test_register_autograd_gives_gradients_of_every_order(ns):
    swish = _swish(ns)
    swish.register_autograd(_swish_grad)
    x = plugtorch.randn(5, dtype=plugtorch.float64, requires_grad=True)
    assert plugtorch.autograd.gradcheck(lambda t: swish(t, 1.5), (x,))
    assert plugtorch.autograd.gradgradcheck(lambda t: swish(t, 1.5), (x,))
    assert swish(x).grad_fn.name() == f"{ns.capitalize()}SwishBackward0"


def test_setup_context_saves_what_backward_reads_as_torch_does(ns):
    @library.custom_op(f"{ns}::cube", mutates_args=())
    def cube(x: plugtorch.Tensor) -> plugtorch.Tensor:
        return x * x * x

    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.scale = 3

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.scale * x * x

    cube.register_autograd(backward, setup_context=setup_context)
    x = plugtorch.tensor([1.0, -2.0], requires_grad=True)
    cube(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]


def test_an_op_without_a_derivative_says_so_in_backward(ns):
    swish = _swish(ns)
    y = swish(plugtorch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match=f"custom op '{ns}::swish' has no derivative registered.*register_autograd"):
        y.sum().backward()


def test_a_kernel_per_backend_is_preferred_there(ns):
    calls = []
    swish = _swish(ns)

    @swish.register_kernel("numpy")
    def _(x, beta):
        calls.append(x.shape)
        return (x / (1 + np.exp(-beta * x))).astype(x.dtype)

    swish(plugtorch.ones(3))
    assert calls == [(3,)]


def test_mutating_ops_bump_versions_and_refuse_tensors_that_need_grad(ns):
    @library.custom_op(f"{ns}::fill_", mutates_args=("x",))
    def fill_(x: plugtorch.Tensor, value: float) -> None:
        x[...] = value

    t = plugtorch.zeros(3)
    assert fill_(t, 2.5) is None and t.tolist() == [2.5] * 3 and t._version == 1
    with pytest.raises(RuntimeError, match="mutated by the op and requires grad"):
        fill_(plugtorch.zeros(2, requires_grad=True), 1.0)
    with pytest.raises(PluginError, match="returns nothing"):
        fill_.register_kernel("numpy")(lambda x, value: None)


def test_a_list_of_tensors_is_one_variadic_operand(ns):
    @library.custom_op(f"{ns}::total", mutates_args=())
    def total(xs: list[plugtorch.Tensor]) -> plugtorch.Tensor:
        return sum(xs[1:], xs[0])

    total.register_autograd(lambda ctx, g: ([g] * len(ctx.inputs["xs"]),))
    a, b = plugtorch.ones(2, requires_grad=True), plugtorch.ones(2, requires_grad=True)
    total([a, b * 2]).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("bad,match", [
    (lambda x, y: x, "needs a type annotation"),
    (lambda *xs: xs, r"\*args"),
])
def test_signatures_a_custom_op_cannot_have_are_refused(ns, bad, match):
    with pytest.raises(TypeError, match=match):
        library.custom_op(f"{ns}::bad", bad, mutates_args=())


def test_no_tensor_argument_and_bad_names_are_refused(ns):
    def f(n: int) -> plugtorch.Tensor:
        return n
    with pytest.raises(TypeError, match="no parameter is annotated Tensor"):
        library.custom_op(f"{ns}::f", f, mutates_args=())
    with pytest.raises(ValueError, match="'namespace::name'"):
        library.custom_op("nonamespace", lambda x: x, mutates_args=())


def test_custom_op_samples_drive_the_conformance_kit(ns):
    swish = _swish(ns)
    swish.register_autograd(_swish_grad)

    def samples(g):
        ref = (lambda a: a / (1 + np.exp(-a)))
        no_torch = lambda m, x: NotImplemented  # torch has no such op
        call = lambda m, x: swish(x)
        return [Sample((g.randn(3, 2),), call=call, torch_call=no_torch, ref=ref),
                Sample((np.asarray(0.5),), call=call, torch_call=no_torch, ref=ref),
                Sample((np.zeros((0, 2)),), call=call, torch_call=no_torch, ref=ref)]
    swish.register_samples(samples)
    opdef = plugtorch.get_registry().ops[f"{ns}::swish"]
    items = plugtorch.testing.samples_for(opdef)
    assert check_coverage(opdef, items)
    for s in items:
        check_forward(opdef, s, "numpy")
        check_gradcheck(opdef, s, "numpy")


def test_register_kernel_for_an_existing_op_and_define_backend(ns):
    lib = library.Library(ns)
    backend = lib.define_backend(f"{ns}_backend", primitives=make_primitives(),
                                 dtype_of=plugtorch.get_backend("numpy").dtype_of,
                                 is_native=lambda a: False)
    seen = []

    @lib.register_kernel("softmax", backend.name)
    def fused(x, *, dim):
        seen.append(dim)
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        return e / e.sum(axis=dim, keepdims=True)

    x = plugtorch.tensor([[1.0, 2.0, 3.0]], device=backend.name, requires_grad=True)
    y = plugtorch.softmax(x, 1)
    assert seen == [1] and y.device.type == backend.name
    y[0, 0].backward()  # the core's derivative applies to the plugin's kernel
    ref = plugtorch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    plugtorch.softmax(ref, 1)[0, 0].backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    report = plugtorch.plugins("softmax")
    assert report.ops["softmax"]["backends"][backend.name]["served_by"] == f"kernel from {ns}"


def test_a_library_for_another_contract_is_refused_with_advice(ns):
    library.Library(ns, contract=999)
    with pytest.raises(PluginError, match="written for plugin contract 999.*Upgrade the plugin"):
        library.custom_op(f"{ns}::f", _annotated_identity, mutates_args=())


def _annotated_identity(x: plugtorch.Tensor) -> plugtorch.Tensor:
    return x


def test_unknown_ops_in_plugtorch_ops_are_named(ns):
    _swish(ns)
    with pytest.raises(AttributeError, match=rf"no op '{ns}::nope' is registered; namespace '{ns}' has"):
        getattr(plugtorch.ops, ns).nope
