"""The registry is what runs: for every registered op, an overriding definition and a backend
kernel registered by a plugin are what the public call (and its gradient) executes.

Each op is exercised through the first of the conformance kit's samples for it (those with a
gradient first) whose call reaches the op, called the way the kit calls it: ``plugtorch.<op>``,
``Tensor.<op>`` or ``nn.functional.<op>``; an op no sample reaches fails. Every test registers
its plugins into the fresh registry of tests/core/conftest.py and unregisters them afterwards,
so the shared op table is left as the core defines it.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

import plugtorch
from plugtorch.core.dispatch import call_op
from plugtorch.core.errors import PluginError
from plugtorch.core.opdef import OpDef
from plugtorch.core.optable import TABLE
from plugtorch.core.plugins import unregister_plugin
from plugtorch.core.registry import CORE_PLUGIN
from plugtorch.testing import Sample, samples_for
from plugtorch.testing._calling import _caller, _compare, _get, _grad_positions, _host, flat_outputs, pt_inputs

from .plugin_helpers import numpy_clone_backend, plugin

OPS = sorted(plugtorch.get_registry().ops)
CLONE = "optable_clone"


@pytest.fixture
def register():
    """``register(fn, name=None)`` registers a plugin whose hook runs ``fn(registrar)``; every
    plugin registered this way is unregistered when the test ends, whatever happened (what a
    plugin registered before its hook raised included)."""
    names = []

    def add(fn, name=None):
        mod = plugin(fn, name=name)
        names.append(mod.__name__)
        return plugtorch.register_plugin(mod)
    yield add
    for name in reversed(names):
        if name in plugtorch.get_registry().plugins:
            unregister_plugin(name)


def _candidates(opdef) -> list:
    """The op's valid samples, those with a gradient first (the kit's order otherwise)."""
    valid = [s for s in samples_for(opdef) if isinstance(s, Sample) and s.raises is None]
    with_grad = [s for s in valid if s.grad and _grad_positions(s)]
    if not valid:
        pytest.skip(f"op '{opdef.name}' has no sample with valid inputs")
    return with_grad + [s for s in valid if not any(s is w for w in with_grad)]


def _run_reaching(opdef, backend, ran):
    """The first candidate sample whose forward reaches the op on ``backend`` (``ran()`` counts
    how often what we registered ran): the sample and its (output, gradients). A public function
    may serve an overload with another op (``max(x)`` is ``amax``), so the first sample alone
    does not always reach the op; one of them must."""
    for sample in _candidates(opdef):
        before = ran()
        forward = []
        got = _run(opdef, sample, backend, after_forward=lambda f=forward: f.append(ran()))
        if forward[0] > before:
            return sample, got
    pytest.fail(f"op '{opdef.name}': none of its samples' forward calls reaches the op on '{backend}' "
                "(they run other ops instead, so the kit does not check this op's forward)")


def _run(opdef, sample, backend, after_forward=None):
    """Output values and input gradients (None where unused) of the sample's call on ``backend``."""
    plugtorch.manual_seed(0)
    want_grad = sample.grad and bool(_grad_positions(sample))
    inputs = pt_inputs(sample, backend, requires_grad=want_grad)
    out = _caller(opdef, sample, False)(plugtorch, *inputs)
    if after_forward is not None:
        after_forward()
    outs = flat_outputs(out)
    live = [o for o in outs if isinstance(o, plugtorch.Tensor) and o.requires_grad]
    grads = None
    if want_grad and live:
        rng = np.random.default_rng(0)
        cots = [plugtorch.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=backend)
                for o in live]
        diff = [_get(inputs, p) for p in _grad_positions(sample)]
        grads = plugtorch.autograd.grad(live, diff, cots, allow_unused=True)
    for o in outs:
        if isinstance(o, plugtorch.Tensor):
            assert o.backend == plugtorch.get_registry().resolve_name(backend), \
                f"op '{opdef.name}': output on '{o.backend}', inputs on '{backend}'"
    return out, grads


