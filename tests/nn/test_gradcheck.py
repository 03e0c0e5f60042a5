"""Finite-difference checks of nn.functional (no torch needed), first and second order.

Second order matters for gradient penalties and meta-learning: every derivative
here is itself built from differentiable ops.
"""
from __future__ import annotations

import pytest

import plugtorch
import plugtorch.nn.functional as F
from plugtorch.autograd import gradcheck, gradgradcheck


def t(*shape, seed=0, positive=False):
    x = plugtorch.randn(*shape, generator=plugtorch.Generator().manual_seed(seed),
                        dtype=plugtorch.float64)
    if positive:
        x = x.abs() + 0.5
    return x.requires_grad_()


TARGET = plugtorch.tensor([0, 2, 1])
PROBS = plugtorch.softmax(t(3, 4, seed=7).detach(), 1)

CASES = {
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda: (t(3, 4), t(2, 4, seed=1), t(2, seed=2))),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b),
                   lambda: (t(3, 4), t(4, seed=1), t(4, seed=2))),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda: (t(5, 3), t(3, seed=1), t(3, seed=2))),
    "cross_entropy": (lambda x: F.cross_entropy(x, TARGET, label_smoothing=0.1),
                      lambda: (t(3, 4),)),
    "cross_entropy_weighted_ignore": (
        lambda x, w: F.cross_entropy(x, TARGET, weight=w, ignore_index=1),
        lambda: (t(3, 4), t(4, seed=3, positive=True))),
    "cross_entropy_probs": (lambda x: F.cross_entropy(x, PROBS), lambda: (t(3, 4),)),
    "nll_loss": (lambda x: F.nll_loss(F.log_softmax(x, 1), TARGET, reduction="sum"),
                 lambda: (t(3, 4),)),
    "bce": (lambda p: F.binary_cross_entropy(plugtorch.sigmoid(p), PROBS), lambda: (t(3, 4),)),
    "bce_with_logits": (lambda x, pw: F.binary_cross_entropy_with_logits(x, PROBS, pos_weight=pw),
                        lambda: (t(3, 4), t(4, seed=4, positive=True))),
    "mse": (lambda a, b: F.mse_loss(a, b), lambda: (t(3, 4), t(3, 4, seed=1))),
    "gelu": (lambda x: F.gelu(x), lambda: (t(3, 4),)),
    "silu": (lambda x: F.silu(x), lambda: (t(3, 4),)),
    # (padding_idx deliberately breaks this check: its row's gradient is forced to zero)
    "embedding": (lambda w: F.embedding(plugtorch.tensor([[0, 2], [2, 1]]), w,
                                        scale_grad_by_freq=False),
                  lambda: (t(3, 2),)),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, stride=2),
               lambda: (t(1, 2, 4, 4), t(3, 2, 3, 3, seed=1))),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: (t(1, 2, 5, 4),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, make = CASES[name]
    assert gradcheck(fn, make())


@pytest.mark.parametrize("name", ["linear", "layer_norm", "batch_norm_train", "cross_entropy",
                                  "bce", "bce_with_logits", "gelu", "conv2d"])
def test_gradgradcheck(name):
    fn, make = CASES[name]
    assert gradgradcheck(fn, make())
