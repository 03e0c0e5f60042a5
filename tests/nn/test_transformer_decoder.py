"""nn.Transformer, TransformerDecoderLayer and TransformerDecoder against torch's: torch's state_dict
loaded, then outputs and the gradients of the inputs and of every parameter compared in float64
(dropout 0: torch's dropout masks cannot be reproduced), in training and evaluation mode."""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn

from .helpers import copy_weights
from .test_signatures import check

# torch and plugtorch both warn that a bool key padding mask beside a float attention mask is deprecated
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched")

D, H, FF = 8, 2, 16  # d_model, nhead, dim_feedforward: small, so each case runs in milliseconds
N, S, T = 3, 5, 4  # batch, source length, target length


@pytest.fixture
def torch(torch):
    """PyTorch on one thread: on a busy machine its second thread costs more than it gives at these sizes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(before)


def _activation(kw, torch):
    """The same activation for both frameworks: a string passes as is, "silu" stands for a callable."""
    if kw.get("activation") != "silu":
        return kw, kw
    return {**kw, "activation": F.silu}, {**kw, "activation": torch.nn.functional.silu}


def _pair(torch, cls, *args, **kw):
    ours_kw, their_kw = _activation(kw, torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note that its nested-tensor fast path is off
        theirs = getattr(torch.nn, cls)(*args, **their_kw, dtype=torch.float64)
    ours = getattr(nn, cls)(*args, **ours_kw, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    return ours, theirs


def _key_padding(rng, n, length):
    m = rng.random((n, length)) < 0.4
    m[:, 0] = False  # every row keeps a key: a fully masked row is NaN in torch
    return m


def _masks(rng, which):
    """The forward's mask arguments as NumPy arrays (and the causal hints as bools)."""
    out = {}
    if "causal" in which:
        out["tgt_mask"] = np.triu(np.full((T, T), -np.inf), 1)
        out["tgt_is_causal"] = True
    if "padding" in which:
        out["src_key_padding_mask"] = _key_padding(rng, N, S)
        out["tgt_key_padding_mask"] = _key_padding(rng, N, T)
        out["memory_key_padding_mask"] = out["src_key_padding_mask"]
    if "attn" in which:
        m = rng.random((T, S)) < 0.3
        m[:, 0] = False
        out["memory_mask"] = m
        out["src_mask"] = rng.standard_normal((S, S))  # a float mask is added to the scores
    return out


def _compare(torch, ours, theirs, inputs, call, mode, no_grad=False):
    """Run both models on the same inputs; compare outputs, input gradients and parameter gradients."""
    getattr(ours, mode)()
    getattr(theirs, mode)()
    conv_p = {k: plugtorch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()}
    conv_t = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()}
    if no_grad:
        with plugtorch.no_grad(), torch.no_grad():
            y_p = ours(*(plugtorch.tensor(x) for x in inputs), **conv_p)
            y_t = theirs(*(torch.tensor(x) for x in inputs), **conv_t)
        np.testing.assert_allclose(y_p.numpy(), y_t.numpy(), rtol=1e-9, atol=1e-10)
        return
    xs_p = [plugtorch.tensor(x, requires_grad=True) for x in inputs]
    xs_t = [torch.tensor(x, requires_grad=True) for x in inputs]
    y_p, y_t = ours(*xs_p, **conv_p), theirs(*xs_t, **conv_t)
    np.testing.assert_allclose(y_p.detach().numpy(), y_t.detach().numpy(), rtol=1e-9, atol=1e-10)
    up = np.random.default_rng(1).standard_normal(tuple(y_t.shape))
    (y_p * plugtorch.tensor(up)).sum().backward()
    (y_t * torch.tensor(up)).sum().backward()
    for a, b in zip(xs_p, xs_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-10)
    t_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(t_params)
    for name, p in ours.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)


def _seq(rng, length, batch_first, batched=True):
    if not batched:
        return rng.standard_normal((length, D))
    return rng.standard_normal((N, length, D) if batch_first else (length, N, D))


CONFIGS = [dict(), dict(batch_first=True), dict(norm_first=True, activation="gelu"),
           dict(batch_first=True, norm_first=True, bias=False), dict(activation="silu", layer_norm_eps=1e-3)]
MASKS = ["none", "causal", "padding", "causal+padding+attn"]


def _name(kw):
    return "-".join(f"{k}={v}" for k, v in kw.items()) or "default"


# every configuration with every mask set, in training and evaluation mode by turns
CASES = [(kw, masks, ("train", "eval")[(i + j) % 2]) for i, kw in enumerate(CONFIGS) for j, masks in enumerate(MASKS)]


