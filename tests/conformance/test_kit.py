"""The conformance kit itself: it catches wrong ops, and it picks up a plugin's ops with no new test code."""
from __future__ import annotations

import re
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import plugtorch
from plugtorch.core.registry import OpDef
from plugtorch.testing import (
    ConformanceError,
    Sample,
    Waiver,
    bare_backend,
    check_coverage,
    check_forward,
    check_gradcheck,
    kit,
    remove_backend,
)
from plugtorch.testing.kit import check_float32

pytest_plugins = ["pytester"]


def _triple(x):
    return x * 3


def _good_samples(g):
    return [Sample((g.randn(2, 3),), ref=lambda a: a * 3),
            Sample((np.asarray(1.5),), ref=lambda a: a * 3),
            Sample((np.zeros((0, 2)),), ref=lambda a: a * 3)]


def test_a_correct_plugin_op_passes_every_check(backend):
    op = OpDef("kit_triple", decompose=_triple, samples=_good_samples)
    items = _good_samples(plugtorch.testing.SampleGen(op.name))
    check_coverage(op, items)
    for s in items:
        assert check_forward(op, s, backend) == ["numpy"]
        check_float32(op, s, backend)
        check_gradcheck(op, s, backend)


def test_a_wrong_forward_is_reported_naming_op_sample_and_backend(backend):
    op = OpDef("kit_wrong", decompose=lambda x: x * 3 + 1e-6)
    with pytest.raises(ConformanceError, match=r"op 'kit_wrong', sample \[2x3\], backend '" + backend):
        check_forward(op, Sample((np.ones((2, 3)),), ref=lambda a: a * 3), backend)


def test_a_wrong_derivative_fails_gradcheck(backend):
    from plugtorch.core.dispatch import call_op

    bad = OpDef("kit_square", decompose=lambda x: x * x, derivative=lambda ctx, g: g * ctx.saved[0],
                save=("inputs",))  # should be 2 * x * g
    sample = Sample((np.array([0.5, -1.0, 2.0]),), call=lambda m, x: call_op(bad, (x,)))
    with pytest.raises(plugtorch.autograd.GradcheckError, match="Jacobian mismatch"):
        check_gradcheck(bad, sample, backend)


def test_a_dtype_upcast_is_caught_without_torch(backend):
    op = OpDef("kit_upcast", decompose=lambda x: x.double() * 2)
    with pytest.raises(ConformanceError, match="float64 although every input is float32"):
        check_float32(op, Sample((np.ones(3),)), backend)


def test_an_op_without_samples_fails_naming_the_op():
    op = OpDef("kit_nosamples", decompose=_triple, plugin="someplugin")
    with pytest.raises(ConformanceError, match="op 'kit_nosamples' .*someplugin.* has no conformance samples"):
        check_coverage(op, [])


def test_missing_0d_and_empty_samples_fail_unless_waived():
    op = OpDef("kit_partial", decompose=_triple, derivative=lambda ctx, g: g * 3)
    only_2d = [Sample((np.ones((2, 2)),))]
    with pytest.raises(ConformanceError, match="no sample with a 0-d input"):
        check_coverage(op, only_2d)
    with pytest.raises(ConformanceError, match="no sample with an empty input"):
        check_coverage(op, only_2d + [Sample((np.asarray(1.0),))])
    with pytest.raises(ConformanceError, match="no sample checks its gradient"):
        check_coverage(op, [Sample((np.asarray(1.0),), grad=False), Sample((np.ones((0,)),), grad=False)])
    assert check_coverage(op, only_2d + [Waiver("zero_dim", "defined on matrices only"),
                                         Waiver("empty", "defined on non-empty matrices only")])


def test_an_invalid_input_sample_must_raise_the_stated_error(backend):
    op = OpDef("kit_lenient", decompose=lambda x: x)
    with pytest.raises(ConformanceError, match="expected RuntimeError .* nothing was raised"):
        check_forward(op, Sample((np.ones(2),), raises=RuntimeError), backend)


def test_bare_backend_has_the_primitives_but_no_fused_kernels():
    reg = plugtorch.get_registry()
    name = bare_backend("numpy")
    try:
        bare = reg.backends[name]
        assert "softmax" in reg.backends["numpy"].kernels
        assert "softmax" not in bare.kernels and "exp" in bare.kernels
        x = plugtorch.tensor([[1.0, 2.0, 3.0]], device=name, requires_grad=True)
        y = plugtorch.softmax(x, 1)
        assert y.device.type == name
        # the decomposition ran, as one node differentiated by softmax's own rule
        assert y.grad_fn.op == "softmax"
        y[0, 0].backward()
        ref = plugtorch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        plugtorch.softmax(ref, 1)[0, 0].backward()
        np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    finally:
        remove_backend(name)
    assert name not in reg.backends and "plugtorch.testing" not in reg.plugins


