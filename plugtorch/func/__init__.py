"""plugtorch.func: composable function transforms, as torch.func.

``vmap`` maps a function written for one example over a batch; ``grad``, ``grad_and_value``,
``vjp`` and ``jacrev`` differentiate functions in reverse mode, ``jvp``, ``jacfwd`` and
``hessian`` in forward mode; ``functional_call`` runs a module with parameters and buffers
given for the call, and ``stack_module_state`` stacks those of several modules for ``vmap``.
The transforms compose: ``vmap(grad(f))`` gives per-example gradients, ``grad(grad(f))`` and
``jacrev(jacrev(f))`` second derivatives (docs/func.md).
"""
from __future__ import annotations

from ._batching import register_batching_rule
from ._forward import hessian, jacfwd, jvp
from ._module import functional_call, stack_module_state
from ._reverse import grad, grad_and_value, jacrev, vjp
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian", "functional_call",
           "stack_module_state", "register_batching_rule"]
