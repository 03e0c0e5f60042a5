"""``plugtorch.backends``: torch.backends' switches and queries, under torch's name.

This package holds no backend. It mirrors ``torch.backends`` so that scripts which read or
set ``torch.backends.cudnn.benchmark``, ``cudnn.deterministic``, ``cuda.matmul.allow_tf32``
or ``mps.is_available()`` run unchanged; its name is torch's and stays so. Everywhere else
in plugtorch a *backend* is a compute backend: a plugin's table of primitives and its
metadata (``plugtorch.core.backend.Backend``), such as the NumPy and CuPy backends in the
repository's ``backends/`` directory, installed as the ``plugtorch_backends`` package.

The queries are answered truthfully from the registered compute backends: ``cudnn`` and
``mps`` report whether a backend computing on that hardware is registered
(``Backend(accelerator=...)``). The switches are plain attributes, kept so that scripts
which set them run; a backend plugin may read them.
"""
from __future__ import annotations

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
