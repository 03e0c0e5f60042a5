"""The core's ops, written against backend primitives and each other.

Importing this package declares every core op into ``core.optable`` (in dependency
order); the core plugin then registers them like any plugin's.
"""
from . import (conversion, creation, elementwise, pointwise, reduce, statistics, shape, index,  # noqa: F401
               movement, sorting, scatter, inplace, linalg, einsum, activation, window, conv,
               conv_transpose, pooling, unpool, padding, sampling, attention, loss, distance, ctc,
               classification, normalization, cumulative, counting,
               joins, optimizer_updates)

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
    "optimizer_updates": "Optimizer updates",
}
