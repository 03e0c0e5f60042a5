"""Complex tensors never give a silently wrong result: every public function called on a complex
tensor (alone, and with a complex, real or number second operand) either matches torch or raises,
and raises where torch does; gradients through complex inputs match torch's or are refused."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch as pt

torch = pytest.importorskip("torch")

Z = np.array([[1 + 2j, 0.5 - 1j, -0.3 + 0.2j], [2 - 0.1j, -1.5 - 2j, 0.25 + 0.75j]], dtype=np.complex64)
R = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
# joins given one tensor (torch wants a sequence), uninitialised memory and random draws (each
# library's generator; tests/core/test_complex.py checks the complex draws): not comparable here
NOT_COMPARABLE = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack",
                  "row_stack", "empty_like", "rand_like", "randn_like"}
# switches of global state (set_printoptions(z) would leave printing broken for later tests)
SWITCHES = {"manual_seed", "seed", "use_deterministic_algorithms", "save", "load",
            "compile"}  # torch.compile(z) imports dynamo, which turns distributions' validation off
# torch refuses these second operands for reasons of its own (a number where it wants a tensor, a
# tuple of dims, one dtype for both operands of a product): plugtorch's broader signatures
SIGNATURE_ONLY = {("isclose", "z,2"), ("isclose", "z,1"), ("logical_and", "z,2"), ("logical_and", "z,1"),
                  ("logical_or", "z,2"), ("logical_or", "z,1"), ("nan_to_num", "z,z"), ("nan_to_num", "z,r"),
                  ("nan_to_num", "v,v"), ("flip", "z,1"), ("tile", "z,1"), ("rot90", "z,2"), ("diff", "z,2"),
                  ("tril", "z,2"), ("triu", "z,2"), ("tril", "z,r"), ("triu", "z,r"), ("repeat_interleave", "z,2"),
                  ("cross", "r,z"), ("cross", "z,r"), ("inner", "r,z"), ("inner", "z,r"),
                  ("tensordot", "r,z"), ("tensordot", "z,r")}
CALLS = {"z": (Z,), "z,z": (Z, Z), "r,z": (R, Z), "z,r": (Z, R), "z,2": (Z, 2.0), "z,1": (Z, 1),
         "v,v": (Z[0], Z[1])}  # vectors: dot, vdot, outer, ...


def _functions():
    for prefix, ours, theirs in (("", pt, torch), ("F.", pt.nn.functional, torch.nn.functional)):
        for name in sorted(dir(ours)):
            if (not name.startswith(("_", "set_")) and name not in NOT_COMPARABLE | SWITCHES
                    and callable(getattr(ours, name))
                    and callable(getattr(theirs, name, None))):
                yield prefix + name, getattr(ours, name), getattr(theirs, name)


FUNCTIONS = list(_functions())


def _run(fn, lib, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*(lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
        except Exception as e:
            return e


def _silent(ours, theirs):
    """Why plugtorch's result is silently wrong next to torch's, or None."""
    if isinstance(theirs, torch.Tensor) and isinstance(ours, pt.Tensor):
        a, b = np.asarray(ours.tolist()), theirs.detach().resolve_conj().numpy()
        if a.shape != b.shape or str(ours.dtype).split(".")[-1] != str(theirs.dtype).split(".")[-1]:
            return f"plugtorch gives {ours.dtype} {list(a.shape)}, torch {theirs.dtype} {list(b.shape)}"
        if not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return "values differ"
    elif isinstance(theirs, Exception) and isinstance(ours, pt.Tensor):
        return f"torch raises ({theirs}), plugtorch computes {ours.dtype}"
    return None


@pytest.mark.parametrize("call", list(CALLS))
def test_every_public_function_matches_torch_or_raises(call):
    wrong = []
    for name, ours, theirs in FUNCTIONS:
        if (name.removeprefix("F."), call) in SIGNATURE_ONLY:
            continue
        why = _silent(_run(ours, pt, CALLS[call]), _run(theirs, torch, CALLS[call]))
        if why:
            wrong.append(f"{name}({call}): {why}")
    assert not wrong, "\n".join(wrong)


REFUSALS = [
    ("amax", lambda m, z: m.amax(z)), ("max", lambda m, z: m.max(z)), ("argmax", lambda m, z: m.argmax(z)),
    ("sort", lambda m, z: m.sort(z)), ("argsort", lambda m, z: m.argsort(z)), ("topk", lambda m, z: m.topk(z, 2)),
    ("median", lambda m, z: m.median(z)), ("cummax", lambda m, z: m.cummax(z, 1)), ("unique", lambda m, z: m.unique(z)),
    ("relu", lambda m, z: m.relu(z)), ("relu", lambda m, z: m.nn.functional.relu(z)), ("relu", lambda m, z: z.relu_()),
    ("sign", lambda m, z: m.sign(z)), ("round", lambda m, z: z.round()), ("trunc", lambda m, z: m.fix(z)),
    ("erf", lambda m, z: m.erf(z)), ("softmax", lambda m, z: m.softmax(z, 1)),
    ("log_softmax", lambda m, z: m.nn.functional.log_softmax(z, 1)), ("isneginf", lambda m, z: m.isneginf(z)),
    ("signbit", lambda m, z: m.signbit(z)), ("clamp", lambda m, z: m.clamp(z, 0, 1)),
    ("maximum", lambda m, z: m.maximum(z, z.real)), ("lt", lambda m, z: z < z), ("ge", lambda m, z: z.real >= z),
    ("gt", lambda m, z: z > 1), ("floor", lambda m, z: m.floor(z)), ("ceil", lambda m, z: z.ceil()),
    ("deg2rad", lambda m, z: m.deg2rad(z)), ("remainder", lambda m, z: z % 2), ("atan2", lambda m, z: m.atan2(z, z)),
]


@pytest.mark.parametrize(("name", "call"), REFUSALS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REFUSALS)])
def test_refusals_carry_torch_message_and_name_the_function(name, call):
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor(Z))
    with pytest.raises(type(theirs.value)) as ours:
        call(pt, pt.tensor(Z))
    message = str(ours.value)
    assert str(theirs.value).strip() in message and f"{name}()" in message and "complex64" in message


def test_real_inputs_still_compute():
    x = pt.tensor(R)
    assert pt.relu(x).tolist() == torch.relu(torch.tensor(R)).tolist()
    assert (x < 0.3).tolist() == (torch.tensor(R) < 0.3).tolist()
    assert pt.amax(x).item() == 2.0 and pt.sort(x)[0].shape == (2, 3)


# -- gradients ---------------------------------------------------------------------------------

W = (np.arange(8).reshape(4, 2) * 0.3 - 1 + 1j * np.cos(np.arange(8)).reshape(4, 2)).astype(np.complex128)
ZG = (np.sin(np.arange(12.0)).reshape(3, 4) * 0.8 + 0.6j * np.cos(np.arange(12.0) * 1.3).reshape(3, 4))

# holomorphic functions, those whose rules carry the conjugate, linear maps and compositions
GRADIENTS = {
    "sin": lambda m, z: m.sin(z), "cos": lambda m, z: m.cos(z), "tan": lambda m, z: m.tan(z),
    "tanh": lambda m, z: m.tanh(z), "asin": lambda m, z: m.asin(z), "acos": lambda m, z: m.acos(z),
    "atan": lambda m, z: m.atan(z), "asinh": lambda m, z: m.asinh(z), "acosh": lambda m, z: m.acosh(z),
    "atanh": lambda m, z: m.atanh(z), "sqrt": lambda m, z: m.sqrt(z), "rsqrt": lambda m, z: m.rsqrt(z),
    "reciprocal": lambda m, z: m.reciprocal(z), "square": lambda m, z: m.square(z),
    "expm1": lambda m, z: m.expm1(z), "log1p": lambda m, z: m.log1p(z), "pow": lambda m, z: m.pow(z, 2.5),
    "pow_int": lambda m, z: z ** 3, "pow_tensors": lambda m, z: m.pow(z, z), "rpow": lambda m, z: 2 ** z,
    "sigmoid": lambda m, z: m.sigmoid(z), "matmul": lambda m, z: z @ m.tensor(W),
    "mm": lambda m, z: m.mm(z, m.tensor(W)), "bmm": lambda m, z: m.bmm(z[None], m.tensor(W)[None]),
    "linear": lambda m, z: m.nn.functional.linear(z, m.tensor(W.T.copy()), m.tensor(W[0].copy())),
    "prod": lambda m, z: m.prod(z, 1), "prod_all": lambda m, z: m.prod(z), "cumprod": lambda m, z: m.cumprod(z, 1),
    "cumsum": lambda m, z: m.cumsum(z, 0), "abs": lambda m, z: z.abs(), "neg": lambda m, z: -z,
    "log10": lambda m, z: m.log10(z), "sinh": lambda m, z: m.sinh(z), "flip": lambda m, z: m.flip(z, (1,)),
    "transpose_index": lambda m, z: z.t()[1:, ::2], "exp_mean": lambda m, z: m.exp(z).mean(0),
    "sgn": lambda m, z: m.sgn(z), "vdot": lambda m, z: m.vdot(z[0], z[1]), "dot": lambda m, z: m.dot(z[0], z[1]),
    "outer": lambda m, z: m.outer(z[0], z[1]), "einsum": lambda m, z: m.einsum("ij,jk->ik", z, m.tensor(W)),
    "addmm": lambda m, z: m.addmm(z[:, :2], z, m.tensor(W)), "kron": lambda m, z: m.kron(z, z[:2, :2]),
    "where": lambda m, z: m.where(m.tensor(ZG.real > 0), z, z * 1j), "pad_cat": lambda m, z: m.cat(
        [m.nn.functional.pad(z, (1, 1)), z.repeat(1, 2)[:, :6]]), "exp2": lambda m, z: m.exp2(z),
}


def _grad(lib, fn):
    z = lib.tensor(ZG, requires_grad=True)
    y = fn(lib, z)
    # a real loss: |y|^2 summed (|y| for a real output)
    (y * y.conj()).real.sum().backward() if y.is_complex() else y.sum().backward()
    return z.grad


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_complex_gradients_match_torch(name):
    ours, theirs = _grad(pt, GRADIENTS[name]), _grad(torch, GRADIENTS[name])
    assert ours.dtype == pt.complex128
    np.testing.assert_allclose(np.asarray(ours.tolist()), theirs.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("call", [lambda z: pt.nn.functional.gelu(z.real).sum(),
                                  lambda z: pt.special.erfcx(z.real).sum()])
def test_real_parts_still_differentiate(call):
    z = pt.tensor(ZG, requires_grad=True)
    call(z).backward()
    assert z.grad.dtype == pt.complex128 and np.abs(np.asarray(z.grad.tolist()).imag).max() == 0


def test_other_derivatives_refuse_complex_inputs():
    # an op whose rule is written for reals (every op's but those known right, or holomorphic):
    # a complex input's gradient would be silently wrong, so backward refuses it, naming the op
    from plugtorch.core.dispatch import call_op
    from plugtorch.core.opdef import OpDef
    d = OpDef("complex_safety_probe", decompose=lambda x: x * 2, derivative=lambda ctx, g: g * 2)
    z = pt.tensor(ZG, requires_grad=True)
    y = call_op(d, (z,))
    with pytest.raises(NotImplementedError, match="the derivative of 'complex_safety_probe' is not implemented "
                                                  "for complex inputs in plugtorch"):
        y.abs().sum().backward()
    x = pt.tensor(ZG.real, requires_grad=True)
    call_op(d, (x,)).sum().backward()  # the same rule on real inputs runs
    assert x.grad.tolist() == [[2.0] * 4] * 3


@pytest.mark.parametrize(("name", "call"), [("tanh", pt.tanh), ("mul", lambda t: t * t), ("div", lambda t: t / (t + 3)),
                                            ("exp", pt.exp), ("log", pt.log), ("sqrt", pt.sqrt)])
def test_the_complex_checks_are_chosen_when_the_node_is_recorded(name, call):
    # a node none of whose operands is complex runs the op's rule as written (no checks, no
    # conjugates at backward); one with a complex operand, the checked or conjugating rule
    from plugtorch.core.optable import TABLE
    real, cplx = call(pt.tensor(ZG.real, requires_grad=True)), call(pt.tensor(ZG, requires_grad=True))
    d = TABLE[name]  # (filled as the first op runs)
    assert d.real_rule is d.derivative and d.rule is not d.real_rule
    assert real.grad_fn.rule is d.real_rule and cplx.grad_fn.rule is d.rule


def test_a_real_operand_beside_a_complex_one_gets_the_complex_rule():
    from plugtorch.core.optable import TABLE
    r, z = pt.tensor(ZG.real, requires_grad=True), pt.tensor(ZG, requires_grad=True)
    pt.get_registry()  # the op table is filled
    assert (r * z).grad_fn.rule is TABLE["mul"].rule and (r * 2j).grad_fn.rule is TABLE["mul"].rule
    add = TABLE["add"]  # right for both as written: one rule
    assert add.rule is add.real_rule and (z + r).grad_fn.rule is add.rule