def _same(opdef, sample, got, expected, what):
    (out, grads), (ref_out, ref_grads) = got, expected
    _compare(out, ref_out, sample, f"op '{opdef.name}' {what}: output")
    assert (grads is None) == (ref_grads is None), f"op '{opdef.name}' {what}: gradient presence differs"
    for k, (g, r) in enumerate(zip(grads or (), ref_grads or ())):
        if g is None or r is None:  # unused on one side: the other side's gradient must be zero
            present = r if g is None else g
            assert present is None or not np.any(_host(present)), \
                f"op '{opdef.name}' {what}: gradient {k} is missing on one side only"
            continue
        _compare(g, r, sample, f"op '{opdef.name}' {what}: gradient of input {k}")


# -- 1. an overriding definition is what runs ----------------------------------------------------

def _computes_as(registered, given) -> bool:
    """Whether the registered definition is ``given`` (the registry records it as a copy naming its
    plugin, with the public face of the op it overrides)."""
    return all(getattr(registered, f) is getattr(given, f) for f in ("decompose", "derivative", "lower", "primitive"))


def _spied(d, counts: Counter):
    """``d`` with every way it computes and differentiates wrapped by a counting spy that returns
    what the original returns. A primitive becomes a lowering that calls it, so that primitive ops
    too show whether the new definition is the one that runs."""
    fields = {}
    if d.derivative is not None:
        def rule(ctx, grad, _orig=d.derivative):
            counts["derivative"] += 1
            return _orig(ctx, grad)
        fields["derivative"] = rule
    if d.decompose is not None:
        def decompose(*args, _orig=d.decompose, **attrs):
            counts["decompose"] += 1
            return _orig(*args, **attrs)
        fields["decompose"] = decompose
    if d.primitive is not None or d.lower is not None:
        def lower(backend, *arrays, _prim=d.primitive, _lower=d.lower, **attrs):
            counts["lower"] += 1
            if _prim is not None:
                return backend.primitives[_prim](*arrays, **attrs)
            return _lower(backend, *arrays, **attrs)
        fields.update(primitive=None, lower=lower)
    return dataclasses.replace(d, **fields)


@pytest.mark.parametrize("name", OPS)
def test_an_overriding_definition_is_what_runs(name, register):
    # a second backend, so that "move" has somewhere to go
    register(lambda r: r.add_backend(numpy_clone_backend(CLONE)))
    reg = plugtorch.get_registry()
    original = reg.ops[name]
    counts = Counter()
    spied = _spied(original, counts)
    owner = register(lambda r: r.add_op(spied, override=True))
    assert _computes_as(TABLE[name], spied) and reg.ops[name].plugin == owner

    # forward: the lowering if the definition has one, else the decomposition (kernels that other
    # plugins registered for the old definition, such as NumPy's fused softmax, no longer serve it)
    computes = "lower" if spied.lower is not None else "decompose"
    sample, got = _run_reaching(original, "numpy", lambda: counts[computes])
    if original.derivative is not None and got[1] is not None:
        assert counts["derivative"] > 0, f"op '{name}': the overriding derivative never ran in backward"

    unregister_plugin(owner)
    assert TABLE[name] is original and name not in reg.overridden
    assert reg.ops[name].plugin == CORE_PLUGIN
    runs = sum(counts.values())
    expected = _run(original, sample, "numpy")
    assert sum(counts.values()) == runs, f"op '{name}': the removed definition still runs"
    _same(original, sample, got, expected, "under an overriding definition")


