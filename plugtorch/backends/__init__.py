"""``plugtorch.backends``: torch.backends' switches and queries, answered truthfully.

``cudnn`` and ``mps`` report whether a backend computing on that hardware is registered
(``Backend(accelerator=...)``); their switches (``cudnn.benchmark``, ``cudnn.deterministic``)
are kept so scripts that set them run, and a backend plugin may read them.
"""
from __future__ import annotations

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
