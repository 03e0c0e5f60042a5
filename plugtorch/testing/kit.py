"""The conformance checks, one function per property, on any backend.

Each ``check_*`` takes an :class:`OpDef`, one :class:`Sample`, a backend name and
(optionally) the torch module, and raises ``AssertionError`` naming the op, the sample and the
backend when the property fails. :mod:`plugtorch.testing.conformance` turns them
into pytest tests over every registered op and every backend; they are plain
functions so other harnesses can call them too.
"""
from __future__ import annotations

import gc
import weakref
import zlib

import numpy as np

import plugtorch
from plugtorch.core.device import get_backend
from plugtorch.core.dispatch import wrap

from ._calling import (
    ConformanceError,
    _array_keys,
    _caller,
    _check_backend,
    _compare,
    _compare_requires_grad,
    _convert,
    _dtype_name,
    _expect_raise,
    _get,
    _grad_positions,
    _host,
    _put,
    _where,
    flat_outputs,
    pt_inputs,
    torch_inputs,
)
from .sample import Sample, Waiver, samples_for

__all__ = ["ConformanceError", "LAYOUT_WAIVERS", "CONTIGUITY_ONLY", "layout_rule", "check_forward",
           "check_strides", "check_noncontiguous", "check_float32", "check_gradcheck", "check_gradgradcheck",
           "check_out_variant", "check_coverage", "check_jvp", "flat_outputs", "pt_inputs", "torch_inputs"]


# The torch the samples are written against: pyproject.toml's dev extra pins it, and
# tests/conformance/test_kit.py keeps the two in step.
REFERENCE_TORCH = (2, 13)


def _on_torch(torch, what: str, compute):
    """``compute()``, the reference's side of a check. Where a torch older than REFERENCE_TORCH
    cannot compute a sample (a mode or a derivative it gained since: lanczos interpolation,
    aminmax's gradient), the check is skipped saying so, rather than failed for plugtorch:
    a GPU machine's image, say, carries its own torch. On REFERENCE_TORCH or newer an error
    is the sample's or the op's, and propagates."""
    try:
        return compute()
    except Exception as e:
        version = torch.__version__.split("+")[0]
        if tuple(int(p) for p in version.split(".")[:2]) >= REFERENCE_TORCH:
            raise
        import pytest
        pytest.skip(f"{what}: the reference torch {version} cannot compute this sample "
                    f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); the samples are "
                    f"written against torch {'.'.join(map(str, REFERENCE_TORCH))}")


# -- the checks ----------------------------------------------------------------------------

def check_forward(opdef, sample: Sample, backend: str, torch=None):
    """Values, shapes and dtypes against torch (if given) and the NumPy reference (if any)."""
    what = _where(opdef.name, sample, backend)
    call = _caller(opdef, sample, False)
    if sample.raises is not None:
        # On a device backend, checks that read values on the host (labels in range, indices in
        # bounds) run only in debug mode (plugtorch.core.debug): that is where the promise holds.
        with plugtorch.debug_mode(plugtorch.is_debug() or not get_backend(backend).host_memory):
            _expect_raise(lambda: call(plugtorch, *pt_inputs(sample, backend)), sample.raises, what)
        if torch is not None:
            tcall = _caller(opdef, sample, True)
            try:
                tcall(torch, *torch_inputs(torch, sample))
            except Exception:
                return "raises as torch does"
            raise ConformanceError(f"{what}: the sample says these inputs are invalid, but torch "
                                   "accepts them; fix the sample or the op")
        return "raises"
    track = bool(_grad_positions(sample))
    inputs = pt_inputs(sample, backend, requires_grad=track)
    out = call(plugtorch, *inputs)
    _check_backend(out, backend, what)
    compared, t_inputs = [], None
    if torch is not None:
        t_inputs = torch_inputs(torch, sample, requires_grad=track)
        expected = _on_torch(torch, what, lambda: _caller(opdef, sample, True)(torch, *t_inputs))
        if expected is NotImplemented:
            t_inputs = None
        else:
            _compare(out, expected, sample, what + " vs torch")
            _compare_requires_grad(out, expected, what)
            compared.append("torch")
    _check_inputs_unchanged(sample, inputs, what, t_inputs)
    if sample.ref is not None:
        expected = sample.ref(*sample.inputs)
        _compare(out, expected, sample, what + " vs NumPy reference", check_dtype=False)
        compared.append("numpy")
    return compared


