"""``plugtorch.nn.functional``: the stateless forms of the ``nn`` layers and losses.

Most names are ops bound from the op table (``_ops``: activations, convolution and pooling,
losses, normalisation); the rest are library functions written with them.
"""
from __future__ import annotations

from ._ops import *  # noqa: F403
from ._ops import __all__ as _op_names
from .activation import relu, relu_, tanh  # noqa: F401  (re-exported through __all__)
from .attention import multi_head_attention_forward  # noqa: F401
from .dropout import dropout, dropout1d, dropout2d, dropout3d  # noqa: F401
from .embedding import embedding  # noqa: F401

__all__ = sorted(set(_op_names) | {
    "relu", "relu_", "tanh", "dropout", "dropout1d", "dropout2d", "dropout3d", "embedding",
    "multi_head_attention_forward",
})
