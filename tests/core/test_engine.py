"""The backward pass: order, accumulation, broadcasting, graph freeing, hooks, grad modes."""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import plugtorch
from plugtorch.autograd import grad

pytestmark = pytest.mark.usefixtures("engine_loop")  # each test with _native.c's loop and engine.py's

def test_a_chain_of_100k_ops_backprops_without_recursion():
    x = plugtorch.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]
    del y  # freeing the long chain must not recurse either


def test_reused_tensors_accumulate_gradients():
    x = plugtorch.tensor([3.0], requires_grad=True)
    y = x * x + x * 2 + x
    y.backward()
    assert x.grad.tolist() == [2 * 3.0 + 2 + 1]
    y2 = x * 5
    y2.backward()
    assert x.grad.tolist() == [9.0 + 5.0]  # .grad accumulates across backward calls


def test_diamond_graph_runs_each_node_once():
    x = plugtorch.tensor([2.0], requires_grad=True)
    a = x.exp()
    b = a * 3
    c = a * 4
    (b + c).backward()
    assert x.grad.item() == pytest.approx(7 * 2.718281828459045 ** 2, rel=1e-6)


def test_broadcast_gradients_are_summed_back_to_input_shapes():
    a = plugtorch.ones(4, 1, 3, requires_grad=True)
    b = plugtorch.ones(5, 1, requires_grad=True)
    c = plugtorch.tensor(2.0, requires_grad=True)
    (a * b * c).sum().backward()
    assert a.grad.shape == (4, 1, 3) and a.grad.tolist()[0][0] == [10.0] * 3
    assert b.grad.shape == (5, 1) and b.grad.tolist() == [[24.0]] * 5
    assert c.grad.shape == () and c.grad.item() == 60.0


def test_second_backward_raises_unless_graph_retained():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == pytest.approx([2 * 2 * 2.718281828, 2 * 3 * 7.389056099], rel=1e-6)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_non_scalar_backward_needs_a_gradient():
    x = plugtorch.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(plugtorch.ones(2))
    y.backward(plugtorch.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_backward_on_a_tensor_without_grad_says_so():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        plugtorch.ones(1).sum().backward()


def test_leaf_and_grad_fn_bookkeeping():
    x = plugtorch.ones(2, requires_grad=True)
    y = x * 2
    assert x.is_leaf and x.grad_fn is None
    assert not y.is_leaf and y.grad_fn is not None and y.requires_grad
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)


def test_retain_grad_keeps_non_leaf_gradients():
    x = plugtorch.ones(2, requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 6.0] and x.grad.tolist() == [18.0, 18.0]


def test_hooks_see_and_may_replace_gradients():
    x = plugtorch.ones(2, requires_grad=True)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0]] and x.grad.tolist() == [20.0, 20.0]
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_post_accumulate_hook_runs_after_grad_is_written():
    x = plugtorch.ones(2, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]]


def test_no_grad_enable_grad_and_set_grad_enabled():
    x = plugtorch.ones(1, requires_grad=True)
    with plugtorch.no_grad():
        assert not plugtorch.is_grad_enabled()
        assert not (x * 2).requires_grad
        with plugtorch.enable_grad():
            assert (x * 2).requires_grad
    with plugtorch.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert plugtorch.is_grad_enabled()

    @plugtorch.no_grad()
    def f():
        return x * 2
    assert not f().requires_grad


def test_grad_mode_is_thread_local():
    seen = []
    with plugtorch.no_grad():
        th = threading.Thread(target=lambda: seen.append(plugtorch.is_grad_enabled()))
        th.start()
        th.join()
    assert seen == [True]


def test_autograd_grad_returns_without_accumulating():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    y = (x ** 3).sum()
    (g,) = grad(y, x, create_graph=True)
    assert g.tolist() == [3.0, 12.0] and x.grad is None
    (h,) = grad(g.sum(), x)
    assert h.tolist() == [6.0, 12.0]