def _check_inputs_unchanged(sample, inputs, what, t_inputs=None):
    """An op leaves its inputs alone (a kernel that writes into its argument fails here), except
    those the sample says it ``mutates``: they must hold what torch's call left in torch's."""
    for key in _array_keys(sample):
        if key[0] in sample.mutates:
            if t_inputs is not None:
                _compare(_get(inputs, key), _get(t_inputs, key), sample,
                         f"{what}: input {key[0]} as the op left it, vs torch's")
            continue
        before, after = _get(list(sample.inputs), key), _get(inputs, key)
        if not np.array_equal(_host(after), before, equal_nan=before.dtype.kind == "f"):
            raise ConformanceError(f"{what}: the op modified its input {key[0]}"
                                   + (f"[{key[1]}]" if key[1] is not None else ""))


def _layout(t) -> tuple | None:
    """Strides of the dims longer than one (a size-0 or size-1 dim's stride never addresses an
    element, and torch's choice for it is arbitrary); None for an empty tensor."""
    if t.numel() == 0:
        return None
    return tuple(s for n, s in zip(t.shape, t.stride()) if n > 1)


def _row_major(torch, v):
    return v.contiguous() if isinstance(v, torch.Tensor) else v


# Ops (or "op[sample label]") whose output layout is not compared with torch's, and why.
LAYOUT_WAIVERS = {
    "diagonal": "torch returns a view of the input (strides step along both dims); plugtorch's "
                "diagonal is a gathered copy, contiguous",
    "einsum[diagonal]": "torch returns a repeated index's diagonal ('ii->i') as a view of the input; "
                        "plugtorch's einsum computes a contiguous copy",
}

# Ops whose torch strides are an implementation detail: only is_contiguous() is compared.
CONTIGUITY_ONLY = {
    "einsum": "torch permutes the output of the batched product it reduces to into the subscripts' "
              "order (a non-contiguous view whose strides follow its contraction plan); which "
              "permutation is not part of einsum's contract",
}


def layout_rule(op: str, sample: Sample) -> tuple[str, str]:
    """How :func:`check_strides` treats ``op``'s ``sample``: ("waived", why), ("contiguity", why) or
    ("strides", "")."""
    for key in (f"{op}[{sample.label()}]", op):
        if key in LAYOUT_WAIVERS:
            return "waived", LAYOUT_WAIVERS[key]
    if op in CONTIGUITY_ONLY:
        return "contiguity", CONTIGUITY_ONLY[op]
    return "strides", ""


def check_strides(opdef, sample: Sample, backend: str, torch, contiguity_only: bool = False):
    """Each tensor output has torch's memory layout for the same row-major inputs: its
    ``stride()`` over the dims longer than one (``.view``, DLPack and ``.numpy()`` see the
    layout, not only the values), or, with ``contiguity_only`` (for a plugin op whose torch
    strides are an implementation detail), torch's ``is_contiguous()``. False where there is
    nothing to compare (an invalid-input sample, no torch counterpart)."""
    if sample.raises is not None:
        return False
    what = _where(opdef.name, sample, backend)
    out = _caller(opdef, sample, False)(plugtorch, *pt_inputs(sample, backend))
    # both sides from row-major inputs (torch.tensor keeps a transposed array's strides,
    # plugtorch.tensor copies it row-major): the layouts compared are the ops', not the inputs'
    t_inputs = [type(v)(_row_major(torch, a) for a in v) if isinstance(v, (list, tuple)) else _row_major(torch, v)
                for v in torch_inputs(torch, sample)]
    expected = _on_torch(torch, what, lambda: _caller(opdef, sample, True)(torch, *t_inputs))
    if expected is NotImplemented:
        return False
    pairs = [(a, e) for a, e in zip(flat_outputs(out), flat_outputs(expected))
             if isinstance(a, plugtorch.Tensor) and isinstance(e, torch.Tensor) and a.shape == tuple(e.shape)]
    for k, (a, e) in enumerate(pairs):
        if contiguity_only:
            if a.is_contiguous() != e.is_contiguous():
                raise ConformanceError(f"{what}: output {k} (shape {list(a.shape)}) has is_contiguous() "
                                       f"{a.is_contiguous()}, torch's {e.is_contiguous()}")
        elif _layout(a) != _layout(e):
            raise ConformanceError(f"{what}: output {k} (shape {list(a.shape)}) has strides {a.stride()}, "
                                   f"torch's {e.stride()}; an op returns torch's layout whatever its kernel "
                                   "prefers inside (x.view(...) and DLPack users see it)")
    return bool(pairs)


