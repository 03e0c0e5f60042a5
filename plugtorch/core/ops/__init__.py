"""The core's ops, written against backend primitives and each other.

Importing this package declares every core op into ``core.optable`` (in dependency
order); the core plugin then registers them like any plugin's.
"""
from . import (  # noqa: F401
               activation,
               attention,
               classification,
               complex,
               conv,
               conv_transpose,
               conversion,
               counting,
               creation,
               ctc,
               cumulative,
               distance,
               einsum,
               elementwise,
               fft,
               index,
               inplace,
               joins,
               linalg,
               loss,
               movement,
               normalization,
               optimizer_updates,
               padding,
               pointwise,
               pooling,
               recurrent,
               reduce,
               sampling,
               scatter,
               shape,
               sorting,
               statistics,
               unpool,
               window,
)

# Catalog sections, by the module an op is declared in.
SECTIONS = {
    "elementwise": "Elementwise", "pointwise": "Elementwise", "conversion": "Conversion",
    "reduce": "Reductions", "statistics": "Reductions", "sorting": "Sorting",
    "shape": "Shape and movement", "movement": "Shape and movement", "index": "Indexing",
    "scatter": "Indexing", "inplace": "Indexing", "linalg": "Linear algebra",
    "einsum": "Linear algebra", "activation": "Activations", "window": "Convolution and pooling",
    "conv": "Convolution and pooling",
    "conv_transpose": "Convolution and pooling", "pooling": "Convolution and pooling",
    "unpool": "Convolution and pooling", "padding": "Convolution and pooling",
    "sampling": "Convolution and pooling", "attention": "Attention",
    "loss": "Losses", "distance": "Losses", "ctc": "Losses", "classification": "Losses",
    "normalization": "Normalization",
    "cumulative": "Reductions", "counting": "Reductions", "joins": "Shape and movement",
    "optimizer_updates": "Optimizer updates", "complex": "Complex numbers", "fft": "Fourier transforms",
}
