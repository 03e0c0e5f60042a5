"""The built-in sample table: op name -> ``samples(g)``, for the ops plugtorch itself defines.

A plugin's own ops carry their samples on their ``OpDef.samples`` instead.
"""
from __future__ import annotations

from . import (
    attention,
    bitwise,
    conv,
    counting,
    cumulative,
    decompositions,
    distances,
    elementwise,
    fourier,
    indexing,
    linalg,
    losses,
    nn,
    optim,
    recurrent,
    reductions,
    sampling,
    script_functions,
    shapes,
    sorting,
    special,
)

SAMPLES: dict = {}
for _module in (elementwise, reductions, sorting, shapes, indexing, linalg, nn, losses, conv, sampling,
                distances, attention, bitwise, cumulative, counting, optim, recurrent, special, fourier,
                decompositions, script_functions):
    SAMPLES.update(_module.SAMPLES)
