"""Anomaly detection: remember where each graph node was created, and stop at the first NaN/Inf gradient."""
from __future__ import annotations

import threading
import traceback


class _State(threading.local):
    enabled = False


_state = _State()


def is_enabled() -> bool:
    return _state.enabled


def set_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


def creation_trace() -> str:
    # Drop the frames inside plugtorch so the trace ends at the user's line.
    frames = [f for f in traceback.extract_stack()[:-1] if "/plugtorch/core/" not in f.filename]
    return "".join(traceback.format_list(frames))


def check_grads(node, grads) -> None:
    for i, g in enumerate(grads):
        if g is None or not g.dtype.is_floating_point:
            continue
        if not bool(g.isfinite().all()):
            where = node.trace or "(node created before anomaly detection was enabled)\n"
            raise RuntimeError(
                f"Function '{node.name()}' returned nan or inf values in its {i}th output.\n"
                f"The forward op '{node.op}' that produced it was created at:\n{where}"
            )