def _faces(opdef):
    """Every public way to call the op: (label, call(*inputs, **kwargs))."""
    name = opdef.name
    out = []
    if "plugtorch" in opdef.exposed and hasattr(plugtorch, name):
        out.append((f"plugtorch.{name}", getattr(plugtorch, name)))
    if "Tensor" in opdef.exposed and hasattr(plugtorch.Tensor, name):
        out.append((f"Tensor.{name}", lambda x, *rest, **kw: getattr(x, name)(*rest, **kw)))
    if "nn.functional" in opdef.exposed and hasattr(plugtorch.nn.functional, name):
        out.append((f"nn.functional.{name}", getattr(plugtorch.nn.functional, name)))
    if opdef.inplace and hasattr(plugtorch.Tensor, name + "_"):
        # on a copy that is not a leaf, so the graph runs through the in-place form too
        out.append((f"Tensor.{name}_", lambda x, *rest, **kw: getattr(x * 1, name + "_")(*rest, **kw)))
    return out


@pytest.mark.parametrize("name", OPS)
def test_an_override_runs_on_every_face_of_its_op(name, register):
    """The fast paths of the public functions, methods and in-place forms (elementwise ops inline
    dispatch) reach an overriding definition, forward and backward, as call_op does."""
    original = plugtorch.get_registry().ops[name]
    samples = [s for s in _candidates(original) if s.call is None]
    faces = _faces(original)
    if not samples or not faces:
        pytest.skip(f"op '{name}' has no sample called by its name, or no public face")
    counts = Counter()
    spied = _spied(original, counts)
    register(lambda r: r.add_op(spied, override=True))
    computes = "lower" if spied.lower is not None else "decompose"
    for label, face in faces:
        ran = False  # some call through this face ran (others may not suit its signature)
        for sample in samples:
            want_grad = sample.grad and bool(_grad_positions(sample)) and original.derivative is not None
            inputs = pt_inputs(sample, "numpy", requires_grad=want_grad)
            before = dict(counts)
            try:
                out = face(*inputs, **sample.kwargs)
            except (TypeError, RuntimeError, ValueError):
                continue  # this face takes other arguments (Tensor.where's self is the input)
            ran = True
            if counts[computes] == before.get(computes, 0):
                continue  # another op serves this call on this face (max(x) is amax)
            live = [o for o in flat_outputs(out) if isinstance(o, plugtorch.Tensor) and o.requires_grad]
            if want_grad and live:
                plugtorch.autograd.grad(live, [_get(inputs, p) for p in _grad_positions(sample)],
                                        [plugtorch.ones_like(o) for o in live], allow_unused=True)
                assert counts["derivative"] > before.get("derivative", 0), \
                    f"op '{name}' through {label}: the overriding derivative never ran in backward"
            break
        else:
            assert not ran, f"op '{name}': calls through {label} ran, and none reached the overriding definition"


# -- 2. a backend kernel is what runs ------------------------------------------------------------

def _kernel_spy(name, calls: list):
    """A kernel for ``name``: the op itself on NumPy arrays, run as plugtorch on the NumPy backend."""
    def to_tensor(a):
        return plugtorch.from_numpy(a) if isinstance(a, np.ndarray) else a

    def kernel(*arrays, **attrs):
        calls.append(attrs)
        if TABLE[name].variadic:  # cat, stack, einsum: one list of arrays
            (arrays,) = arrays
            assert isinstance(arrays, list), f"op '{name}': its kernel got {type(arrays).__name__}"
        with plugtorch.no_grad():
            out = call_op(name, tuple(to_tensor(a) for a in arrays), attrs)
        return out.numpy()
    return kernel


@pytest.mark.parametrize("name", OPS)
def test_a_backend_kernel_is_what_runs(name, register):
    reg = plugtorch.get_registry()
    opdef = reg.ops[name]
    calls = []
    if opdef.kernel_refusal:
        with pytest.raises(PluginError) as info:
            register(lambda r: r.add_kernel(name, "numpy", _kernel_spy(name, calls)))
        assert opdef.kernel_refusal in str(info.value) and f"'{name}'" in str(info.value)
        assert (name, "numpy") not in reg.kernels
        return

    def add(r):
        r.add_backend(numpy_clone_backend(CLONE))
        r.add_kernel(name, CLONE, _kernel_spy(name, calls))
    register(add)
    assert reg.kernel_owner(name, CLONE) and reg.kernel_is_active(name, CLONE)
    sample, got = _run_reaching(opdef, CLONE, lambda: len(calls))
    _same(opdef, sample, got, _run(opdef, sample, "numpy"), f"with a kernel on '{CLONE}'")