def check_noncontiguous(opdef, sample: Sample, backend: str):
    """Inputs that are strided views (transposed storage) give the same results as contiguous ones."""
    what = _where(opdef.name, sample, backend) + " with non-contiguous inputs"
    call = _caller(opdef, sample, False)
    expected = call(plugtorch, *pt_inputs(sample, backend))
    dt = plugtorch.float64

    def make(a, dtype, key):
        if a.ndim < 2:
            return plugtorch.tensor(a, dtype=dt if dtype else None, device=backend)
        # same values, stored transposed: a permuted view whose strides are not row-major
        order = tuple(range(a.ndim - 1, -1, -1))
        stored = plugtorch.tensor(np.ascontiguousarray(a.transpose(order)), dtype=dt if dtype else None,
                                  device=backend)
        return stored.permute(order)
    got = call(plugtorch, *_convert(sample, make, "float64"))
    _compare(got, expected, sample, what, atol=1e-12, rtol=1e-12)


def check_float32(opdef, sample: Sample, backend: str, torch=None):
    """float32 inputs: result dtypes as torch's (or: no float64 appears), values to float32 accuracy."""
    what = _where(opdef.name, sample, backend) + " in float32"
    out = _caller(opdef, sample, False)(plugtorch, *pt_inputs(sample, backend, "float32"))
    if torch is not None:
        expected = _on_torch(torch, what, lambda: _caller(opdef, sample, True)(
            torch, *torch_inputs(torch, sample, "float32")))
        if expected is not NotImplemented:
            _compare(out, expected, sample, what + " vs torch", atol=1e-4, rtol=1e-4)
            return "torch"
    for k, o in enumerate(flat_outputs(out)):
        if _dtype_name(o) == "float64":
            raise ConformanceError(f"{what}: output {k} is float64 although every input is float32 or integer")
    return "dtype"


def _diff_fn(opdef, sample, backend, inputs):
    """fn(*differentiable tensors) -> floating outputs, rebuilding the full argument list."""
    call = _caller(opdef, sample, False)
    positions = _grad_positions(sample)

    def fn(*diff):
        args = list(inputs)
        for p, t in zip(positions, diff):
            _put(args, p, t)
        outs = [o for o in flat_outputs(call(plugtorch, *args))
                if isinstance(o, plugtorch.Tensor) and o.dtype.is_floating_point]
        return tuple(outs)
    return fn, [_get(inputs, p) for p in positions]


def check_gradcheck(opdef, sample: Sample, backend: str, torch=None):
    """Finite differences in float64; the gradient for a fixed cotangent against torch's."""
    what = _where(opdef.name, sample, backend)
    inputs = pt_inputs(sample, backend, requires_grad=True)
    fn, diff = _diff_fn(opdef, sample, backend, inputs)
    outs = fn(*diff)
    if not outs or not any(o.requires_grad for o in outs):
        raise ConformanceError(f"{what}: no floating output requires grad, although the sample marks "
                               "the op differentiable (set grad=False if it is not)")
    _check_outputs_freed(what, fn, diff, inputs)
    if sample.numerical:
        plugtorch.autograd.gradcheck(fn, diff, eps=1e-6, atol=1e-5, rtol=1e-3)
    if torch is None:
        if not sample.numerical:
            import pytest
            pytest.skip("this gradient is only checked against torch (finite differences cannot "
                        "resolve it), and PyTorch is not installed")
        return "gradcheck"
    rng = np.random.default_rng(zlib.crc32(opdef.name.encode()))
    cots = [rng.standard_normal(tuple(o.shape)) for o in outs]
    live = [i for i, o in enumerate(outs) if o.requires_grad]
    got = plugtorch.autograd.grad([outs[i] for i in live], diff,
                                  [plugtorch.tensor(cots[i], device=backend) for i in live],
                                  allow_unused=True)
    t_in = torch_inputs(torch, sample, requires_grad=True)
    t_diff = [_get(t_in, p) for p in _grad_positions(sample)]

    def torch_gradient():
        t_out = _caller(opdef, sample, True)(torch, *t_in)
        if t_out is NotImplemented:
            return NotImplemented
        t_outs = [o for o in flat_outputs(t_out) if hasattr(o, "dtype") and o.dtype.is_floating_point]
        pairs = [(t_outs[i], torch.tensor(cots[i])) for i in live if t_outs[i].requires_grad]
        return torch.autograd.grad([p[0] for p in pairs], t_diff, [p[1] for p in pairs],
                                   allow_unused=True) if pairs else [None] * len(t_diff)
    expected = _on_torch(torch, what, torch_gradient)
    if expected is NotImplemented:
        return "gradcheck"
    for k, (g, e) in enumerate(zip(got, expected)):
        gh = np.zeros(diff[k].shape) if g is None else _host(g)
        eh = np.zeros(tuple(t_diff[k].shape)) if e is None else _host(e)
        if gh.shape != eh.shape or not np.allclose(gh, eh, atol=1e-7, rtol=1e-6, equal_nan=True):
            raise ConformanceError(f"{what}: gradient of input {k} differs from torch's\n"
                                   f"got:\n{gh}\nexpected:\n{eh}")
    return "gradcheck+torch"


