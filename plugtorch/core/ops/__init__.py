"""The core's ops, written against backend primitives and each other.

Importing this package declares every core op into ``core.optable`` (in dependency
order); the core plugin then registers them like any plugin's.
"""
from . import (conversion, creation, elementwise, pointwise, reduce, statistics, shape, index,  # noqa: F401
               movement, sorting, scatter, inplace, linalg, einsum, activation, window, conv,
               pooling, loss, classification, normalization)

# Catalog sections, by the module an op is declared in.
SECTIONS = {
    "elementwise": "Elementwise", "pointwise": "Elementwise", "conversion": "Conversion",
    "reduce": "Reductions", "statistics": "Reductions", "sorting": "Sorting",
    "shape": "Shape and movement", "movement": "Shape and movement", "index": "Indexing",
    "scatter": "Indexing", "inplace": "Indexing", "linalg": "Linear algebra",
    "einsum": "Linear algebra", "activation": "Activations", "window": "Convolution and pooling",
    "conv": "Convolution and pooling", "pooling": "Convolution and pooling",
    "loss": "Losses", "classification": "Losses", "normalization": "Normalization",
}
