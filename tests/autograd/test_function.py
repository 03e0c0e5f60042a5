"""autograd.Function behaves as torch's: each scenario runs on plugtorch and, where it is
installed, on torch, and both must give the expected values or raise the expected error.

A scenario is ``f(lib)`` written once against the API the two libraries share.
"""
from __future__ import annotations

import gc
import importlib.util
import math
import weakref

import pytest

import plugtorch
from plugtorch.core.graph import Node

LIBS = [plugtorch] + ([importlib.import_module("torch")] if importlib.util.find_spec("torch") else [])
MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"
FREED = "Trying to backward through the graph a second time (or directly access saved tensors"


class Raises:
    def __init__(self, exc, text):
        self.exc, self.text = exc, text

    def __repr__(self):
        return f"Raises({self.exc.__name__}, {self.text!r})"


def _plain(v):
    """Tensors as nested lists (so the two libraries' results compare), recursively."""
    if hasattr(v, "tolist") and hasattr(v, "requires_grad"):
        return v.tolist()
    if isinstance(v, (tuple, list)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def check(scenario, expected):
    """Run ``scenario`` on every library; each must return ``expected`` (or raise it)."""
    for lib in LIBS:
        if isinstance(expected, Raises):
            with pytest.raises(expected.exc) as info:
                scenario(lib)
            assert expected.text in str(info.value), f"{lib.__name__}: {info.value}"
        else:
            assert _plain(scenario(lib)) == expected, lib.__name__


def _fn(lib):
    return lib.autograd.Function


def _leaf(lib, *values):
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def _square(lib):
    class Square(_fn(lib)):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x
    return Square


def _exp(lib):
    class Exp(_fn(lib)):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y
    return Exp


def _add_one_in_place(lib, dirty=True):
    class AddOne(_fn(lib)):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            if dirty:
                ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    return AddOne


# -- 1. saved tensors are version-checked ----------------------------------------------------

def test_saved_tensors_give_correct_gradients_when_left_alone():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        _square(lib).apply(a * 1).sum().backward()
        return a.grad
    check(scenario, [2.0, 4.0])


def test_modifying_a_saved_input_in_place_makes_backward_raise():
    def scenario(lib):
        y = _leaf(lib, 1.0, 2.0) * 1
        z = _square(lib).apply(y)
        y.add_(1)
        z.sum().backward()
    check(scenario, Raises(RuntimeError, MODIFIED))
    check(scenario, Raises(RuntimeError, "is at version 1; expected version 0 instead"))


def test_modifying_a_saved_output_in_place_makes_backward_raise():
    def scenario(lib):
        z = _exp(lib).apply(_leaf(lib, 0.5, 1.5))
        z.mul_(2)
        z.sum().backward()
    check(scenario, Raises(RuntimeError, MODIFIED))


def test_the_version_error_names_the_function_node():
    y = _leaf(plugtorch, 1.0) * 1
    z = _square(plugtorch).apply(y)
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"saved tensor 0 of SquareBackward, is at version 1"):
        z.sum().backward()


# -- 2. mark_dirty ---------------------------------------------------------------------------

def test_mark_dirty_returns_the_input_itself_bumped_and_rebased():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        x = a * 2
        before = x.grad_fn
        out = _add_one_in_place(lib).apply(x)
        rebased = type(x.grad_fn).__name__ == "AddOneBackward" and x.grad_fn.next_functions[0][0] is before
        (out * 3).sum().backward()
        return out is x, x._version, rebased, x.tolist(), a.grad
    check(scenario, (True, 2, True, [3.0, 5.0], [6.0, 6.0]))


def test_mark_dirty_on_a_leaf_that_requires_grad_raises():
    def scenario(lib):
        _add_one_in_place(lib).apply(_leaf(lib, 1.0))
    check(scenario, Raises(RuntimeError, "a leaf Variable that requires grad has been used in an in-place operation."))


def test_mark_dirty_under_no_grad_bumps_the_version_and_returns_a_new_tensor():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        with lib.no_grad():
            out = _add_one_in_place(lib).apply(a)
        return out is a, a._version, out.requires_grad, a.tolist()
    check(scenario, (False, 2, False, [2.0, 3.0]))