def _check_outputs_freed(what: str, fn, diff, inputs) -> None:
    """A graph keeps what its rules read, not the outputs themselves: an output dropped without a
    backward is freed by its reference count. (A node holding its output makes a cycle only the
    garbage collector breaks: an evaluation loop run without ``no_grad`` keeps its results.)
    An output that is one of the inputs (``contiguous`` of a contiguous tensor) is not counted."""
    given = {id(t) for t in diff} | {id(t) for t in flat_outputs(tuple(inputs))}
    collecting = gc.isenabled()
    gc.disable()
    try:
        refs = [weakref.ref(o) for o in fn(*diff) if id(o) not in given]
        alive = [k for k, r in enumerate(refs) if r() is not None]
    finally:
        if collecting:
            gc.enable()
    if alive:
        raise ConformanceError(f"{what}: output(s) {alive} outlive their last reference: the graph holds "
                               "them (a node that keeps its output must keep an alias without grad_fn, as "
                               "dispatch._attach does)")


def check_gradgradcheck(opdef, sample: Sample, backend: str):
    """Second derivatives by finite differences of the first (double backward)."""
    inputs = pt_inputs(sample, backend, requires_grad=True)
    fn, diff = _diff_fn(opdef, sample, backend, inputs)
    outs = fn(*diff)
    rng = np.random.default_rng(zlib.crc32(opdef.name.encode()) + 1)
    gos = tuple(plugtorch.tensor(rng.standard_normal(tuple(o.shape)), device=backend).requires_grad_()
                for o in outs)
    plugtorch.autograd.gradgradcheck(fn, diff, gos, eps=1e-6, atol=1e-5, rtol=1e-3)


def check_jvp(opdef, sample: Sample, backend: str) -> str:
    """Forward-mode AD (``autograd.forward_ad``) in float64: the output tangents ``J t`` for random
    tangents ``t`` against central finite differences (where the sample allows them), and the
    transpose identity ``<J t, u> == <t, J^T u>`` against the reverse-mode gradient for random
    cotangents ``u``. Says which were compared."""
    from plugtorch.autograd import forward_ad as fwad
    what = _where(opdef.name, sample, backend) + " forward-mode AD"
    inputs = pt_inputs(sample, backend)
    fn, diff = _diff_fn(opdef, sample, backend, inputs)
    rng = np.random.default_rng(zlib.crc32(opdef.name.encode()) + 2)
    tangents = [plugtorch.tensor(rng.standard_normal(tuple(d.shape)), device=backend) for d in diff]
    with fwad.dual_level():
        try:
            outs = fn(*[fwad.make_dual(d, t) for d, t in zip(diff, tangents)])
            jts = [fwad.unpack_dual(o).tangent for o in outs]
        except Exception as e:
            raise ConformanceError(f"{what}: {type(e).__name__}: {e}") from e
    primal = fn(*diff)
    if not primal:
        return "no floating output"
    jts = [np.zeros(tuple(o.shape)) if t is None else _host(t) for o, t in zip(primal, jts)]
    done = []
    if sample.numerical:
        eps = 1e-6
        plus = fn(*[d + eps * t for d, t in zip(diff, tangents)])
        minus = fn(*[d - eps * t for d, t in zip(diff, tangents)])
        for k, (p, m, jt) in enumerate(zip(plus, minus, jts)):
            fd = (_host(p) - _host(m)) / (2 * eps)
            if fd.shape != jt.shape or not np.allclose(jt, fd, atol=1e-5, rtol=1e-3, equal_nan=True):
                raise ConformanceError(f"{what}: the tangent of output {k} differs from finite differences\n"
                                       f"jvp:\n{jt}\nfinite differences:\n{fd}")
        done.append("finite differences")
    leaves = [d.detach().requires_grad_() for d in diff]
    outs = fn(*leaves)
    live = [k for k, o in enumerate(outs) if o.requires_grad]
    if live:
        cots = [rng.standard_normal(tuple(o.shape)) for o in outs]
        vjps = plugtorch.autograd.grad([outs[k] for k in live], leaves,
                                       [plugtorch.tensor(cots[k], device=backend) for k in live], allow_unused=True)
        forward = sum(float(np.sum(jts[k] * cots[k])) for k in live)
        backward = sum(float(np.sum(_host(t) * _host(g))) for t, g in zip(tangents, vjps) if g is not None)
        if not np.isclose(forward, backward, atol=1e-7, rtol=1e-6):
            raise ConformanceError(f"{what}: <J t, u> = {forward} but <t, J^T u> = {backward} (the reverse-mode "
                                   "gradient): the jvp and the derivative rule disagree")
        done.append("vjp")
    return "jvp vs " + " and ".join(done) if done else "jvp"



