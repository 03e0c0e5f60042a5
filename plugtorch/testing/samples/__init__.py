"""The built-in sample table: op name -> ``samples(g)``, for the ops plugtorch itself defines.

A plugin's own ops carry their samples on their ``OpDef.samples`` instead.
"""
from __future__ import annotations

from . import elementwise, indexing, linalg, losses, nn, reductions, shapes, sorting

SAMPLES: dict = {}
for _module in (elementwise, reductions, sorting, shapes, indexing, linalg, nn, losses):
    SAMPLES.update(_module.SAMPLES)
