"""Random draws under ``vmap``, as its ``randomness=`` says.

``'error'`` refuses any draw; ``'same'`` lets a draw run once, shared by every example;
``'different'`` gives each example its own sample: ``rand``/``randn`` (and what is built on them:
``rand_like``, ``randn_like``, dropout's masks) draw the batch dims of those levels too. The core's
generators call the hooks in ``core.random.VMAP_DRAW`` while a vmap is in force.
"""
from __future__ import annotations

import contextlib

from ..core import random as _core_random
from ._batched import wrap

ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
         "'different' randomness flags on vmap or perform the randomness operation out of vmap")


@contextlib.contextmanager
def under(levels):
    """Install the hooks for the vmap ``levels`` in force (outermost first) while the body runs."""
    saved = list(_core_random.VMAP_DRAW)
    _core_random.VMAP_DRAW[:] = [lambda: _check(levels), lambda *a: _draw(levels, *a)]
    try:
        yield
    finally:
        _core_random.VMAP_DRAW[:] = saved


def _check(levels):
    kinds = {v.randomness for v in levels}
    if "error" in kinds:
        raise RuntimeError(ERROR)
    if "different" in kinds:
        raise RuntimeError("vmap(randomness='different'): this random operation has no per-example form here; "
                           "draw with rand/randn (or rand_like/randn_like) inside the function, or draw "
                           "outside vmap and pass the samples in")


def _draw(levels, random, kind, size, generator, dtype, device, requires_grad, *args):
    if any(v.randomness == "error" for v in levels):
        raise RuntimeError(ERROR)
    different = [v for v in levels if v.randomness == "different"]
    saved = list(_core_random.VMAP_DRAW)
    _core_random.VMAP_DRAW[:] = [None, None]  # the draw itself, once, for the whole batch
    try:
        if not different:
            return random(kind, size, generator, dtype, device, requires_grad, *args)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        out = random(kind, tuple(v.size for v in different) + shape, generator, dtype, device, requires_grad,
                     *args)
    finally:
        _core_random.VMAP_DRAW[:] = saved
    for v in different:
        out = wrap(out, v.level)
    return out
