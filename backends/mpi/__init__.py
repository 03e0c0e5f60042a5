"""The MPI plugin: plugtorch's process group over mpi4py, for ``mpiexec``/``mpirun``.

It registers one service, ``"distributed.process_group"``, through the same plugin
contract as the backends. Importing it is cheap and never starts MPI: mpi4py is
imported (and MPI initialised) only when ``plugtorch.distributed.init()`` runs in a
process that a launcher started (see ``launch``). Then the process group
(``group.MPIProcessGroup``) runs the collectives, and an uncaught exception on any
rank aborts the whole job (``faults``) instead of leaving the others hanging.
"""
from __future__ import annotations

from plugtorch.backend_api import CONTRACT_VERSION, hookimpl

from .launch import MPIProvider

PLUGTORCH_CONTRACT = CONTRACT_VERSION


@hookimpl
def plugtorch_register(registrar):
    registrar.add_service("distributed.process_group", MPIProvider())
