"""plugtorch.onnx.export: models exported, checked by onnx's checker, run by onnxruntime and compared
with plugtorch's own output and with PyTorch's export of the same weights."""
from __future__ import annotations

import importlib.util
import io
import math
import pathlib
import sys

import numpy as np
import pytest

import plugtorch
import plugtorch.nn as nn
import plugtorch.nn.functional as F
import plugtorch.onnx

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install plugtorch[onnx])")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: nothing to run the exported graphs")
# PyTorch's own export, the reference, is its TorchScript one, which it marks deprecated
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(6, 16), nn.Linear(16, 4), nn.Dropout(0.5)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.drop(plugtorch.relu(self.fc1(x)))), dim=1)


def _mnist_net():
    """examples/pytorch_examples_mnist.py's CNN (the example's own class)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_examples_mnist.py"
    spec = importlib.util.spec_from_file_location("pytorch_examples_mnist", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # where inspect.getsource looks for the class's file
    spec.loader.exec_module(module)
    return module.Net


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block with a strided downsample, then a pooled classifier."""

    def __init__(self, cin=4, cout=8):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cout, 3)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = F.relu(out + self.downsample(x))
        out = F.avg_pool2d(out, 2, stride=1) + F.adaptive_avg_pool2d(out, (2, 2)).mean(dim=(2, 3), keepdim=True)
        return self.fc(self.pool(out).view(out.size(0), -1))


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block: attention written out with a padding mask and through
    F.scaled_dot_product_attention, GELU feed-forward, embeddings with learned positions."""

    def __init__(self, vocab=20, d=16, heads=2, seq=6):
        super().__init__()
        self.heads = heads
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(plugtorch.randn(seq, d) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.act, self.drop = nn.GELU(), nn.Dropout(0.1)

    def forward(self, tokens):
        b, t = tokens.size(0), tokens.shape[1]  # fx cannot unpack a traced shape, as torch.fx cannot
        x = self.emb(tokens) + self.pos[:t]
        qkv = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q, k, v = [z.reshape(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v)]
        scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
        pad = (tokens == 0)[:, None, None, :]
        scores = scores.masked_fill(pad, float("-inf"))
        manual = F.softmax(scores, dim=-1) @ v
        fused = F.scaled_dot_product_attention(q, k, v, attn_mask=pad.logical_not())
        att = (manual + fused) * 0.5
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, t, -1)))
        h = self.ln2(x)
        x = x + self.ff2(self.act(self.ff1(h)))
        parts = plugtorch.split(x, [6, 10], dim=-1)
        return plugtorch.cat([plugtorch.tanh(parts[0]), plugtorch.sigmoid(parts[1]).pow(2)], dim=-1).sum(-1)


def _export(model, args, **kw):
    buf = io.BytesIO()
    plugtorch.onnx.export(model, args, buf, **kw)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def _run(session, *arrays):
    return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})


def _ours(model, *xs):
    with plugtorch.no_grad():
        return model(*xs).numpy()


def _torch_export(torch, ours, theirs, args, **kw):
    """PyTorch's (TorchScript) export of the same weights, run by onnxruntime."""
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    theirs.eval()
    buf = io.BytesIO()
    torch.onnx.export(theirs, tuple(torch.tensor(a.numpy()) for a in args), buf, dynamo=False, **kw)
    return ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def _torch_version(torch, cls):
    """``cls`` written against torch: the same source with torch's modules."""
    import inspect
    ns = {"nn": torch.nn, "F": torch.nn.functional, "plugtorch": torch, "torch": torch, "math": math}
    exec(inspect.getsource(cls), ns)
    return ns[cls.__name__]


