"""``plugtorch.nn.functional``: the stateless forms of the ``nn`` layers and losses."""
from __future__ import annotations

from ...core.ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, max_pool2d
from ...core.ops.index import one_hot
from ...core.ops.movement import pad
from .activation import (elu, gelu, leaky_relu, log_softmax, relu, relu_, sigmoid, silu, softmax,
                         softplus, tanh)
from .dropout import dropout, dropout1d, dropout2d
from .linear import embedding, linear
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss,
                   mse_loss, nll_loss)
from .normalization import batch_norm, layer_norm

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "dropout1d",
    "dropout2d", "elu", "embedding", "gelu", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad", "relu", "relu_",
    "sigmoid", "silu", "softmax", "softplus", "tanh",
]
