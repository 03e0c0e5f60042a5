"""Backends the loss and normalisation tests register at run time: one that counts host reads
(standing in for a GPU, where each read is a device sync), and one with fused kernels."""
from __future__ import annotations

import itertools
import types

from plugtorch_backends.numpy_backend import make_backend

import plugtorch
from plugtorch.core.hookspecs import CONTRACT_VERSION, hookimpl

_ids = itertools.count()


def register(setup=None, kernels=None) -> str:
    """Register a NumPy-backed backend under a fresh name, after ``setup(backend)``, with
    ``kernels`` (op name -> kernel on NumPy arrays). Returns the backend's name."""
    name = f"nn_test_backend_{next(_ids)}"
    backend = make_backend(name=name, aliases=())
    if setup is not None:
        setup(backend)
    mod = types.ModuleType(f"{name}_plugin")
    mod.PLUGTORCH_CONTRACT = CONTRACT_VERSION

    @hookimpl
    def plugtorch_register(registrar):
        registrar.add_backend(backend)
        for op, fn in (kernels or {}).items():
            registrar.add_kernel(op, name, fn)

    mod.plugtorch_register = plugtorch_register
    plugtorch.register_plugin(mod)
    return name


def device_like_backend():
    """(name, reads): a backend whose memory is not host memory; ``reads`` lists each host read."""
    reads: list = []

    def setup(backend):
        backend.host_memory = False
        to_host = backend.primitives["to_host"]

        def counted(x):
            reads.append(tuple(x.shape))
            return to_host(x)
        backend.primitives["to_host"] = counted
    return register(setup), reads