@pytest.mark.parametrize("kw,masks,mode", CASES, ids=[f"{_name(kw)}-{m}-{mode}" for kw, m, mode in CASES])
def test_transformer_matches_torch(torch, kw, masks, mode):
    rng = np.random.default_rng(0)
    ours, theirs = _pair(torch, "Transformer", D, H, 2, 2, FF, 0.0, **kw)
    bf = kw.get("batch_first", False)
    _compare(torch, ours, theirs, (_seq(rng, S, bf), _seq(rng, T, bf)), _masks(rng, masks), mode)


@pytest.mark.parametrize("kw", [dict(batch_first=True), dict(batch_first=True, norm_first=True)], ids=str)
def test_transformer_inference_matches_torchs_fast_path(torch, kw):
    # Under no_grad in evaluation torch's batch_first encoder takes its fused path (nested tensors
    # for the padding); the padded memory positions are masked out of the decoder either way.
    rng = np.random.default_rng(2)
    ours, theirs = _pair(torch, "Transformer", D, H, 2, 2, FF, 0.0, **kw)
    _compare(torch, ours, theirs, (_seq(rng, S, True), _seq(rng, T, True)), _masks(rng, "causal+padding"),
             "eval", no_grad=True)


@pytest.mark.parametrize("masks", ["none", "causal+padding+attn"])
@pytest.mark.parametrize("kw", CONFIGS[:4], ids=_name)
def test_decoder_layer_matches_torch(torch, kw, masks):
    rng = np.random.default_rng(3)
    ours, theirs = _pair(torch, "TransformerDecoderLayer", D, H, FF, 0.0, **kw)
    call = {k: v for k, v in _masks(rng, masks).items() if not k.startswith("src")}
    bf = kw.get("batch_first", False)
    _compare(torch, ours, theirs, (_seq(rng, T, bf), _seq(rng, S, bf)), call, "train")


def test_decoder_stack_with_norm_matches_torch(torch):
    rng = np.random.default_rng(4)
    layer_p, layer_t = _pair(torch, "TransformerDecoderLayer", D, H, FF, 0.0, norm_first=True)
    ours = nn.TransformerDecoder(layer_p, 3, norm=nn.LayerNorm(D, dtype=plugtorch.float64))
    theirs = torch.nn.TransformerDecoder(layer_t, 3, norm=torch.nn.LayerNorm(D, dtype=torch.float64))
    copy_weights(ours, theirs)
    call = _masks(rng, "causal+padding")
    del call["src_key_padding_mask"]
    _compare(torch, ours, theirs, (_seq(rng, T, False), _seq(rng, S, False)), call, "train")
    del call["tgt_is_causal"]  # the causal mask without the hint: torch detects it, the result is the same
    _compare(torch, ours, theirs, (_seq(rng, T, False), _seq(rng, S, False)), call, "eval")


def test_unbatched_inputs_match_torch(torch):
    rng = np.random.default_rng(5)
    ours, theirs = _pair(torch, "Transformer", D, H, 1, 2, FF, 0.0)
    call = {"tgt_mask": np.triu(np.full((T, T), -np.inf), 1), "memory_key_padding_mask": np.arange(S) == S - 1,
            "tgt_key_padding_mask": np.arange(T) == 2}
    _compare(torch, ours, theirs, (_seq(rng, S, False, batched=False), _seq(rng, T, False, batched=False)),
             call, "train")


def test_per_head_masks_and_causal_memory_match_torch(torch):
    rng = np.random.default_rng(6)
    ours, theirs = _pair(torch, "TransformerDecoderLayer", D, H, FF, 0.0, batch_first=True)
    causal = np.triu(np.full((T, T), -np.inf), 1)
    call = {"tgt_mask": np.broadcast_to(causal, (N * H, T, T)) + rng.standard_normal((N * H, T, T)),
            "memory_mask": np.triu(np.ones((T, S), dtype=bool), 1), "memory_is_causal": True}
    _compare(torch, ours, theirs, (_seq(rng, T, True), _seq(rng, S, True)), call, "train")


def test_custom_encoder_and_decoder(torch):
    rng = np.random.default_rng(7)
    enc_p = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF, 0.0, dtype=plugtorch.float64), 1)
    dec_p = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF, 0.0, dtype=plugtorch.float64), 1)
    enc_t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, FF, 0.0, dtype=torch.float64), 1,
                                        enable_nested_tensor=False)
    dec_t = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, FF, 0.0, dtype=torch.float64), 1)
    ours = nn.Transformer(D, H, custom_encoder=enc_p, custom_decoder=dec_p, dtype=plugtorch.float64)
    theirs = torch.nn.Transformer(D, H, custom_encoder=enc_t, custom_decoder=dec_t, dtype=torch.float64)
    assert ours.encoder is enc_p and ours.decoder is dec_p
    copy_weights(ours, theirs)
    _compare(torch, ours, theirs, (_seq(rng, S, False), _seq(rng, T, False)), {}, "train")


