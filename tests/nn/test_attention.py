"""scaled_dot_product_attention's dropout, MultiheadAttention and TransformerEncoder against torch
(values and gradients, torch's state_dicts loaded; dropout 0 where torch's masks cannot be reproduced)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch import nn
from plugtorch.autograd import gradcheck, gradgradcheck

from .helpers import copy_weights


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- scaled_dot_product_attention with dropout ---------------------------------------------------

def test_sdpa_dropout_is_the_generators_mask():
    q, k, v = (plugtorch.tensor(rand(2, 3, 4, 5, seed=i)) for i in range(3))
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, generator=plugtorch.Generator().manual_seed(3))
    g = plugtorch.Generator().manual_seed(3)
    keep = (plugtorch.rand(2, 3, 4, 4, generator=g, dtype=plugtorch.float64) >= 0.4).double() / 0.6
    expected = (plugtorch.softmax(q @ k.mT / np.sqrt(5), -1) * keep) @ v
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=1e-12)


def test_sdpa_dropout_gradients_use_the_same_mask():
    q, k, v = (plugtorch.tensor(rand(1, 3, 2, seed=i), requires_grad=True) for i in range(3))
    f = lambda a, b, c: F.scaled_dot_product_attention(a, b, c, dropout_p=0.3, is_causal=True,
                                                       generator=plugtorch.Generator().manual_seed(0))
    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))


def test_sdpa_dropout_one_drops_everything():
    q = plugtorch.randn(2, 3, 4)
    assert F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).abs().sum().item() == 0.0


def test_sdpa_masked_rows_give_zeros_and_zero_gradients(torch):
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    q, k, v = rand(3, 2), rand(4, 2, seed=1), rand(4, 2, seed=2)
    a = plugtorch.tensor(q, requires_grad=True)
    out = F.scaled_dot_product_attention(a, plugtorch.tensor(k), plugtorch.tensor(v), plugtorch.tensor(mask))
    out.sum().backward()
    assert out[1].tolist() == [0.0, 0.0] and a.grad[1].tolist() == [0.0, 0.0]
    expected = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v, mask)))
    np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), atol=1e-12)


# -- MultiheadAttention ------------------------------------------------------------------------

def _mha_case(torch, ctor, call, batched=True, self_attention=True, seed=0):
    rng = np.random.default_rng(seed)
    theirs = torch.nn.MultiheadAttention(8, 2, **ctor).double()
    ours = nn.MultiheadAttention(8, 2, **ctor, dtype=plugtorch.float64)
    copy_weights(ours, theirs)
    L, S, N = 3, 4, 2
    bf = ctor.get("batch_first")

    def shape(n, e):
        return ((N, n, e) if bf else (n, N, e)) if batched else (n, e)
    q = rng.standard_normal(shape(L, 8))
    kv = [q, q] if self_attention else [rng.standard_normal(shape(S, ctor.get("kdim", 8))),
                                        rng.standard_normal(shape(S, ctor.get("vdim", 8)))]
    src = S if not self_attention else L
    args_p, args_t = {}, {}
    for name, make in call.items():
        if not callable(make):
            continue
        m = make(rng, N if batched else None, L, src)
        args_p[name], args_t[name] = plugtorch.tensor(m), torch.tensor(m)
    xs_p = [plugtorch.tensor(a, requires_grad=True) for a in (q, *kv)]
    xs_t = [torch.tensor(a, requires_grad=True) for a in (q, *kv)]
    if self_attention:  # the same tensor three times, as a self-attention call passes it
        xs_p, xs_t = [xs_p[0]] * 3, [xs_t[0]] * 3
    flags = {k: v for k, v in call.items() if not callable(v)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warning about mixed mask types, mirrored
        y_p, w_p = ours(*xs_p, **{k: v for k, v in args_p.items() if k not in flags}, **flags)
        y_t, w_t = theirs(*xs_t, **{k: v for k, v in args_t.items() if k not in flags}, **flags)
    np.testing.assert_allclose(y_p.detach().numpy(), y_t.detach().numpy(), atol=1e-10)
    assert (w_p is None) == (w_t is None)
    up = rng.standard_normal(tuple(y_t.shape))
    loss_p = (y_p * plugtorch.tensor(up)).sum() + (w_p.sum() if w_p is not None else 0)
    loss_t = (y_t * torch.tensor(up)).sum() + (w_t.sum() if w_t is not None else 0)
    if w_p is not None:
        np.testing.assert_allclose(w_p.detach().numpy(), w_t.detach().numpy(), atol=1e-10)
    loss_p.backward()
    loss_t.backward()
    for a, b in zip(xs_p, xs_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    t_params = dict(theirs.named_parameters())
    assert set(t_params) == {n for n, _ in ours.named_parameters()}
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=1e-10, err_msg=name)


def _key_padding(rng, n, L, S):
    m = rng.random((n, S) if n else (S,)) < 0.4
    m[..., 0] = False
    return m


def _bool_attn_mask(rng, n, L, S):
    m = rng.random((L, S)) < 0.4
    m[:, 0] = False
    return m


def _float_attn_mask_per_head(rng, n, L, S):
    return rng.standard_normal(((n or 1) * 2, L, S))


CONSTRUCTORS = [dict(), dict(batch_first=True), dict(bias=False), dict(add_bias_kv=True), dict(add_zero_attn=True),
                dict(add_bias_kv=True, add_zero_attn=True, batch_first=True)]
CALLS = {
    "plain": {},
    "no weights": {"need_weights": False},
    "per-head weights": {"average_attn_weights": False},
    "key padding": {"key_padding_mask": _key_padding},
    "attn_mask, no weights": {"attn_mask": _bool_attn_mask, "need_weights": False},
    "both masks": {"key_padding_mask": _key_padding, "attn_mask": _bool_attn_mask},
    "3-D float mask": {"attn_mask": _float_attn_mask_per_head},
}


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
@pytest.mark.parametrize("ctor", CONSTRUCTORS, ids=lambda c: "-".join(c) or "default")
def test_multihead_self_attention(torch, ctor, call):
    _mha_case(torch, ctor, CALLS[call])


@pytest.mark.parametrize("call", ["plain", "no weights", "both masks"])
@pytest.mark.parametrize("ctor", [dict(), dict(kdim=5, vdim=3), dict(kdim=5, vdim=3, batch_first=True,
                                                                    add_bias_kv=True)], ids=str)
def test_multihead_cross_attention(torch, ctor, call):
    _mha_case(torch, ctor, CALLS[call], self_attention=False)


@pytest.mark.parametrize("call", ["plain", "key padding", "no weights"])
def test_multihead_unbatched(torch, call):
    _mha_case(torch, dict(), CALLS[call], batched=False)
    _mha_case(torch, dict(kdim=5, vdim=3), CALLS[call], batched=False, self_attention=False)


def test_multihead_causal_hint(torch):
    mask = lambda rng, n, L, S: torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64).numpy()
    _mha_case(torch, dict(), {"attn_mask": mask, "is_causal": True, "need_weights": False})


def test_multihead_parameters_and_init_are_torchs(torch):
    for kw in (dict(), dict(kdim=3, vdim=5, add_bias_kv=True, bias=False)):
        ours, theirs = nn.MultiheadAttention(8, 2, **kw), torch.nn.MultiheadAttention(8, 2, **kw)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
            k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    m = nn.MultiheadAttention(8, 2, generator=plugtorch.Generator().manual_seed(0))
    assert m.in_proj_bias.abs().sum().item() == 0 and m.out_proj.bias.abs().sum().item() == 0
    bound = np.sqrt(6 / (8 + 24))  # xavier_uniform_ on (3E, E)
    w = m.in_proj_weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound


def test_multihead_dropout_follows_training_mode():
    m = nn.MultiheadAttention(8, 2, dropout=0.5, generator=plugtorch.Generator().manual_seed(0))
    x = plugtorch.randn(3, 2, 8)
    m.eval()
    a, b = m(x, x, x)[0], m(x, x, x)[0]
    assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    assert not np.allclose(m(x, x, x)[0].detach().numpy(), a.detach().numpy())


def test_multihead_errors_are_torchs():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    m = nn.MultiheadAttention(8, 2)
    x = plugtorch.randn(3, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask is \\[2, 3\\], but should be \\[3, 3\\]"):
        m(x, x, x, attn_mask=plugtorch.zeros(2, 3))


# -- TransformerEncoder --------------------------------------------------------------------------

@pytest.mark.parametrize("kw,masks,mode", [
    (dict(), "none", "train"), (dict(), "key padding", "eval"), (dict(), "causal", "train"),
    (dict(norm_first=True, activation="gelu"), "key padding", "train"),
    (dict(norm_first=True, activation="gelu"), "causal", "eval"),
    (dict(batch_first=True, bias=False), "key padding", "train"), (dict(batch_first=True, bias=False), "none", "eval"),
], ids=str)
def test_transformer_encoder(torch, kw, masks, mode):
    rng = np.random.default_rng(0)
    their_layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw).double()
    our_layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw, dtype=plugtorch.float64)
    # torch's nested-tensor fast path zeroes padded positions in evaluation; not reproduced (docstring)
    theirs = torch.nn.TransformerEncoder(their_layer, 2, norm=torch.nn.LayerNorm(8).double(),
                                         enable_nested_tensor=False)
    ours = nn.TransformerEncoder(our_layer, 2, norm=nn.LayerNorm(8, dtype=plugtorch.float64))
    copy_weights(ours, theirs)
    getattr(ours, mode)()
    getattr(theirs, mode)()
    N, L = 2, 5
    x = rng.standard_normal((N, L, 8) if kw.get("batch_first") else (L, N, 8))
    call_p, call_t = {}, {}
    if masks == "key padding":
        m = rng.random((N, L)) < 0.4
        m[:, 0] = False
        call_p["src_key_padding_mask"], call_t["src_key_padding_mask"] = plugtorch.tensor(m), torch.tensor(m)
    if masks == "causal":
        call_p["mask"] = nn.modules.transformer.generate_square_subsequent_mask(L, dtype=plugtorch.float64)
        call_t["mask"] = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
        call_p["is_causal"] = call_t["is_causal"] = True
    xp, xt = plugtorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yp, yt = ours(xp, **call_p), theirs(xt, **call_t)
    np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), atol=1e-10)
    up = rng.standard_normal(x.shape)
    (yp * plugtorch.tensor(up)).sum().backward()
    (yt * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=1e-10, err_msg=name)


def test_encoder_layers_are_independent_copies():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    enc = nn.TransformerEncoder(layer, 3)
    ids = {id(p) for p in enc.parameters()}
    assert len(ids) == 3 * len(list(layer.parameters()))


def test_causal_mask_helper_matches_torch(torch):
    ours = nn.modules.transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(ours.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


def test_unknown_activation_is_refused():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