def _images(n, c=1, s=12, seed=0):
    return plugtorch.tensor(np.random.default_rng(seed).standard_normal((n, c, s, s)).astype(np.float32))


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet_block"])
def test_models_match_eager_and_torch_export(torch, name):
    plugtorch.manual_seed(0)
    if name == "mlp":
        model, x = MLP(), plugtorch.randn(3, 6)
    elif name == "cnn":
        model, x = _mnist_net()(), _images(3, 1, 28)
    else:
        model, x = BasicBlock(), _images(3, 4, 8)
        for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):  # running stats not 0/1
            bn.running_mean.copy_(plugtorch.randn(bn.num_features) * 0.1)
            bn.running_var.copy_(plugtorch.rand(bn.num_features) + 0.5)
    model.train()
    _, sess = _export(model, (x,), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": [0]})
    assert model.training, "export puts the model back in the mode it was in"
    model.eval()
    for n in (3, 1):  # the batch size is symbolic
        xb = x[:n]
        (got,) = _run(sess, xb.numpy())
        np.testing.assert_allclose(got, _ours(model, xb), atol=1e-5, rtol=1e-5)
    theirs = _torch_version(torch, type(model))()  # the class's source, run with torch's modules
    ref = _torch_export(torch, model, theirs, (x,), input_names=["x"])
    np.testing.assert_allclose(_run(sess, x.numpy())[0], _run(ref, x.numpy())[0], atol=1e-5, rtol=1e-5)


def test_transformer_block_matches_eager_and_torch_export(torch):
    plugtorch.manual_seed(0)
    model = EncoderBlock().eval()
    tokens = plugtorch.randint(1, 20, (3, 6))
    tokens[0, 4:] = 0  # padding
    kw = dict(input_names=["tokens"], dynamic_axes={"tokens": {0: "batch"}})
    proto, sess = _export(model, (tokens,), **kw)
    ops = {n.op_type for n in proto.graph.node}
    assert {"LayerNormalization", "Gelu", "Gather", "Softmax", "Where", "Split", "MatMul"} <= ops
    ref = _torch_export(torch, model, _torch_version(torch, EncoderBlock)(), (tokens,), opset_version=17, **kw)
    more = plugtorch.randint(1, 20, (5, 6))
    more[1, 2:] = 0
    for t in (tokens, more):  # the batch size is symbolic
        (got,) = _run(sess, t.numpy())
        np.testing.assert_allclose(got, _ours(model, t), atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got, _run(ref, t.numpy())[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
def test_older_opsets_decompose(opset):
    plugtorch.manual_seed(0)
    model = EncoderBlock().eval()
    tokens = plugtorch.randint(1, 20, (2, 6))
    proto, sess = _export(model, (tokens,), opset_version=opset)
    assert proto.opset_import[0].version == opset
    assert "Gelu" not in {n.op_type for n in proto.graph.node}
    np.testing.assert_allclose(_run(sess, tokens.numpy())[0], _ours(model, tokens), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers(mode):
    plugtorch.manual_seed(0)

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 5)
            self.rnn = getattr(nn, mode)(5, 7, 2, bidirectional=(mode == "GRU"))
            self.out = nn.Linear(14 if mode == "GRU" else 7, 10)

        def forward(self, x, hidden):
            y, hidden = self.rnn(self.emb(x), hidden)
            return F.log_softmax(self.out(y).view(-1, 10), dim=1), hidden

    model = Seq().eval()
    x = plugtorch.randint(0, 10, (4, 3))
    h = plugtorch.randn(4 if mode == "GRU" else 2, 3, 7)
    hidden = (h, plugtorch.randn(2, 3, 7)) if mode == "LSTM" else h
    _, sess = _export(model, (x, hidden))
    got = _run(sess, x.numpy(), *[t.numpy() for t in (hidden if mode == "LSTM" else (hidden,))])
    with plugtorch.no_grad():
        out, hid = model(x, hidden)
    want = [out] + (list(hid) if mode == "LSTM" else [hid])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-5, rtol=1e-5)


def test_unmapped_op_is_an_error_naming_it():
    class M(nn.Module):
        def forward(self, x):
            return plugtorch.cumsum(x, 0)

    with pytest.raises(RuntimeError, match=r"no ONNX mapping for op 'cumsum' \(node %cumsum"):
        plugtorch.onnx.export(M(), (plugtorch.randn(3),), io.BytesIO())


def test_arguments_torch_refuses_or_we_do_not_support():
    m = MLP()
    x = plugtorch.randn(2, 6)
    with pytest.raises(ValueError, match="training mode is not supported"):
        plugtorch.onnx.export(m, (x,), io.BytesIO(), training=plugtorch.onnx.TrainingMode.TRAINING)
    with pytest.raises(ValueError, match="training mode is not supported"):
        plugtorch.onnx.export(m, (x,), io.BytesIO(), training=plugtorch.onnx.TrainingMode.PRESERVE)
    m.eval()
    plugtorch.onnx.export(m, (x,), io.BytesIO(), training=plugtorch.onnx.TrainingMode.PRESERVE)
    with pytest.raises(ValueError, match="opset_version 11 is not supported; use 13 to 20"):
        plugtorch.onnx.export(m, (x,), io.BytesIO(), opset_version=11)
    with pytest.raises(ValueError, match="dynamic_shapes= is not supported"):
        plugtorch.onnx.export(m, (x,), io.BytesIO(), dynamic_shapes={"x": {0: "b"}})


def test_export_params_names_and_return(tmp_path):
    m = MLP().eval()
    x = plugtorch.randn(2, 6)
    assert not plugtorch.onnx.is_in_onnx_export()
    program = plugtorch.onnx.export(m, x)  # dynamo=True (torch's default) returns the program
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [i.name for i in program.model_proto.graph.initializer] == names
    program.save(tmp_path / "m.onnx")
    assert onnx.load(str(tmp_path / "m.onnx")).graph.node
    assert plugtorch.onnx.export(m, (x,), tmp_path / "n.onnx", dynamo=False) is None
    proto, _ = _export(m, (x,), export_params=False, input_names=["inp"], output_names=["out"])
    assert not proto.graph.initializer
    assert [i.name for i in proto.graph.input] == ["inp", *names]
    assert [o.name for o in proto.graph.output] == ["out"]
    assert [(n.op_type, n.name, list(n.output)) for n in proto.graph.node][:2] == [
        ("Gemm", "/fc1/Gemm", ["fc1"]), ("Relu", "/relu/Relu", ["relu"])]
    proto, _ = _export(m, (x,), keep_initializers_as_inputs=True)
    assert "Gemm" in repr(program)
    assert len(proto.graph.input) == 5 and len(proto.graph.initializer) == 4


def test_is_in_onnx_export_during_export():
    seen = []

    class M(nn.Module):
        def forward(self, x):
            seen.append(plugtorch.onnx.is_in_onnx_export())
            return x * 2

    plugtorch.onnx.export(M(), (plugtorch.randn(2),), io.BytesIO())
    assert seen and all(seen)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_batch_first_bidirectional_without_state(mode):
    rnn = getattr(nn, mode)(3, 5, 2, batch_first=True, bidirectional=True)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            y, h = self.rnn(x)
            return y, h

    model = M().eval()
    _, sess = _export(model, (plugtorch.randn(2, 4, 3),), input_names=["x"], dynamic_axes={"x": {0: "b", 1: "t"}})
    for shape in [(2, 4, 3), (3, 6, 3)]:  # batch and length symbolic
        x = plugtorch.randn(*shape)
        got = _run(sess, x.numpy())
        with plugtorch.no_grad():
            y, h = model(x)
        want = [y, *h] if mode == "LSTM" else [y, h]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layer,inputs", [(nn.Linear(6, 3), (plugtorch.randn(2, 6),)),
                                          (nn.GRU(3, 4), (plugtorch.randn(5, 2, 3), plugtorch.randn(1, 2, 4)))],
                         ids=["Linear", "GRU"])
def test_a_layer_by_itself(layer, inputs):
    proto, sess = _export(layer.eval(), inputs)
    if isinstance(layer, nn.Linear):  # named as in the layer's own state_dict
        assert [i.name for i in proto.graph.initializer] == ["weight", "bias"]
    got = _run(sess, *[t.numpy() for t in inputs])
    with plugtorch.no_grad():
        want = layer(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=1e-5, rtol=1e-5)