def test_state_dict_keys_are_torchs(torch):
    for kw in (dict(), dict(bias=False, norm_first=True, batch_first=True)):
        ours = nn.Transformer(D, H, 2, 3, FF, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = torch.nn.Transformer(D, H, 2, 3, FF, **kw)
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
            (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
        assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    layer_p, layer_t = nn.TransformerDecoderLayer(D, H), torch.nn.TransformerDecoderLayer(D, H)
    assert list(layer_p.state_dict()) == list(layer_t.state_dict())
    assert [type(m).__name__ for _, m in layer_p.named_children()] == [
        type(m).__name__ for _, m in layer_t.named_children()]


def test_defaults_reach_the_layers():
    ours = nn.Transformer()
    assert (ours.d_model, ours.nhead, ours.batch_first) == (512, 8, False)
    assert ours.encoder.num_layers == ours.decoder.num_layers == 6
    layer = ours.decoder.layers[0]
    assert (layer.linear1.out_features, layer.dropout.p, layer.self_attn.dropout, layer.norm1.eps) == (2048, 0.1,
                                                                                                       0.1, 1e-5)
    assert layer.activation is F.relu and not layer.norm_first
    assert nn.TransformerDecoderLayer(D, H, activation="gelu").activation is F.gelu


def test_reset_parameters_is_xavier_uniform_on_matrices():
    g = plugtorch.Generator().manual_seed(0)
    m = nn.Transformer(D, H, 1, 1, dim_feedforward=64, generator=g)
    w = m.decoder.layers[0].linear2.weight.detach().numpy()  # (8, 64)
    bound = np.sqrt(6 / (8 + 64))
    # Linear's own init bounds this by 1/sqrt(64) = 0.125; xavier's bound is 0.289
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.2
    for name, p in m.named_parameters():
        if p.dim() > 1:
            fan_out, fan_in = p.shape
            assert np.abs(p.detach().numpy()).max() <= np.sqrt(6 / (fan_in + fan_out)), name
    assert np.array_equal(m.encoder.norm.weight.detach().numpy(), np.ones(D))  # 1-dim: left as they were
    assert m.decoder.layers[0].self_attn.in_proj_bias.abs().sum().item() == 0
    again = nn.Transformer(D, H, 1, 1, dim_feedforward=64, generator=plugtorch.Generator().manual_seed(0))
    assert all(np.array_equal(a.detach().numpy(), b.detach().numpy())
               for a, b in zip(m.parameters(), again.parameters()))


def test_decoder_layers_are_independent_copies():
    layer = nn.TransformerDecoderLayer(D, H, FF)
    dec = nn.TransformerDecoder(layer, 3)
    assert len({id(p) for p in dec.parameters()}) == 3 * len(list(layer.parameters()))


def test_generate_square_subsequent_mask_is_torchs(torch):
    for args in ((4,), (3, None, plugtorch.float64)):
        ours = nn.Transformer.generate_square_subsequent_mask(*args)
        theirs = torch.nn.Transformer.generate_square_subsequent_mask(*args[:2], *(
            [torch.float64] if len(args) == 3 else []))
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert isinstance(inspect.getattr_static(nn.Transformer, "generate_square_subsequent_mask"), staticmethod)
    assert nn.Transformer(D, H, 1, 1, FF).generate_square_subsequent_mask(2).tolist() == [[0.0, float("-inf")],
                                                                                          [0.0, 0.0]]


def test_errors_are_torchs():
    m = nn.Transformer(D, H, 1, 1, FF)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(plugtorch.randn(S, 2, D), plugtorch.randn(T, 3, D))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        m(plugtorch.randn(S, 2, D), plugtorch.randn(T, 2, D + 1))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerDecoderLayer(D, H, activation="tanh")
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(plugtorch.randn(S, 2, D), plugtorch.randn(T, 2, D), tgt_is_causal=True)


def _check_but_activation(ours, theirs, what):
    """check() with activation's default compared by name (each framework's own relu)."""
    p_ours, p_theirs = inspect.signature(ours).parameters, inspect.signature(theirs).parameters
    if "activation" in p_theirs:
        assert p_ours["activation"].default is F.relu and p_theirs["activation"].default.__name__ == "relu"
        ours = inspect.Signature([p.replace(default=None) if k == "activation" else p for k, p in p_ours.items()])
        theirs = inspect.Signature([p.replace(default=None) if k == "activation" else p
                                    for k, p in p_theirs.items()])
    check(_with_signature(ours), _with_signature(theirs), what)


def _with_signature(sig_or_fn):
    if not isinstance(sig_or_fn, inspect.Signature):
        return sig_or_fn
    f = lambda: None
    f.__signature__ = sig_or_fn
    return f


@pytest.mark.parametrize("name", ["Transformer", "TransformerDecoderLayer", "TransformerDecoder"])
def test_signatures_are_torchs(torch, name):
    for method in ("__init__", "forward"):
        _check_but_activation(getattr(getattr(nn, name), method), getattr(getattr(torch.nn, name), method),
                              f"nn.{name}.{method}")