def test_kernels_for_an_undefined_op_or_a_primitive_are_refused_with_the_reason(register):
    with pytest.raises(PluginError, match="no op named 'no_such_op' is defined.*add_op"):
        register(lambda r: r.add_kernel("no_such_op", "numpy", lambda x: x))
    with pytest.raises(PluginError, match="'setitem' is a primitive of the backend contract, not an op"):
        register(lambda r: r.add_kernel("setitem", "numpy", lambda x, i, v: None))


def test_a_list_taking_op_kernel_receives_a_list_of_arrays(register):
    seen = []

    def cat_kernel(arrays, *, dim):
        seen.append([type(a) for a in arrays])
        return np.concatenate(arrays, axis=dim)

    def add(r):
        r.add_backend(numpy_clone_backend(CLONE))
        r.add_kernel("cat", CLONE, cat_kernel)
    register(add)
    a = plugtorch.ones(2, 3, device=CLONE, requires_grad=True)
    b = plugtorch.zeros(1, 3, device=CLONE)
    out = plugtorch.cat([a, b])
    assert seen == [[np.ndarray, np.ndarray]] and out.shape == (3, 3)
    out.sum().backward()
    assert a.grad.tolist() == [[1.0] * 3] * 2


# -- 3. an override retires other plugins' kernels, in either order ----------------------------

def _softmax_override(counts):
    d = TABLE["softmax"]

    def decompose(*args, _orig=d.decompose, **attrs):
        counts["decompose"] += 1
        return _orig(*args, **attrs)
    return dataclasses.replace(d, decompose=decompose)


@pytest.mark.parametrize("order", ["kernel_first", "override_first"])
def test_an_override_retires_other_plugins_kernels_but_serves_its_own(order, register):
    reg = plugtorch.get_registry()
    counts = Counter()

    def counting(tag):
        def kernel(x, *, dim):
            counts[tag] += 1
            e = np.exp(x - x.max(axis=dim, keepdims=True))
            return e / e.sum(axis=dim, keepdims=True)
        return kernel

    def backends(r):
        r.add_backend(numpy_clone_backend("ov_a"))
        r.add_backend(numpy_clone_backend("ov_b"))

    def other_kernel(r):
        r.add_kernel("softmax", "ov_a", counting("other"))

    def override(r):
        r.add_op(_softmax_override(counts), override=True)
        r.add_kernel("softmax", "ov_b", counting("own"))

    register(backends)
    steps = [other_kernel, override] if order == "kernel_first" else [override, other_kernel]
    names = {step: register(step) for step in steps}
    assert "softmax" not in reg.backends["numpy"].kernels  # NumPy's fused kernel is retired too

    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    expected = np.exp(x) / np.exp(x).sum(1, keepdims=True)

    def run(dev):
        t = plugtorch.tensor(x, device=dev, requires_grad=True)
        y = plugtorch.softmax(t, 1)
        y[:, 0].sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-12)
        return t.grad.numpy()

    grads = {dev: run(dev) for dev in ("ov_a", "ov_b", "numpy")}
    assert counts == Counter(decompose=2, own=1)  # ov_a and numpy decompose; ov_b runs its own
    for g in grads.values():
        np.testing.assert_allclose(g, grads["numpy"], rtol=1e-12)

    unregister_plugin(names[override])  # the other plugin's kernel, and NumPy's, serve it again
    counts.clear()
    run("ov_a")
    run("ov_b")
    assert counts == Counter(other=1) and "softmax" in reg.backends["numpy"].kernels
    assert "softmax" not in reg.backends["ov_b"].kernels


