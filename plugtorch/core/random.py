"""Random number generators with explicit, saveable state.

A :class:`Generator` holds one seed and, per backend it has been used on, that
backend's native generator (made lazily by the ``generator`` primitive). The
default generator is what ``manual_seed`` reseeds, like torch's.
"""
from __future__ import annotations

import os
import weakref

from .debug import capture

_DEFAULT_SEED = 67280421310721  # torch.initial_seed() of a fresh process


# Every live Generator: plugtorch.compile finds which one a native generator belongs to, so a
# replayed step draws from that Generator's current stream (manual_seed replaces it).
ALL_GENERATORS: weakref.WeakSet[Generator] = weakref.WeakSet()

# While plugtorch.func.vmap runs a function, its randomness= decides each draw: ``VMAP_DRAW[0]()``
# runs before any generator draws (it raises under randomness='error'), and rand/randn hand their
# draw to ``VMAP_DRAW[1]`` (one sample per example under randomness='different'). None: no vmap.
VMAP_DRAW: list = [None, None]


def _not_in_capture(what: str) -> None:
    """A generator made or reseeded inside a function plugtorch.compile captures: a replay would
    draw on from the captured stream where eager starts a new one, so the capture falls back."""
    if capture.active:
        from ..compiler.recording import not_capturable
        not_capturable(f"it {what} inside the function")


class Generator:
    def __init__(self, device=None):
        _not_in_capture("makes a random generator")
        self.device = device
        self._seed = _DEFAULT_SEED
        self._native: dict = {}
        ALL_GENERATORS.add(self)

    def manual_seed(self, seed: int) -> Generator:
        _not_in_capture("reseeds a random generator (manual_seed)")
        seed = int(seed)
        if seed < 0:
            seed &= 0xFFFF_FFFF_FFFF_FFFF
        self._seed = seed
        self._native.clear()
        return self

    def seed(self) -> int:
        s = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def native(self, backend):
        """This generator's native generator on ``backend``, created on first use."""
        if VMAP_DRAW[0] is not None:
            VMAP_DRAW[0]()
        g = self._native.get(backend.name)
        if g is None:
            g = self._native[backend.name] = backend.primitives["generator"](self._seed)
        return g

    def get_state(self) -> dict:
        """A JSON-serialisable snapshot: the seed and each backend's generator state."""
        from .device import get_backend
        return {
            "seed": self._seed,
            "backends": {name: get_backend(name).primitives["generator_get_state"](g)
                         for name, g in self._native.items()},
        }

    def set_state(self, state: dict) -> None:
        from .device import get_backend
        if not isinstance(state, dict) or "seed" not in state:
            raise ValueError("Generator.set_state expects a state returned by Generator.get_state()")
        self.manual_seed(state["seed"])
        for name, s in state.get("backends", {}).items():
            b = get_backend(name)
            g = self.native(b)
            b.primitives["generator_set_state"](g, s)


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (every backend draws from it)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)
