"""The functions and layers added for PyTorch compatibility keep torch's argument names, order and
defaults (see test_signatures.py for the rules and the deliberate extras)."""
from __future__ import annotations

import pytest

import plugtorch.nn.functional as F
from plugtorch import nn

from .test_signatures import check

FUNCTIONAL = """conv1d conv3d conv_transpose1d conv_transpose2d conv_transpose3d avg_pool1d avg_pool3d
adaptive_avg_pool1d adaptive_avg_pool3d max_unpool1d max_unpool2d max_unpool3d unfold fold pixel_shuffle
pixel_unshuffle interpolate upsample upsample_nearest upsample_bilinear scaled_dot_product_attention
multi_head_attention_forward glu normalize softmin smooth_l1_loss huber_loss kl_div cosine_similarity
pairwise_distance triplet_margin_loss margin_ranking_loss poisson_nll_loss ctc_loss pad""".split()
FUNCTIONAL.remove("scaled_dot_product_attention")  # torch's docstring does not open with it: below
DISPATCHED = {"max_pool1d": "_max_pool1d", "max_pool3d": "_max_pool3d"}  # torch's public ones are dispatchers
MODULES = """Conv1d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d MaxPool1d MaxPool3d AvgPool1d AvgPool3d
AdaptiveAvgPool1d AdaptiveAvgPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d Fold Unfold PixelShuffle PixelUnshuffle
Upsample UpsamplingNearest2d UpsamplingBilinear2d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d
ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d ZeroPad1d ZeroPad2d ZeroPad3d
ConstantPad1d ConstantPad2d ConstantPad3d MultiheadAttention TransformerEncoder
RNNCell LSTMCell GRUCell RNNBase CosineSimilarity PairwiseDistance SmoothL1Loss HuberLoss KLDivLoss
TripletMarginLoss MarginRankingLoss PoissonNLLLoss CTCLoss Softmin GLU""".split()


@pytest.mark.parametrize("name", FUNCTIONAL + list(DISPATCHED))
def test_functional_signatures(torch, name):
    theirs = getattr(torch.nn.functional, DISPATCHED.get(name, name))
    check(getattr(F, name), theirs, f"F.{name}")


def test_sdpa_signature_is_the_documented_one(torch):
    def documented(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        """torch.nn.functional.scaled_dot_product_attention's signature, from its documentation."""
    assert "enable_gqa=False" in torch.nn.functional.scaled_dot_product_attention.__doc__
    check(F.scaled_dot_product_attention, documented, "F.scaled_dot_product_attention")


def test_transformer_layer_signature(torch):
    import inspect
    ours = inspect.signature(nn.TransformerEncoderLayer.__init__).parameters
    theirs = inspect.signature(torch.nn.TransformerEncoderLayer.__init__).parameters
    assert [k for k in ours if k in theirs] == list(theirs)
    assert all(ours[k].default == theirs[k].default for k in theirs if k != "activation")
    assert ours["activation"].default is F.relu and theirs["activation"].default.__name__ == "relu"


@pytest.mark.parametrize("name", MODULES)
def test_module_constructor_signatures(torch, name):
    check(getattr(nn, name).__init__, getattr(torch.nn, name).__init__, f"nn.{name}")


def test_recurrent_layers_take_torchs_keywords(torch):
    # torch spells these (*args, **kwargs); the names it accepts are RNNBase's (plus nonlinearity)
    base = ["input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional"]
    for name, extra in (("RNN", ["nonlinearity"]), ("LSTM", ["proj_size"]), ("GRU", [])):
        import inspect
        params = inspect.signature(getattr(nn, name).__init__).parameters
        assert set(base + extra + ["device", "dtype"]) <= set(params), name
        assert list(params)[1:4] == ["input_size", "hidden_size", "num_layers"]


def test_forward_signatures(torch):
    for name in ("MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "ConvTranspose2d"):
        check(getattr(nn, name).forward, getattr(torch.nn, name).forward, f"nn.{name}.forward")
    check(nn.Embedding.from_pretrained, torch.nn.Embedding.from_pretrained, "nn.Embedding.from_pretrained")