def test_a_dirty_input_must_be_returned():
    def scenario(lib):
        class Forgets(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g
        Forgets.apply(_leaf(lib, 1.0) * 1)
    check(scenario, Raises(RuntimeError, "Some elements marked as dirty during the forward method were not "
                                         "returned as output."))


def test_without_mark_dirty_a_returned_input_is_a_new_graph_output():
    def scenario(lib):
        class Identity(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2
        a = _leaf(lib, 1.0, 2.0)
        x = a * 1
        before = x.grad_fn
        out = Identity.apply(x)
        out.sum().backward()
        return out is x, x.grad_fn is before, type(out.grad_fn).__name__, a.grad
    check(scenario, (False, True, "IdentityBackward", [2.0, 2.0]))


def test_saving_a_dirty_input_checks_the_version_after_the_bump():
    def scenario(lib):
        class Double(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2 + x * 0
        a = _leaf(lib, 1.0, 2.0)
        Double.apply(a * 1).sum().backward()
        return a.grad
    check(scenario, [2.0, 2.0])


# -- 3 and 4. mark_non_differentiable, set_materialize_grads ---------------------------------

def _values_and_argmax(lib, materialize):
    seen = []

    class ValuesArgmax(_fn(lib)):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            return x * 2, idx, x * 3

        @staticmethod
        def backward(ctx, g, g_idx, g3):
            seen.append((g, g_idx, g3))
            return g * 2 if g is not None else g3 * 3
    return ValuesArgmax, seen


@pytest.mark.parametrize("materialize", [True, False])
def test_non_differentiable_outputs_do_not_require_grad_and_get_zero_or_none_grads(materialize):
    def scenario(lib):
        fn, seen = _values_and_argmax(lib, materialize)
        a = _leaf(lib, 1.0, 5.0)
        out, idx, _ = fn.apply(a)
        out.sum().backward()
        (g, g_idx, g3), = seen
        return out.requires_grad, idx.requires_grad, idx.grad_fn, g, g_idx, g3, a.grad
    if materialize:
        check(scenario, (True, False, None, [1.0, 1.0], 0, [0.0, 0.0], [2.0, 2.0]))
    else:
        check(scenario, (True, False, None, [1.0, 1.0], None, None, [2.0, 2.0]))


def test_materialized_zeros_have_the_outputs_dtype():
    def scenario(lib):
        fn, seen = _values_and_argmax(lib, True)
        out, _, _ = fn.apply(_leaf(lib, 1.0, 5.0))
        out.sum().backward()
        return [str(t.dtype).split(".")[-1] for t in seen[0]]
    check(scenario, ["float64", "int64", "float64"])


def test_marking_an_input_non_differentiable_returns_a_new_tensor_without_grad():
    def scenario(lib):
        class Stop(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_non_differentiable(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g
        x = _leaf(lib, 1.0) * 1
        out = Stop.apply(x)
        return out is x, out.requires_grad, out.grad_fn, x.requires_grad
    check(scenario, (False, False, None, True))


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads_decides_zeros_or_none_for_unused_outputs(materialize):
    def scenario(lib):
        seen = []

        class Pair(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append((g1, g2))
                return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)
        a = _leaf(lib, 1.0, 2.0)
        _, o2 = Pair.apply(a)
        o2.sum().backward()
        return seen, a.grad
    zeros = [0.0, 0.0] if materialize else None
    check(scenario, ([(zeros, [1.0, 1.0])], [3.0, 3.0]))


# -- 5. several outputs ----------------------------------------------------------------------

def _mixed(lib, seen):
    class Mixed(_fn(lib)):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            return x * k, k, x * x

        @staticmethod
        def backward(ctx, g1, g_k, g3):
            seen.append((g1, g_k, g3))
            (x,) = ctx.saved_tensors
            return g1 * ctx.needs_input_grad[0] * 5 + g3 * 2 * x, None
    return Mixed


@pytest.mark.parametrize("used", ["first", "last", "both", "both twice"])
def test_several_outputs_gradients_flow_from_any_subset(used):
    def scenario(lib):
        seen = []
        a = _leaf(lib, 1.0, 2.0)
        o1, k, o3 = _mixed(lib, seen).apply(a, 5)
        loss = {"first": o1.sum(), "last": o3.sum(), "both": (o1 * 2 + o3).sum(),
                "both twice": (o1 * o3 + o1 + o3 * 3).sum()}[used]
        loss.backward()
        return k, o1.requires_grad, o3.requires_grad, seen, a.grad
    expected = {
        "first": ([[1.0, 1.0], None, [0.0, 0.0]], [5.0, 5.0]),
        "last": ([[0.0, 0.0], None, [1.0, 1.0]], [2.0, 4.0]),
        "both": ([[2.0, 2.0], None, [1.0, 1.0]], [12.0, 14.0]),
        # d/do1 = o3 + 1 = x^2 + 1, d/do3 = o1 + 3 = 5x + 3
        "both twice": ([[2.0, 5.0], None, [8.0, 13.0]], [5 * 2.0 + 8.0 * 2, 5 * 5.0 + 13.0 * 4]),
    }[used]
    check(scenario, (5, True, True, [tuple(expected[0])], expected[1]))


def test_each_output_keeps_its_own_edge_for_hooks_retain_grad_and_autograd_grad():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        o1, _, o3 = _mixed(lib, []).apply(a, 5)
        loss = (o1 * 2 + o3 * 3).sum()
        (g_o3,) = lib.autograd.grad(loss, o3, retain_graph=True)
        hooked = []
        o3.register_hook(lambda g: hooked.append(g.tolist()) or g * 10)
        o1.retain_grad()
        loss.backward()
        return g_o3, hooked, o1.grad, a.grad
    # the hook's *10 reaches a.grad through o3 only: 2 * 5 + 30 * 2x
    check(scenario, ([3.0, 3.0], [[3.0, 3.0]], [2.0, 2.0], [10.0 + 60.0, 10.0 + 120.0]))


def test_the_same_tensor_returned_twice_is_one_object_fed_by_the_last_position():
    def scenario(lib):
        seen = []

        class Twice(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                return y, y

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append((g1, g2))
                return g1 + g2
        a = _leaf(lib, 1.0, 2.0)
        o1, o2 = Twice.apply(a)
        (o1 + 2 * o2).sum().backward()
        return o1 is o2, seen, a.grad
    check(scenario, (True, [([0.0, 0.0], [3.0, 3.0])], [3.0, 3.0]))


def test_outputs_of_one_function_feeding_another_with_several_outputs():
    def scenario(lib):
        class SplitScale(_fn(lib)):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                return x * y, x + y, x - y

            @staticmethod
            def backward(ctx, g_mul, g_add, g_sub):
                x, y = ctx.saved_tensors
                return g_mul * y + g_add + g_sub, g_mul * x + g_add - g_sub
        a, b = _leaf(lib, 1.0, 2.0), _leaf(lib, 3.0, -1.0)
        p, q, r = SplitScale.apply(a, b)
        p2, q2, _ = SplitScale.apply(q, r)  # (x+y)(x-y), 2x, 2y
        (p2 * 3 + q2 + p).sum().backward()
        return a.grad, b.grad
    # d/da = 3*2a + 2 + b, d/db = -3*2b + a
    check(scenario, ([6.0 + 2.0 + 3.0, 12.0 + 2.0 - 1.0], [-18.0 + 1.0, 6.0 + 2.0]))


def test_a_long_chain_of_functions_backprops_without_recursion():
    square = _square(plugtorch)
    a = _leaf(plugtorch, 1.0)
    y = a
    for _ in range(5000):
        y = square.apply(y * 0 + 1) * y
    y.sum().backward()
    assert a.grad.tolist() == [1.0]


def test_multi_output_grad_fn_reads_as_the_function_node():
    a = _leaf(plugtorch, 1.0, 2.0)
    o1, _, o3 = _mixed(plugtorch, []).apply(a, 5)
    assert repr(o1.grad_fn) == repr(o3.grad_fn) == "<MixedBackward>"
    assert o1.grad_fn.fn is o3.grad_fn.fn
    assert o1.grad_fn.saved_tensors[0] is a and o3.grad_fn.next_functions == o1.grad_fn.fn.next_functions
    consumer = (o3 * 1).grad_fn
    assert consumer.next_functions[0] == (o3.grad_fn.fn, 2)  # torch's (node, output_nr)


def test_non_tensor_and_list_outputs_pass_through():
    def scenario(lib):
        class Listy(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                return [x * 2, 3]

            @staticmethod
            def backward(ctx, g):
                return g
        out = Listy.apply(_leaf(lib, 1.0))
        return type(out).__name__, out[1]
    check(scenario, ("list", 3))


# -- 6. once_differentiable ------------------------------------------------------------------

def _once(lib, modes):
    class Once(_fn(lib)):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, g):
            modes.append(lib.is_grad_enabled())
            (x,) = ctx.saved_tensors
            return 2 * g * x
    return Once


def test_once_differentiable_runs_backward_under_no_grad():
    def scenario(lib):
        modes = []
        a = _leaf(lib, 1.0, 2.0)
        y = _once(lib, modes).apply(a)
        (g,) = lib.autograd.grad((y * y).sum(), a, create_graph=True)
        (plain,) = lib.autograd.grad(_once(lib, modes).apply(a).sum(), a)
        return modes, g, g.requires_grad, plain.requires_grad
    check(scenario, ([False, False], [4.0, 32.0], True, False))


def test_differentiating_a_once_differentiable_backward_again_raises():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        y = _once(lib, []).apply(a)
        (g,) = lib.autograd.grad((y * y).sum(), a, create_graph=True)
        g.sum().backward()
    check(scenario, Raises(RuntimeError, "trying to differentiate twice a function that was marked with "
                                         "@once_differentiable"))


def test_autograd_grad_through_a_once_differentiable_result_finds_no_path():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        y = _once(lib, []).apply(a)
        (g,) = lib.autograd.grad((y * y).sum(), a, create_graph=True)
        lib.autograd.grad(g.sum(), a)
    check(scenario, Raises(RuntimeError, "appears to not have been used in the graph"))


# -- 7. needs_input_grad, freed graph, hooks, kwargs, checks on returned gradients -----------

def _probe(lib, seen, n_grads=None):
    class Probe(_fn(lib)):
        @staticmethod
        def forward(ctx, x, k, y=None, z=None):
            seen.append(ctx.needs_input_grad)
            return x * k + (0 if y is None else y)

        @staticmethod
        def backward(ctx, g):
            grads = tuple(g if need else None for need in ctx.needs_input_grad)
            return grads if n_grads is None else grads[:n_grads]
    return Probe


@pytest.mark.parametrize("call", ["positional", "with a tensor keyword", "all keywords", "no_grad"])
def test_needs_input_grad_has_one_flag_per_forward_argument(call):
    def scenario(lib):
        seen = []
        probe = _probe(lib, seen)
        a, b = _leaf(lib, 1.0), lib.ones(1, dtype=lib.float64)
        if call == "positional":
            out = probe.apply(a, 2, b, a)
        elif call == "with a tensor keyword":
            out = probe.apply(b, 2, y=a)
        elif call == "all keywords":
            out = probe.apply(x=a, k=2)
        else:
            with lib.no_grad():
                out = probe.apply(a, 2)
        if out.requires_grad:
            out.sum().backward()
        return seen, out.requires_grad, a.grad
    check(scenario, {
        "positional": ([(True, False, False, True)], True, [2.0]),
        "with a tensor keyword": ([(False, False, True)], True, [1.0]),
        "all keywords": ([(True, False)], True, [1.0]),
        "no_grad": ([(True, False)], False, None),
    }[call])


def test_keyword_tensor_arguments_count_among_the_gradients_backward_returns():
    def scenario(lib):
        _probe(lib, [], n_grads=2).apply(_leaf(lib, 1.0), 2, y=_leaf(lib, 1.0)).sum().backward()
    check(scenario, Raises(RuntimeError, "function ProbeBackward returned an incorrect number of gradients "
                                         "(expected 3, got 2)"))


def test_saved_tensors_after_backward_without_retain_graph_raise():
    def scenario(lib):
        out = _square(lib).apply(_leaf(lib, 1.0, 2.0))
        out.sum().backward(retain_graph=True)
        kept = out.grad_fn.saved_tensors
        out.sum().backward()
        return kept, out.grad_fn.saved_tensors
    check(scenario, Raises(RuntimeError, FREED))


def test_a_function_that_saved_nothing_may_run_backward_twice():
    def scenario(lib):
        class Twice(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        a = _leaf(lib, 1.0)
        y = Twice.apply(a).sum()
        y.backward()
        y.backward()
        return a.grad
    check(scenario, [4.0])


def test_a_hook_on_a_function_output_sees_and_replaces_its_gradient():
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        out = _square(lib).apply(a)
        seen = []
        out.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
        (out * 3).sum().backward()
        return seen, a.grad
    check(scenario, ([[3.0, 3.0]], [60.0, 120.0]))


def _returning(lib, grads):
    class Returns(_fn(lib)):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return grads(lib, g)
    return Returns


@pytest.mark.parametrize("grads, expected", [
    (lambda lib, g: g, Raises(RuntimeError, "function ReturnsBackward returned an incorrect number of "
                                            "gradients (expected 2, got 1)")),
    (lambda lib, g: [g, None], Raises(RuntimeError, "returned an incorrect number of gradients (expected 2, got 1)")),
    (lambda lib, g: (g, None, g), Raises(RuntimeError, "returned an incorrect number of gradients "
                                                       "(expected 2, got 3)")),
    (lambda lib, g: (g * 2, None, None), [2.0, 2.0]),
    (lambda lib, g: (g, g), Raises(RuntimeError, "function ReturnsBackward returned a gradient different than "
                                                 "None at position 2, but the corresponding forward input was "
                                                 "not a Variable")),
    (lambda lib, g: (3.0, None), Raises(RuntimeError, "expected Variable or None (got float)")),
    (lambda lib, g: (lib.ones(3, dtype=lib.float64), None),
     Raises(RuntimeError, "Function ReturnsBackward returned an invalid gradient at index 0 - got [3] but "
                          "expected shape compatible with [2]")),
    (lambda lib, g: (lib.ones(1, dtype=lib.float64), None),
     Raises(RuntimeError, "returned an invalid gradient at index 0 - got [1] but expected shape compatible")),
    (lambda lib, g: (lib.ones(3, 2, dtype=lib.float64), None), [3.0, 3.0]),  # summed down, as torch
    (lambda lib, g: (g.float(), None), [1.0, 1.0]),  # cast back to the input's dtype
], ids=["too few", "a list is one gradient", "too many", "extra Nones", "for a number", "not a tensor",
        "wrong shape", "broadcastable but smaller", "expandable", "other dtype"])
def test_gradients_backward_returns_are_checked_as_torch_checks_them(grads, expected):
    def scenario(lib):
        a = _leaf(lib, 1.0, 2.0)
        _returning(lib, grads).apply(a, 2.0).sum().backward()
        return a.grad
    check(scenario, expected)
    if not isinstance(expected, Raises):
        for lib in LIBS:
            a = _leaf(lib, 1.0, 2.0)
            _returning(lib, grads).apply(a, 2.0).sum().backward()
            assert str(a.grad.dtype).endswith("float64")


def test_setup_context_style_binds_defaults():
    def scenario(lib):
        class Scale(_fn(lib)):
            @staticmethod
            def forward(x, k=2.0):
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None
        a = _leaf(lib, 1.0, 2.0)
        Scale.apply(a).sum().backward()
        Scale.apply(x=a, k=3.0).sum().backward()
        return a.grad
    check(scenario, [5.0, 5.0])


def test_backward_may_be_written_as_vjp():
    def scenario(lib):
        class Twice(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2
        a = _leaf(lib, 1.0)
        Twice.apply(a).sum().backward()
        return a.grad
    check(scenario, [2.0])


def test_a_function_without_backward_says_so():
    def scenario(lib):
        class NoBackward(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                return x * 2
        NoBackward.apply(_leaf(lib, 1.0)).sum().backward()
    check(scenario, Raises(NotImplementedError, "You must implement either the backward or vjp method"))


def test_save_for_backward_accepts_tensors_and_none_only():
    def scenario(lib):
        class SavesNumber(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g
        SavesNumber.apply(_leaf(lib, 1.0))
    check(scenario, Raises(TypeError, "save_for_backward can only save variables, but argument 1 is of type int"))


# -- 8. double backward ----------------------------------------------------------------------

def test_double_backward_through_a_backward_written_with_ops():
    def scenario(lib):
        class Cube(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * x * x * g
        a = _leaf(lib, 1.0, 2.0)
        (g1,) = lib.autograd.grad(Cube.apply(a).sum(), a, create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), a)
        return g1, g2
    check(scenario, ([3.0, 12.0], [6.0, 12.0]))


def test_double_backward_through_one_output_of_several():
    def scenario(lib):
        class Powers(_fn(lib)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x, x * x * x

            @staticmethod
            def backward(ctx, g2, g3):
                (x,) = ctx.saved_tensors
                return g2 * 2 * x + g3 * 3 * x * x
        a = _leaf(lib, 1.0, 2.0)
        _, cube = Powers.apply(a)
        (g,) = lib.autograd.grad(cube.sum(), a, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), a)
        return g, gg
    check(scenario, ([3.0, 12.0], [6.0, 12.0]))


def test_gradgradcheck_on_a_function():
    from plugtorch.autograd import gradcheck, gradgradcheck
    square = _square(plugtorch)
    x = plugtorch.tensor([0.3, -1.2, 2.0], dtype=plugtorch.float64, requires_grad=True)
    assert gradcheck(square.apply, (x,)) and gradgradcheck(square.apply, (x,))


# -- one rule context ------------------------------------------------------------------------

def test_the_ctx_is_the_graph_node_built_in_rules_receive():
    captured = {}

    class Scaled(plugtorch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            captured["ctx"] = ctx
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * scale

        @staticmethod
        def backward(ctx, g):
            return g * ctx.attrs["scale"], None

    a = _leaf(plugtorch, 1.0, 2.0)
    out = Scaled.apply(a, 3.0)
    ctx = captured["ctx"]
    assert out.grad_fn is ctx and isinstance(ctx, Node) and isinstance(ctx, plugtorch.autograd.FunctionCtx)
    assert ctx.attrs == {"scale": 3.0} and ctx.saved == ctx.saved_tensors == (a,)
    assert ctx.needs_input_grad == (True, False) and not hasattr(ctx, "output")  # as torch's ctx
    assert ctx.meta == (((2,), plugtorch.float64), None)
    out.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


def _exp_and_square_saving_their_outputs(m):
    class ExpSquare(m.autograd.Function):  # two outputs, both saved
        @staticmethod
        def forward(ctx, x):
            e, s = x.exp(), x * x
            ctx.save_for_backward(e, s, x)
            return e, s

        @staticmethod
        def backward(ctx, ge, gs):
            e, s, x = ctx.saved_tensors
            return ge * e + gs * s / x * 2  # d(x*x)/dx = 2x = 2 s/x
    return ExpSquare


@pytest.mark.parametrize("make", [_exp, _exp_and_square_saving_their_outputs])
def test_a_function_that_saves_its_output_frees_it_with_its_last_reference(make):
    """The node keeps an alias of a saved output, not the output (which would hold the node that
    holds it, a cycle only the garbage collector frees): dropped without a backward, it is freed."""
    fn = make(plugtorch)
    x = plugtorch.rand(4, dtype=plugtorch.float64, requires_grad=True) + 0.5
    gc.disable()
    try:
        out = fn.apply(x)
        refs = [weakref.ref(o) for o in (out if isinstance(out, tuple) else (out,))]
        del out
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


@pytest.mark.parametrize("make", [_exp, _exp_and_square_saving_their_outputs])
def test_double_backward_through_a_saved_output(make):
    """Under create_graph, a saved output read in backward is the output again (its grad_fn the
    Function's node): the second derivative flows through it, as in torch."""
    def scenario(m):
        x = m.tensor([0.5, 1.0, 1.5, 2.0], dtype=m.float64, requires_grad=True)
        out = make(m).apply(x)
        total = sum(o.sum() for o in out) if isinstance(out, tuple) else out.sum()
        g, = m.autograd.grad(total, x, create_graph=True)
        gg, = m.autograd.grad((g * g).sum(), x)
        return g.tolist() + gg.tolist()
    results = [scenario(m) for m in LIBS]
    x = [0.5, 1.0, 1.5, 2.0]
    if make is _exp:  # g = e^x, d(g^2)/dx = 2 e^(2x)
        expected = [math.exp(v) for v in x] + [2 * math.exp(2 * v) for v in x]
    else:  # g = e^x + 2x, d(g^2)/dx = 2 g (e^x + 2)
        expected = [math.exp(v) + 2 * v for v in x] + [2 * (math.exp(v) + 2 * v) * (math.exp(v) + 2) for v in x]
    for r in results:  # plugtorch's and torch's
        assert r == pytest.approx(expected, rel=1e-12)


def test_a_function_may_keep_anything_as_ctx_output():
    """``ctx.output`` is an attribute like any other on a Function's ctx (torch's has no output of
    its own): a number kept there reaches backward, and the engine does not take it for a saved
    output whose version it checks."""
    def scenario(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.output = 3.0
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * ctx.output
        x = m.ones(2, requires_grad=True)
        Scale.apply(x).sum().backward()
        return x.grad.tolist()
    check(scenario, [3.0, 3.0])
