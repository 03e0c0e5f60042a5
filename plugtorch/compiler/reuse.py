"""In-place reuse of dead temporaries in a captured call: the NumPy counterpart of fusing an
elementwise chain.

Eager code allocates every result. In a trace, an elementwise call (a backend's
``out_variants``) whose array operand is a temporary that no later call, output or write-back
reads can write its result into that operand instead: ``((x * a) + b).exp()`` then runs in
one buffer, with fewer allocations and a smaller, warmer working set. The values are the same
(an elementwise ufunc computes each element alone), so replays stay bitwise equal to eager.

Only buffers the trace itself allocates are reused: results of elementwise calls, which are
new arrays on every replay whatever the inputs' layouts (a ``reshape`` or ``contiguous`` may
return its input, or not, depending on layout, so their results are never written into).
A buffer is reused only where it has the result's shape, dtype and layout (the guard fixes
the inputs' layouts, so the layouts seen at capture are those of every replay), and nothing
still alive, nor another operand of the call, shares its memory.
"""
from __future__ import annotations

from .trace import _SLOT, liveness


def _into(variant, pos: int):
    def call(*arrays):
        return variant(*arrays, out=arrays[pos])
    return call


def _array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "strides")


def reuse_dead_buffers(steps: list, calls: list, kept: list) -> tuple[list, int]:
    """``steps`` with elementwise calls rewritten to write into a dead operand, and how many.

    steps: (fn, arg specs, kwarg specs, refresh) per recorded call; calls: the recordings
    ((name, fn, args, kwargs, result, refresh, backend)); kept: specs the replay returns or
    writes back, alive to the end."""
    _, dies_at, forever = liveness(steps, kept)
    fresh: set[int] = set()  # slots whose array the trace allocated (an elementwise result)
    out, rewritten = list(steps), 0
    for i, (_fn, args, kwargs, refresh) in enumerate(steps):
        name, recorded, _, _, result, _, backend = calls[i]
        variant = backend.out_variants.get(name) if backend is not None else None
        if variant is None or _fn is not recorded or kwargs or refresh is not None or not _array(result):
            continue  # (a call replaced by a fused kernel is not the recorded primitive)
        fresh.add(i)
        may_share = getattr(backend.array_module, "may_share_memory", None)
        if may_share is None:
            continue
        alive = [calls[k][4] for k in range(i) if (dies_at.get(k, k) > i or k in forever) and _array(calls[k][4])]
        for pos, spec in enumerate(args):
            if spec[0] != _SLOT or spec[2] is not None:
                continue
            j = spec[1]
            if j not in fresh or dies_at.get(j) != i or j in forever:
                continue
            buf = calls[j][4]
            if buf.shape != result.shape or buf.dtype != result.dtype or buf.strides != result.strides:
                continue  # the result would not be laid out as the call lays it out
            others = [calls[s[1]][4] for p, s in enumerate(args) if p != pos and s[0] == _SLOT and s[2] is None]
            if any(may_share(buf, a) for a in alive + others if a is not buf and _array(a)):
                continue
            out[i] = (_into(variant, pos), args, kwargs, refresh)
            rewritten += 1
            break
    return out, rewritten
