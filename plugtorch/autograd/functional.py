"""``Tensor.backward`` and ``autograd.grad``: argument checking around the engine."""
from __future__ import annotations

from ..core.dispatch import edge
from ..core.engine import run_backward
from ..core.ops.creation import ones_like
from ..core.tensor import Tensor


def _as_tuple(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _make_grads(outputs, grad_outputs):
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not out.dtype.is_floating_point:
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {out.dtype.name}"
                )
            g = ones_like(out)
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradient for output {i} must be a Tensor or None, got {type(g).__name__}")
        elif g.shape != out.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a "
                f"shape of {out.shape}."
            )
        grads.append(g)
    return grads


def _refuse_batched(api, tensors):
    """Under plugtorch.func.vmap the graph is recorded on the whole batch, so a batched tensor's
    gradient here would mix the examples: the transforms differentiate inside vmap instead."""
    for t in tensors:
        if getattr(type(t), "vmap_batched", False):
            raise RuntimeError(f"{api}: got a tensor batched by plugtorch.func.vmap; differentiate inside vmap "
                               "with plugtorch.func.grad or plugtorch.func.vjp (vmap(grad(f))) instead")


def _roots(outputs):
    roots = []
    for i, out in enumerate(outputs):
        node = edge(out)
        if node is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        roots.append(node)
    return roots


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad`` (torch.autograd.backward)."""
    if type(tensors) is Tensor and grad_tensors is None and inputs is None:
        # loss.backward(), once per training step: the checks below for one plain tensor (never a
        # batched one, a subclass) without their loops; any that fails takes the general path to say so
        node = edge(tensors)
        if node is not None and tensors.numel() == 1 and tensors.dtype.is_floating_point:
            run_backward([node], [ones_like(tensors)], create_graph if retain_graph is None else retain_graph,
                         create_graph)
            return
    outputs = _as_tuple(tensors)
    _refuse_batched("backward", outputs)
    if grad_tensors is None:
        grad_tensors = [None] * len(outputs)
    grads = _make_grads(outputs, _as_tuple(grad_tensors) if isinstance(grad_tensors, Tensor) else grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    roots = _roots(outputs)
    if inputs is None:
        run_backward(roots, grads, retain_graph, create_graph)
        return
    inputs = _as_tuple(inputs)
    targets = {edge(t): t for t in inputs}
    captured = run_backward(roots, grads, retain_graph, create_graph, capture=set(targets), accumulate=False)
    from ..core.engine import _accumulate
    for node, t in targets.items():
        g = captured.get(node)
        if g is not None:
            _accumulate(t, g, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated)."""
    outputs = _as_tuple(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _as_tuple(inputs)
    _refuse_batched("autograd.grad", outputs + inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    grads = _make_grads(outputs, _as_tuple(grad_outputs))
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    nodes = []
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        nodes.append(edge(t))
    captured = run_backward(_roots(outputs), grads, retain_graph, create_graph,
                            capture=set(nodes), accumulate=False)
    result = []
    for t, node in zip(inputs, nodes):
        g = captured.get(node)
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                from ..core.ops.creation import zeros_like
                g = zeros_like(t)
        elif not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result) if not single else (result[0],)
