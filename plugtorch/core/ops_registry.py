"""The core's own op definitions, registered through the same hook as any plugin."""
from __future__ import annotations

from .hookspecs import CONTRACT_VERSION, hookimpl

PLUGTORCH_CONTRACT = CONTRACT_VERSION


@hookimpl
def plugtorch_register(registrar):
    from . import ops  # noqa: F401  (importing the op modules declares the core's ops)
    from .optable import CORE
    for op in CORE:
        registrar.add_op(op)