def check_out_variant(opdef, sample: Sample, backend: str) -> bool:
    """The backend's out= variant of the op's primitive (``Backend.out_variants``), on the
    sample's inputs as float32: it writes what the primitive returns into a buffer of the
    result's shape and dtype, and refuses a buffer the result does not fit with ValueError,
    writing nothing (in-place methods and plugtorch.compile's buffer reuse rely on both).
    False where there is nothing to check: no variant, a sample that is not positional
    arrays and numbers, or one the primitive itself does not take."""
    b = get_backend(backend)
    variant, primitive = b.out_variants.get(opdef.primitive), b.primitives.get(opdef.primitive)
    if variant is None or primitive is None or sample.kwargs or sample.raises is not None \
            or not all(isinstance(a, (np.ndarray, int, float)) for a in sample.inputs):
        return False
    arrays = [a._data if isinstance(a, plugtorch.Tensor) else a for a in pt_inputs(sample, backend, "float32")]
    try:
        expected = primitive(*arrays)
    except Exception:
        return False
    where = f"{_where(opdef.name, sample, backend)}, out= variant of primitive '{opdef.primitive}'"
    dtype = b.dtype_of(expected)
    shape = tuple(expected.shape)
    buffer = plugtorch.full(shape, 7, dtype=dtype, device=backend)._data
    variant(*arrays, out=buffer)
    got, want = _host(wrap(buffer, b)), _host(wrap(expected, b))  # as tensors: a device array moves explicitly
    if got.dtype != want.dtype or not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
        raise ConformanceError(f"{where}: wrote {got.tolist()} ({got.dtype}) into its buffer; the primitive "
                               f"returns {want.tolist()} ({want.dtype})")
    if len(shape) and max(shape) > 1:  # a buffer with the first dimension longer than 1 cut to 1
        cut = list(shape)
        cut[next(i for i, n in enumerate(shape) if n > 1)] = 1
        small = plugtorch.full(tuple(cut), 7, dtype=dtype, device=backend)._data
        before = _host(wrap(small, b)).copy()  # (on the host backend, a view of the buffer)
        _expect_raise(lambda: variant(*arrays, out=small), ValueError,
                      f"{where}, given a buffer of shape {tuple(cut)} for a result of shape {shape}")
        if not np.array_equal(_host(wrap(small, b)), before):
            raise ConformanceError(f"{where}: wrote into a buffer of shape {tuple(cut)} that its result of "
                                   f"shape {shape} does not fit, before refusing it")
    return True


def check_coverage(opdef, items: list):
    """The op has samples, among them a 0-d input, an empty input and (if differentiable) a gradient."""
    name = opdef.name
    if not items:
        raise ConformanceError(
            f"op '{name}' (from plugin '{opdef.plugin}') has no conformance samples. Give its OpDef a "
            "samples=fn(g) -> [plugtorch.testing.Sample(...)], or add it to plugtorch.testing.samples.")
    samples = [s for s in items if isinstance(s, Sample)]
    waived = {w.check: w.reason for w in items if isinstance(w, Waiver)}
    for check, present in (("zero_dim", any(s.zero_dim for s in samples)),
                           ("empty", any(s.empty for s in samples))):
        if not present and not waived.get(check):
            raise ConformanceError(
                f"op '{name}' has no sample with {'a 0-d' if check == 'zero_dim' else 'an empty'} input; add "
                "one (an invalid-input sample with raises=... counts) or a Waiver saying why none applies")
    has_grad_sample = any(s.grad and s.raises is None for s in samples)
    if opdef.derivative is not None and not has_grad_sample and not waived.get("grad"):
        raise ConformanceError(f"op '{name}' is differentiable but no sample checks its gradient; "
                               "add a sample with grad=True or a Waiver('grad', reason)")
    return True


def op_samples(opdef) -> list:
    return [s for s in samples_for(opdef) if isinstance(s, Sample)]