# -- the undo API: Registry.remove_plugin / unregister_plugin ------------------------------------

def test_removing_a_plugin_restores_what_its_registrations_replaced(register):
    reg = plugtorch.get_registry()
    core = TABLE["softplus"]
    first = dataclasses.replace(core, decompose=lambda x, *, beta, threshold: x * 0 + 1.0)
    second = dataclasses.replace(core, decompose=lambda x, *, beta, threshold: x * 0 + 2.0)
    p1 = register(lambda r: (r.add_op(first, override=True), r.add_service("test.svc", "one")))
    p2 = register(lambda r: (r.add_op(second, override=True),
                             r.add_service("test.svc", "two", override=True)))
    x = plugtorch.tensor([0.5, -1.0])
    assert plugtorch.nn.functional.softplus(x).tolist() == [2.0, 2.0]

    unregister_plugin(p1)  # not the one in force: the later override stays
    assert _computes_as(TABLE["softplus"], second) and reg.overridden["softplus"] is core
    assert reg.service("test.svc") == "two" and p1 not in reg.plugins

    unregister_plugin(p2)
    assert TABLE["softplus"] is core and "softplus" not in reg.overridden
    assert reg.service("test.svc") is None
    np.testing.assert_allclose(plugtorch.nn.functional.softplus(x).numpy(), np.log1p(np.exp([0.5, -1.0])),
                               rtol=1e-6)


def test_removing_a_plugin_removes_its_ops_backends_and_kernels(register):
    from plugtorch.core.registry import OpDef
    reg = plugtorch.get_registry()
    twice = OpDef("twice_test_op", decompose=lambda x: x * 2)

    def add(r):
        r.add_op(twice)
        r.add_backend(numpy_clone_backend("rm_backend"))
        r.add_kernel("twice_test_op", "numpy", lambda x: x * 2)
    owner = register(add)
    other = register(lambda r: r.add_kernel("exp", "rm_backend", np.exp))
    assert "twice_test_op" in reg.backends["numpy"].kernels
    stranded = plugtorch.ones(2, device="rm_backend")
    unregister_plugin(owner)
    with pytest.raises(plugtorch.MissingKernelError, match="backend 'rm_backend'"):
        stranded.exp()
    assert "twice_test_op" not in TABLE and "twice_test_op" not in reg.backends["numpy"].kernels
    assert "rm_backend" not in reg.backends and owner not in reg.plugins
    with pytest.raises(PluginError, match="no op named 'twice_test_op'"):
        call_op("twice_test_op", (plugtorch.ones(1),))
    # the other plugin's kernel waits for its backend: registering it again brings it back
    register(lambda r: r.add_backend(numpy_clone_backend("rm_backend")))
    assert reg.kernel_is_active("exp", "rm_backend") and reg.kernel_owner("exp", "rm_backend") == other


def test_a_backend_override_is_undone_and_a_plugin_can_come_back(register):
    reg = plugtorch.get_registry()
    mod = plugin(lambda r: r.add_backend(numpy_clone_backend("numpy"), override=True), name="np_override")
    original = reg.backends["numpy"]
    plugtorch.register_plugin(mod)
    try:
        assert reg.backends["numpy"] is not original and reg.resolve_name("cpu") == "numpy"
    finally:
        unregister_plugin("np_override")
    assert reg.backends["numpy"] is original and reg.resolve_name("cpu") == "numpy"
    assert "softmax" in original.kernels  # its kernel table was rebuilt, fused kernels included
    plugtorch.register_plugin(mod)  # forgotten by pluggy too, so it can be registered again
    unregister_plugin("np_override")


