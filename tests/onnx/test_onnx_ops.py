"""plugtorch.onnx.export, op by op: each function and method form exported in a one-line model,
run by onnxruntime and compared with plugtorch's eager result; sizes under dynamic_axes; the
errors for what has no ONNX form."""
from __future__ import annotations

import io

import numpy as np
import pytest

import plugtorch
import plugtorch.nn as nn
import plugtorch.nn.functional as F
import plugtorch.onnx

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install plugtorch[onnx])")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: nothing to run the exported graphs")


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, y=None, z=None):
        return self.fn(x, y, z)


def _r(*shape, seed=0):
    return plugtorch.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _check(model, inputs, **kw):
    buf = io.BytesIO()
    plugtorch.onnx.export(model, tuple(inputs), buf, **kw)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    return sess


def _compare(sess, model, inputs):
    got = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), inputs)})
    with plugtorch.no_grad():
        want = _flat(model(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.numpy().dtype
        np.testing.assert_allclose(g, w.numpy(), atol=1e-5, rtol=1e-5)


def _flat(value):
    return [t for v in value for t in _flat(v)] if isinstance(value, (tuple, list)) else [value]


X, Y = _r(2, 3, 4), _r(2, 3, 4, seed=1)
CASES = {
    "add_alpha": (lambda x, y, z: plugtorch.add(x, y, alpha=2), [X, Y]),
    "arith": (lambda x, y, z: (x - y) * 3 / (y.abs() + 1) + x ** 2 - x.pow(3), [X, Y]),
    "reflected": (lambda x, y, z: 1 - x + 2 * x - 1 / (x.abs() + 1), [X]),
    "unary": (lambda x, y, z: plugtorch.sqrt(x.abs()) - plugtorch.erf(x) + (-x).exp() + x.abs().log1p().neg(), [X]),
    "activations": (lambda x, y, z: F.gelu(x, approximate="tanh") + F.leaky_relu(x, 0.2) + F.silu(x)
                    + plugtorch.sigmoid(x) * plugtorch.tanh(x) + x.relu(), [X]),
    "more_unary": (lambda x, y, z: plugtorch.rsqrt(x.abs() + 1) + x.sin() * x.cos() + x.floor() - x.ceil()
                   + (x.abs() + 1).reciprocal() + plugtorch.maximum(x, y) - plugtorch.minimum(x, y)
                   + (~(x > 0)).float(), [X, Y]),
    "unbind_T": (lambda x, y, z: (plugtorch.unbind(x, 1), x[0].T), [X]),
    "clamp": (lambda x, y, z: x.clamp(-0.5, 0.5) + plugtorch.clamp(x, min=0.1) + x.clamp(max=y) + F.relu6(x * 4)
              + F.hardtanh(x, -0.3, 0.2) + F.elu(x, 0.5), [X, Y]),
    "expand": (lambda x, y, z: x[:, :1].expand(-1, 3, -1) + x[:1].expand(x.size(0), 3, 4), [X]),
    "where": (lambda x, y, z: plugtorch.where(x > 0, x, y) + plugtorch.where(x > y, x, 0.0), [X, Y]),
    "masked_fill": (lambda x, y, z: x.masked_fill(y <= 0, -1.0).masked_fill(x == y, 2.0), [X, Y]),
    "compare": (lambda x, y, z: (x >= y).float() + (x != y).float() + (x < 0.5).float(), [X, Y]),
    "reduce": (lambda x, y, z: x.mean(1, keepdim=True) + x.sum(dim=(0, 1)) + x.mean() + plugtorch.sum(x, -1, True),
               [X]),
    "movement": (lambda x, y, z: x.permute(2, 0, 1).transpose(0, 1).contiguous().reshape(3, -1).t(), [X]),
    "flatten": (lambda x, y, z: plugtorch.flatten(x, 1, 2) + x.flatten(1) + x.view(2, 12), [X]),
    "matmul": (lambda x, y, z: x @ y.transpose(1, 2) + plugtorch.bmm(x, y.transpose(-2, -1)), [X, Y]),
    "addmm": (lambda x, y, z: plugtorch.addmm(x, y, z, beta=0.5, alpha=2), [_r(2, 5), _r(2, 3), _r(3, 5)]),
    "linear_3d": (lambda x, y, z: F.linear(x, y, z), [X, _r(5, 4), _r(5)]),
    "join": (lambda x, y, z: plugtorch.stack([x, y], 1).sum(1) + plugtorch.cat((x, y), dim=-1)[..., :4], [X, Y]),
    "split": (lambda x, y, z: x.chunk(2, dim=2)[1] * plugtorch.split(x, 1, dim=1)[0].chunk(2, dim=2)[0]
              + plugtorch.split(x, [1, 3], dim=-1)[0], [X]),
    "squeeze": (lambda x, y, z: x.unsqueeze(1).squeeze(1) + x.unsqueeze(-1).squeeze(), [X]),
    "getitem": (lambda x, y, z: (x[:, 1:3, ::2], x[..., -1], x[None, 0], x[1], x[:, -2:, None, 1]), [X]),
    "softmax": (lambda x, y, z: F.softmax(x, dim=-1) + F.log_softmax(x, -1) + x.softmax(1)
                + plugtorch.softmax(x, 0), [X]),
    "norms": (lambda x, y, z: F.layer_norm(x, (4,)) + F.layer_norm(x, (3, 4), eps=1e-3)
              + F.batch_norm(x, y, z, training=False), [X, _r(3), _r(3).abs() + 0.5]),
    "conv": (lambda x, y, z: F.conv2d(x, y, stride=2, padding=1, dilation=2)
             + F.conv2d(x, y, padding=(1, 1), stride=2, dilation=2), [_r(2, 4, 9, 9), _r(6, 4, 3, 3)]),
    "conv_same_groups": (lambda x, y, z: F.conv1d(x, y, z, padding="same", groups=2),
                         [_r(2, 4, 7), _r(6, 2, 4), _r(6)]),
    "pools": (lambda x, y, z: (F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
                               + F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                               F.adaptive_avg_pool2d(x, (4, 4)), F.avg_pool2d(x, 2)), [_r(2, 3, 8, 8)]),
    "embedding": (lambda x, y, z: F.embedding(x, y) * 2, [plugtorch.tensor([[0, 2], [3, 1]]), _r(4, 5)]),
    "casts": (lambda x, y, z: x.float() / 2 + x.to(plugtorch.float32).sum(), [plugtorch.tensor([[1, 2], [3, 4]])]),
    "sdpa_causal": (lambda x, y, z: F.scaled_dot_product_attention(x, y, z, is_causal=True, scale=0.3),
                    [_r(2, 2, 5, 4), _r(2, 2, 5, 4, seed=1), _r(2, 2, 5, 4, seed=2)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op(name):
    fn, inputs = CASES[name]
    model = Fn(fn)
    _compare(_check(model, inputs), model, inputs)


def test_layers():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding="same"), nn.BatchNorm2d(4), nn.ReLU6(), nn.MaxPool2d(2),
                          nn.Hardtanh(-2, 1), nn.ELU(0.5), nn.LeakyReLU(0.1), nn.SiLU(), nn.AvgPool2d(2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 4), nn.Tanh(), nn.Identity(),
                          nn.Linear(4, 3), nn.Sigmoid(), nn.Softmax(-1)).eval()
    x = _r(2, 3, 8, 8)
    _compare(_check(model, [x]), model, [x])


class PositionalEncoding(nn.Module):
    """word_language_model's: a buffer sliced to the input's length, read with x.size(0)."""

    def __init__(self, d=4, max_len=50):
        super().__init__()
        self.register_buffer("pe", plugtorch.randn(max_len, 1, d))
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        n, b = x.size(0), x.shape[1]
        return self.lin(x).view(n * b, -1), x.view(n, b, 2, 2).flatten(2)


def _export_bytes(model, **kw):
    buf = io.BytesIO()
    plugtorch.onnx.export(model, (_r(5, 3, 4),), buf, **kw)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    return buf.getvalue()


def test_sizes_under_dynamic_axes_stay_symbolic():
    model = PositionalEncoding().eval()
    data = _export_bytes(model, input_names=["x"], output_names=["y", "z"],
                         dynamic_axes={"x": {0: "seq", 1: "batch"}, "y": [0]})
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for shape in [(5, 3, 4), (7, 2, 4), (1, 1, 4)]:
        _compare(sess, model, [_r(*shape, seed=3)])
    graph = onnx.load_from_string(data).graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*graph.input, *graph.output]}
    assert dims == {"x": ["seq", "batch", 4], "y": ["y_dynamic_axes_1", 4], "z": ["z_dynamic_axes_1",
                                                                              "z_dynamic_axes_2", 4]}


def test_splitting_an_input_along_a_fixed_axis_under_dynamic_axes():
    model = Fn(lambda x, y, z: x.chunk(2, dim=2)[1] + plugtorch.flatten(x, 1, 2)[:, None, :2])
    sess = _check(model, [X], input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    _compare(sess, model, [_r(5, 3, 4)])


def test_arithmetic_on_symbolic_sizes():
    model = Fn(lambda x, y, z: x / x.size(-1) ** 0.5 + x.size(0) * 2 - (x.shape[-1] // 2))
    sess = _check(model, [X], input_names=["x"], dynamic_axes={"x": [0, 2]})
    for shape in [(2, 3, 4), (3, 3, 9)]:
        _compare(sess, model, [_r(*shape)])


def test_without_dynamic_axes_sizes_are_constants():
    graph = onnx.load_from_string(_export_bytes(PositionalEncoding().eval())).graph
    assert "Shape" not in {n.op_type for n in graph.node}
    assert [d.dim_value for d in graph.output[0].type.tensor_type.shape.dim] == [15, 4]


@pytest.mark.parametrize("fn,inputs,dynamic,match", [
    (lambda x, y, z: plugtorch.cumsum(x, 0), [X], None, r"no ONNX mapping for op 'cumsum' \(node %cumsum"),
    (lambda x, y, z: x[y > 0], [X, Y], None, r"op 'getitem' with a tensor or list index"),
    (lambda x, y, z: x.chunk(2, 0)[0], [X], {"x": [0]}, r"op 'chunk' along dim 0, which dynamic_axes"),
    (lambda x, y, z: F.max_pool2d(x, 2, return_indices=True)[0], [_r(1, 1, 4, 4)], None,
     r"op 'max_pool2d' with return_indices=True"),
    (lambda x, y, z: F.adaptive_avg_pool2d(x, 3), [_r(1, 1, 4, 4)], None, r"op 'adaptive_avg_pool2d' to output size"),
    (lambda x, y, z: F.dropout(x, 0.5), [X], None, r"op 'dropout' with training=True"),
    (lambda x, y, z: x.squeeze(), [_r(1, 3, 1)], {"x": [0]}, r"op 'squeeze' of dims \[0\], which dynamic_axes"),
    (lambda x, y, z: x if x.sum() > 0 else y, [X, Y], None, r"Fn.forward with plugtorch.fx, which could not trace it"),
])
def test_what_has_no_onnx_form_is_an_error(fn, inputs, dynamic, match):
    with pytest.raises(RuntimeError, match=match):
        plugtorch.onnx.export(Fn(fn), tuple(inputs), io.BytesIO(), input_names=["x", "y"][:len(inputs)],
                              dynamic_axes=dynamic)


def test_a_layer_without_mapping_is_named():
    model = nn.Sequential(nn.Linear(4, 4), nn.TransformerEncoderLayer(4, 2, 8))
    with pytest.raises(RuntimeError, match=r"op 'TransformerEncoderLayer' \(no ONNX mapping for this layer\)"):
        plugtorch.onnx.export(model, (_r(2, 3, 4),), io.BytesIO())


def test_dynamic_axes_naming_nothing_warns_as_torch():
    with pytest.warns(UserWarning, match="Provided key z for dynamic axes is not a valid input/output name"):
        plugtorch.onnx.export(Fn(lambda x, y, z: x + 1), (X,), io.BytesIO(), input_names=["x"],
                              dynamic_axes={"x": [0], "z": [0]})


def test_dynamic_axes_that_must_agree_but_do_not_is_an_error():
    with pytest.raises(RuntimeError, match=r"one longer along each of dynamic_axes failed \(axes that must agree"):
        plugtorch.onnx.export(Fn(lambda x, y, z: x + y), (X, Y), io.BytesIO(), input_names=["x", "y"],
                              dynamic_axes={"x": [0]})


def test_keyword_arguments_become_inputs():
    model = Fn(lambda x, y, z: x * y if z is None else x)
    for args, kw in [((X,), {"kwargs": {"y": Y}}), ((X, {"y": Y}), {})]:  # kwargs=, and torch's trailing dict
        sess = _check(model, args, **kw)
        assert [i.name for i in sess.get_inputs()] == ["x", "y"]
        _compare(sess, model, [X, Y])
