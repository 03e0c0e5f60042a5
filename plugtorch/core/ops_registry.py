"""The core's own op definitions, registered through the same hook as any plugin."""
from __future__ import annotations

from .hookspecs import CONTRACT_VERSION, hookimpl

PLUGTORCH_CONTRACT = CONTRACT_VERSION


@hookimpl
def plugtorch_register(registrar):
    from .ops import all_opdefs
    for op in all_opdefs():
        registrar.add_op(op)