def test_removing_the_core_or_an_unknown_plugin_is_refused():
    with pytest.raises(PluginError, match="defines the core ops and cannot be removed"):
        unregister_plugin(CORE_PLUGIN)
    with pytest.raises(PluginError, match="no plugin named 'nobody' is registered"):
        unregister_plugin("nobody")


# -- 4. an override without a derivative is differentiated through its decomposition, whatever path runs it

_LOG2E = 1.4426950408889634


def _numpy_primitive(name):
    return plugtorch.get_registry().backends["numpy"].primitives[name]


# (op, its decomposition without a derivative, the kernel a plugin registers on NumPy, calls reaching
# the op (each given fresh inputs that require grad), the gradient of each input of a sum of the result)
_DECOMPOSED = {
    "exp": (lambda x: plugtorch.pow(2.0, x * _LOG2E), lambda x: _numpy_primitive("exp")(x),
            {"plugtorch.exp": lambda x: plugtorch.exp(x), "Tensor.exp": lambda x: x.exp(),
             "Tensor.exp_": lambda x: (x * 1).exp_(), "call_op": lambda x: call_op("exp", (x,))},
            lambda x: [np.exp(x)]),
    "mul": (lambda a, b: ((a + b) ** 2 - (a - b) ** 2) / 4, lambda a, b: _numpy_primitive("mul")(a, b),
            {"plugtorch.mul": lambda a, b: plugtorch.mul(a, b), "a * b": lambda a, b: a * b,
             "a * number": lambda a: a * 3.0, "Tensor.mul_": lambda a, b: (a * 1).mul_(b),
             "call_op": lambda a, b: call_op("mul", (a, b))},
            lambda a, b: [b, a]),
    "cast": (lambda x, *, dtype: x + plugtorch.zeros((), dtype=dtype),
             lambda x, *, dtype: _numpy_primitive("cast")(x, dtype=dtype),
             {"Tensor.double": lambda x: x.double(), "Tensor.to": lambda x: x.to(plugtorch.float64)},
             lambda x: [np.ones_like(x)]),
    "relu": (lambda x: x.clamp(min=0), lambda x: np.maximum(x, 0),
             {"F.relu": lambda x: plugtorch.nn.functional.relu(x), "Tensor.relu": lambda x: x.relu(),
              "plugtorch.relu": lambda x: plugtorch.relu(x), "Tensor.relu_": lambda x: (x * 1).relu_()},
             lambda x: [(x > 0).astype(np.float32)]),
}


@pytest.mark.parametrize("name, path", [(n, p) for n, case in _DECOMPOSED.items() for p in case[2]])
def test_an_override_with_a_decomposition_and_a_kernel_keeps_its_gradient_on_every_path(name, path, register):
    decompose, kernel, paths, expected = _DECOMPOSED[name]
    ran = []

    def spy(*args, **kwargs):
        ran.append(1)
        return kernel(*args, **kwargs)
    register(lambda r: (r.add_op(OpDef(name, decompose=decompose), override=True),
                        r.add_kernel(name, "numpy", spy, override=True)))
    values = [np.array([0.5, -1.25, 2.0], np.float32), np.array([1.5, 0.75, -2.0], np.float32)]
    call = paths[path]
    n = call.__code__.co_argcount
    inputs = [plugtorch.tensor(v, requires_grad=True) for v in values[:n]]
    out = call(*inputs)
    assert ran, f"{path}: the plugin's kernel did not run"
    assert out.requires_grad, f"{path}: the result of '{name}' lost its gradient"
    out.sum().backward()
    want = [np.full(3, 3.0, np.float32)] if path == "a * number" else expected(*values[:n])
    for t, w in zip(inputs, want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-5, atol=1e-6, err_msg=path)


def test_an_override_that_drops_the_derivative_is_refused(register):
    with pytest.raises(PluginError, match="override of op 'exp' has no derivative and no decomposition"):
        register(lambda r: r.add_op(OpDef("exp", primitive="exp"), override=True))
    assert TABLE["exp"].derivative is not None
