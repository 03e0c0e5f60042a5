"""``plugtorch.nn.functional``: the stateless forms of the ``nn`` layers and losses.

Most names are ops bound from the op table (``_ops``); the rest are library functions
written with them.
"""
from __future__ import annotations

from ._ops import *  # noqa: F401,F403
from ._ops import __all__ as _op_names
from .activation import relu, relu_, tanh
from .dropout import dropout, dropout1d, dropout2d
from .linear import embedding, linear
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss,
                   mse_loss, nll_loss)
from .normalization import batch_norm, layer_norm

__all__ = sorted(set(_op_names) | {
    "relu", "relu_", "tanh", "dropout", "dropout1d", "dropout2d", "embedding", "linear",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "l1_loss",
    "mse_loss", "nll_loss", "batch_norm", "layer_norm",
})