def test_autograd_grad_unused_inputs():
    x = plugtorch.ones(1, requires_grad=True)
    z = plugtorch.ones(1, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        grad(y, [x, z], retain_graph=True)
    gx, gz = grad(y, [x, z], allow_unused=True)
    assert gx.tolist() == [2.0] and gz is None


def test_gradient_of_an_intermediate_with_autograd_grad():
    x = plugtorch.ones(2, requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = grad(y, h)
    assert gh.tolist() == [6.0, 6.0]


def test_grad_of_int_outputs_and_comparisons_stop_gradients():
    x = plugtorch.tensor([1.0, -1.0], requires_grad=True)
    assert not (x > 0).requires_grad
    assert not x.argmax().requires_grad


def test_leaf_grad_is_owned_memory_not_an_alias():
    a = plugtorch.ones(2, requires_grad=True)
    b = plugtorch.ones(2, requires_grad=True)
    (a + b).sum().backward()
    with plugtorch.no_grad():
        a.grad.mul_(5)
    assert b.grad.tolist() == [1.0, 1.0]


def test_gradcheck_accepts_correct_and_rejects_wrong_gradients():
    from plugtorch.autograd import Function, GradcheckError, gradcheck

    class WrongSquare(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 * g * x

    x = plugtorch.randn(3, dtype=plugtorch.float64, requires_grad=True)
    assert gradcheck(lambda t: t * t, (x,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongSquare.apply, (x,))


def test_nodes_that_saved_nothing_may_run_again_as_in_torch():
    x = plugtorch.ones(2, requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()  # add and sum keep no saved tensors, so nothing was freed
    assert x.grad.tolist() == [2.0, 2.0]


def test_autograd_grad_stops_at_its_inputs_and_leaves_their_graph_intact():
    x = plugtorch.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    (gh,) = grad((h * 3).sum(), h)
    assert gh.tolist() == [3.0, 3.0]
    (h * h).sum().backward()  # exp's node did not run above, so its saved output is still there
    assert x.grad.tolist() == pytest.approx([2 * 2.718281828 ** 2, 2 * 7.389056099 ** 2], rel=1e-6)


@pytest.mark.parametrize("save", [(), ("inputs",), ("output",), ("inputs", "output"), (0,), (1,), (1, "output")])
def test_unrolled_records_build_the_node_record_builds(save):
    """record_one / record_pair (the unrolled records of unary and binary ops) make the same node
    as the general ``record``, for every kind of save spec."""
    from plugtorch.core.dispatch import record, record_one, record_pair
    from plugtorch.core.opdef import OpDef
    d = OpDef("probe", derivative=lambda ctx, g: (g, g), save=save)
    a = plugtorch.randn(2, 3, requires_grad=True)
    b = (plugtorch.randn(1, 3, dtype=plugtorch.float64, requires_grad=True) * 2)
    b.add_(1)  # a version other than 0, so the versions tell the operands apart

    def fields(node):
        return (node.op, node.rule, node.next, node.meta, node.saved, node.versions, node._output,
                node.attrs)

    pairs = [(record_pair(a.detach(), d, a, b), record(a.detach(), d, (a, b)))]
    if not any(isinstance(s, int) and s > 0 for s in save):  # a unary op has no operand 1
        pairs.append((record_one(b.detach(), d, b, {"k": 1}), record(b.detach(), d, (b,), {"k": 1})))
    for fast, general in pairs:
        f, g = fields(fast.grad_fn), fields(general.grad_fn)
        assert f[:6] == g[:6] and f[7] == g[7]
        assert (f[6] is None) == (g[6] is None) == ("output" not in save)
        for kept, out in ((f[6], fast), (g[6], general)):
            if kept is not None:  # an alias of the output (Node.output), not the output itself
                assert kept is not out and kept._data is out._data and kept._vc is out._vc
                assert kept.grad_fn is None
        assert fast.requires_grad and general.requires_grad


def test_gradients_accumulate_into_an_existing_grad():
    x = plugtorch.ones(3, requires_grad=True)
    x.grad = plugtorch.full((3,), 0.5)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.5, 5.5, 5.5]


def _saves_output(x):
    return plugtorch.nn.functional.softmax(x, -1)


def test_an_output_the_rule_reads_is_freed_with_its_last_reference():
    """A node keeps an alias of the output its rule reads, not the output, which would hold the
    node that holds it: a cycle only the garbage collector frees. So a result dropped without a
    backward (an evaluation loop without no_grad) is freed at once, and a backward still works."""
    x = plugtorch.randn(4, 5, requires_grad=True)
    gc.disable()
    try:
        y = _saves_output(x)
        ref = weakref.ref(y)
        del y
        assert ref() is None
        y = _saves_output(x)
        node = y.grad_fn
        assert node.saved is None and node._output is not y
        (y * plugtorch.arange(5.0)).sum().backward()
        expected = plugtorch.autograd.grad((_saves_output(x) * plugtorch.arange(5.0)).sum(), x)[0]
        assert plugtorch.equal(x.grad, expected)
    finally:
        gc.enable()


def test_a_rule_under_create_graph_reads_the_output_as_its_nodes_result():
    """``ctx.output`` under grad mode (a rule run by create_graph) is the output again with the node
    as its grad_fn, so the second derivative reaches the input; outside it, the alias alone."""
    torch = pytest.importorskip("torch")
    x = plugtorch.randn(3, 4, dtype=plugtorch.float64, requires_grad=True)
    y = plugtorch.tanh(x)
    with plugtorch.no_grad():
        assert y.grad_fn.output.grad_fn is None
    again = y.grad_fn.output
    assert again.grad_fn is y.grad_fn and again.requires_grad and again._vc is y._vc
    g, = plugtorch.autograd.grad(y.sum(), x, create_graph=True)
    gg, = plugtorch.autograd.grad(g.sum(), x)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    gt, = torch.autograd.grad(torch.tanh(xt).sum(), xt, create_graph=True)
    ggt, = torch.autograd.grad(gt.sum(), xt)
    assert np.allclose(gg.numpy(), ggt.numpy(), rtol=1e-12, atol=1e-12)


def test_under_forward_ad_a_node_keeps_the_output_itself():
    """Forward AD keeps a tangent per tensor object; the output a rule reads under jvp of a vjp
    must be the one that carries it (a Hessian by jacfwd(jacrev) needs it)."""
    import plugtorch.autograd.forward_ad as fwAD
    x = plugtorch.randn(3, dtype=plugtorch.float64, requires_grad=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, plugtorch.ones(3, dtype=plugtorch.float64))
        y = plugtorch.tanh(dual)
        assert y.grad_fn._output is y
    y = plugtorch.tanh(x)
    assert y.grad_fn._output is not y