def test_a_plugins_op_is_picked_up_by_the_suite_with_no_new_test_code(pytester, monkeypatch):
    pytester.makepyfile(kit_demo_plugin=textwrap.dedent('''
        import numpy as np
        from plugtorch.core.dispatch import call_op
        from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl
        from plugtorch.core.registry import OpDef
        from plugtorch.testing import Sample

        PLUGTORCH_CONTRACT = CONTRACT_VERSION

        def _samples(g):
            return [Sample((g.randn(2, 3),), ref=lambda a: a * 3),
                    Sample((np.asarray(2.0),), ref=lambda a: a * 3),
                    Sample((np.zeros((0, 3)),), ref=lambda a: a * 3)]

        @hookimpl
        def plugtorch_register(registrar):
            registrar.add_op(OpDef("demo_triple", decompose=lambda x: x * 3, samples=_samples))
            registrar.add_op(OpDef("demo_unsampled", decompose=lambda x: x + 1))
    '''))
    pytester.makepyfile(test_suite="from plugtorch.testing.conformance import *  # noqa\n")
    monkeypatch.setenv("PLUGTORCH_PLUGINS", "kit_demo_plugin")
    monkeypatch.setenv("PLUGTORCH_CONFORMANCE_BACKENDS", "numpy")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess("-v", "-k", "demo_", "-p", "no:cacheprovider")
    # the op without samples is a failure naming it; the sampled op runs every check and passes
    result.stdout.fnmatch_lines(["*test_forward?numpy-demo_triple-0*PASSED*"])
    result.stdout.fnmatch_lines(["*test_float32?numpy-demo_triple-0*PASSED*"])
    result.stdout.fnmatch_lines(["*test_gradcheck?numpy-demo_triple-0*PASSED*"])
    result.stdout.fnmatch_lines(["*test_op_has_samples?demo_unsampled*FAILED*"])
    result.stdout.fnmatch_lines(["*op 'demo_unsampled' (from plugin 'kit_demo_plugin') has no conformance samples*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and outcomes.get("passed", 0) >= 10


def test_an_output_on_another_backend_is_caught():
    name = bare_backend("numpy")
    try:
        op = OpDef("kit_default_backend", decompose=lambda x: plugtorch.zeros(x.shape))  # forgets device=
        with pytest.raises(ConformanceError, match="is on backend 'numpy', not on the inputs' backend 'numpy_bare'"):
            check_forward(op, Sample((np.ones(2),), ref=np.zeros_like), name)
    finally:
        remove_backend(name)


def test_a_kernel_that_assumes_row_major_memory_is_caught(backend):
    from plugtorch.core.dispatch import wrap
    from plugtorch.testing import check_noncontiguous

    def reads_raw_memory(x):  # the classic GPU-kernel bug: ignore the strides, walk the buffer
        data = x._data
        itemsize = data.itemsize
        strides = tuple(int(np.prod(data.shape[i + 1:])) * itemsize for i in range(data.ndim))
        return wrap(np.lib.stride_tricks.as_strided(data, data.shape, strides).copy(), x._backend)
    op = OpDef("kit_rawmemory", decompose=reads_raw_memory)
    with pytest.raises(ConformanceError, match="with non-contiguous inputs"):
        check_noncontiguous(op, Sample((np.arange(6.0).reshape(2, 3) + 1,), grad=False), backend)


def test_an_op_that_writes_into_its_input_is_caught(backend):
    def scribble(x):
        x._backend.primitives["setitem"](x._data, (Ellipsis,), 0.0)
        return x * 1
    op = OpDef("kit_scribble", decompose=scribble)
    with pytest.raises(ConformanceError, match="modified its input 0"):
        check_forward(op, Sample((np.ones(3),), ref=np.zeros_like, grad=False), backend)


def test_the_reference_torch_is_the_one_pyproject_pins():
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pinned = re.search(r'"torch==(\d+)\.(\d+)', text)
    assert pinned and tuple(map(int, pinned.groups())) == kit.REFERENCE_TORCH


def test_a_sample_an_older_reference_torch_cannot_compute_is_skipped_saying_why():
    def compute():
        raise RuntimeError("derivative for aten::aminmax is not implemented")
    older = types.SimpleNamespace(__version__="2.11.0+cu130")
    with pytest.raises(pytest.skip.Exception, match=r"op 'aminmax', sample \[0\]: the reference torch 2\.11\.0 "
                       r"cannot compute this sample \(RuntimeError: derivative for aten::aminmax is not "
                       r"implemented\); the samples are written against torch 2\.13"):
        kit._on_torch(older, "op 'aminmax', sample [0]", compute)
    assert kit._on_torch(older, "op", lambda: 3) == 3
    for current in ("2.13.0+cpu", "2.14.1", "3.0.0"):  # there, the error is the sample's or the op's
        with pytest.raises(RuntimeError, match="aminmax"):
            kit._on_torch(types.SimpleNamespace(__version__=current), "op", compute)


def _out_variant_case():
    opdef = plugtorch.get_registry().ops["add"]
    return opdef, Sample((np.arange(6.0).reshape(2, 3), np.ones((2, 3))))


def test_the_numpy_backends_out_variants_pass(backend):
    opdef, sample = _out_variant_case()
    assert kit.check_out_variant(opdef, sample, backend)


@pytest.mark.parametrize("flaw", ["wrong values", "writes into a buffer too small"])
def test_a_flawed_out_variant_is_caught(backend, monkeypatch, flaw):
    b = plugtorch.get_registry().backends[backend]

    def wrong(x, y, *, out):
        return np.subtract(x, y, out=out)

    def sloppy(x, y, *, out):  # writes what fits, then complains too late
        out[...] = np.add(x, y)[tuple(slice(0, n) for n in out.shape)]
        if out.shape != np.broadcast_shapes(x.shape, y.shape):
            raise ValueError("shape mismatch")
        return out

    monkeypatch.setitem(b.out_variants, "add", wrong if flaw == "wrong values" else sloppy)
    opdef, sample = _out_variant_case()
    message = "wrote .* into its buffer" if flaw == "wrong values" else r"wrote into a buffer of shape \(1, 3\)"
    with pytest.raises(ConformanceError, match=rf"op 'add', .*backend '{backend}', out= variant of primitive "
                                               rf"'add': {message}"):
        kit.check_out_variant(opdef, sample, backend)


def test_an_out_variant_that_accepts_a_buffer_too_small_is_caught(backend, monkeypatch):
    b = plugtorch.get_registry().backends[backend]

    def lenient(x, y, *, out):
        out[...] = np.add(x, y)[: out.shape[0]]
        return out

    monkeypatch.setitem(b.out_variants, "add", lenient)
    opdef, sample = _out_variant_case()
    with pytest.raises(ConformanceError, match=r"given a buffer of shape \(1, 3\) for a result of shape \(2, 3\): "
                                               r"expected ValueError"):
        kit.check_out_variant(opdef, sample, backend)


def _channel_major(m, x, w):
    """conv2d's values in the layout plugtorch's conv2d had: (C, N, H, W) memory seen as NCHW."""
    return m.nn.functional.conv2d(x, w).transpose(0, 1).contiguous().transpose(0, 1)


def _conv_sample(g, **kw):
    return Sample((g.randn(2, 3, 5, 5), g.randn(4, 3, 3, 3)), grad=False, **kw)


def test_an_output_laid_out_unlike_torchs_is_caught(backend):
    # conv2d as it was: the right values, channel-major memory, so x.view(x.size(0), -1) failed
    torch = pytest.importorskip("torch")
    conv2d = plugtorch.get_registry().ops["conv2d"]
    g = plugtorch.testing.SampleGen("conv2d")
    with pytest.raises(ConformanceError, match=r"output 0 \(shape \[2, 4, 3, 3\]\) has strides "
                                               r"\(9, 18, 3, 1\), torch's \(36, 9, 3, 1\)"):
        kit.check_strides(conv2d, _conv_sample(g, call=_channel_major, torch_call=lambda m, x, w:
                                               m.nn.functional.conv2d(x, w)), backend, torch)
    with pytest.raises(ConformanceError, match=r"has is_contiguous\(\) False, torch's True"):
        kit.check_strides(conv2d, _conv_sample(g, call=_channel_major, torch_call=lambda m, x, w:
                                               m.nn.functional.conv2d(x, w)), backend, torch, contiguity_only=True)
    assert kit.check_strides(conv2d, _conv_sample(g), backend, torch)  # conv2d itself: torch's layout


def test_strides_are_compared_from_row_major_inputs_on_both_sides(backend):
    # torch.tensor keeps a transposed array's strides and plugtorch.tensor does not: an
    # elementwise op follows its input's layout on either side, so the inputs are made alike
    torch = pytest.importorskip("torch")
    neg = plugtorch.get_registry().ops["neg"]
    a = np.arange(12.0).reshape(3, 4).T
    assert kit.check_strides(neg, Sample((a,), grad=False), backend, torch)
