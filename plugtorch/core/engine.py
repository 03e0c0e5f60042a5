"""The backward pass: an iterative walk of the graph in dependency order.

No recursion anywhere, so a chain of 100,000 ops backprops fine. Gradients that
meet at a node are summed before the node runs (each node runs once), and each
node's saved values are dropped after it runs unless ``retain_graph`` is set.
A node with several outputs (a custom Function's) receives a list of per-output
gradients, filled by the :class:`~.graph.OutputNode` of each of its outputs.

:meth:`_Walk.step` is what one node does, and the reference. ``_native.c``'s ``drain`` repeats
its paths for a built-in op's node and a leaf's in C, and hands it every other node: at small
sizes the pass is mostly this bookkeeping (a 10-op chain's backward took 94 us with the Python
loop, torch's 84). Where the core's C paths are off (``native.status()``), the Python loop runs
every node; tests run both (``engine_loop``), and must see the same bits.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

from . import anomaly, debug, native
from .dispatch import wrap
from .grad_mode import _state as _grad_state
from .graph import _FREED_MSG, AccumulateGrad, Node, OutputNode
from .optable import MODES


def _collect(roots, want_parents):
    """Number of incoming edges per reachable node (and each node's parents, if asked)."""
    deps: dict = {}
    parents: dict | None = {} if want_parents else None
    seen = set(roots)
    stack = list(seen)
    while stack:
        node = stack.pop()
        for child in node.next:
            if child is None:
                continue
            deps[child] = deps.get(child, 0) + 1
            if parents is not None:
                parents.setdefault(child, []).append(node)
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return deps, parents


def _needed(targets, parents):
    """Nodes that lead to some target: the only ones autograd.grad must run.

    A target itself runs only if it leads to another target; otherwise its gradient is
    captured and the walk stops there, leaving its saved values for a later backward.
    """
    needed = set()
    stack = list(targets)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


def _fit_to_input(node, i, g):
    """Make a rule's gradient match its input's shape and dtype, or say which rule is wrong."""
    shape, dtype = node.meta[i]
    if g._data.shape != shape:
        from .ops.shape import sum_to
        try:
            g = sum_to(g, shape)
        except ValueError:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - got "
                f"{list(g.shape)} but expected shape compatible with {list(shape)}"
            ) from None
    if g.dtype is not dtype and dtype.is_floating_point:
        g = g.to(dtype)
    return g


RUNS = [0]  # backward passes run so far (plugtorch.compile asks whether one ran while capturing)


def run_backward(roots: Sequence[Node], root_grads: Sequence[Any], retain_graph: bool, create_graph: bool,
                 capture: Collection[Node] | None = None, accumulate: bool = True) -> Any:
    """Propagate ``root_grads`` from the ``roots`` nodes.

    capture: nodes whose incoming gradient is returned (autograd.grad); when given,
    only nodes leading to them run and leaves are not accumulated into.
    """
    RUNS[0] += 1
    deps, parents = _collect(roots, capture is not None)
    pending: dict = {}
    for node, g in zip(roots, root_grads):
        pending[node] = pending[node] + g if node in pending else g
    walk = _Walk(deps, pending, capture, _needed(capture, parents) if capture is not None else None,
                 retain_graph, create_graph, accumulate)
    ready = walk.ready
    ready.extend(n for n in dict.fromkeys(roots) if deps.get(n, 0) == 0)

    prev_mode = _grad_state.enabled
    _grad_state.enabled = create_graph
    try:
        if MODES.on:  # once per pass: a mode that names the nodes it sees run (the profiler's ranges)
            _loop_in_modes(walk)
        elif _native is not None and capture is None and accumulate and not walk.check_nan:
            # the same steps as below, in C for built-in nodes and leaves (_native.c)
            _native.drain(ready, pending, deps, retain_graph, create_graph, walk.step)
        else:
            step, ready_pop, pending_pop = walk.step, ready.pop, pending.pop
            while ready:
                node = ready_pop()
                step(node, pending_pop(node, None))
    finally:
        _grad_state.enabled = prev_mode
    return walk.captured


def _loop_in_modes(walk):
    """The Python loop, each node run through the ``node_step(step, node, g)`` of the modes in force
    that have one, which wrap it as they need: the innermost outermost, as it sees op calls first."""
    step = walk.step
    for mode in MODES.stack:
        node_step = getattr(mode, "node_step", None)
        if node_step is not None:
            step = partial(node_step, step)
    ready, pending = walk.ready, walk.pending
    while ready:
        node = ready.pop()
        step(node, pending.pop(node, None))


class _Walk:
    """One backward pass: what is pending and ready, and :meth:`step`, what one node does."""

    __slots__ = ("deps", "pending", "ready", "capture", "needed", "captured", "retain_graph",
                 "create_graph", "accumulate", "check_nan")

    def __init__(self, deps, pending, capture, needed, retain_graph, create_graph, accumulate):
        self.deps = deps            # node -> how many nodes still owe it a gradient
        self.pending = pending      # node -> its gradient so far
        self.ready = []             # nodes owed nothing more, run last in first out
        self.capture = capture
        self.needed = needed        # with capture: the nodes that lead to a captured one
        self.captured: dict = {}
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.accumulate = accumulate
        self.check_nan = anomaly.is_enabled()

    def step(self, node, g):
        """Run ``node`` on its summed gradient ``g`` (None if none reached it), then pass each
        input its gradient. _native.c's drain repeats the paths for a built-in op's node and a leaf's."""
        deps, pending, ready, needed = self.deps, self.pending, self.ready, self.needed
        create_graph = self.create_graph
        if g is not None and node.pre_hooks:
            if debug.capture.active:
                debug.hook_runs_in_capture()
            for hook in list(node.pre_hooks.values()):
                out = hook(g)
                if out is not None:
                    g = out
        if self.capture is not None and node in self.capture:
            self.captured[node] = g
        if type(node) is not Node:  # one check on the hot path
            if type(node) is AccumulateGrad:
                if g is not None and self.accumulate:
                    _accumulate(node.variable, g, create_graph)
                    _post_hooks(node)
                return
            if type(node) is OutputNode and g is not None and (needed is None or node in needed):
                # One output of a multi-output node: its node receives the list of
                # per-output gradients (each OutputNode runs once, so no sum is needed).
                fn = node.fn
                slots = pending.get(fn)
                if slots is None:
                    slots = pending[fn] = [None] * fn.n_outputs
                slots[node.index] = g
                left = deps[fn] - 1
                deps[fn] = left
                if left == 0:
                    ready.append(fn)
                return
            # a custom Function's node (a Node subclass) runs as a built-in op's does
        if g is None or (needed is not None and node not in needed):
            # Nothing flows through this node; its inputs still stop waiting on it.
            for child in node.next:
                if child is not None:
                    left = deps[child] - 1
                    deps[child] = left
                    if left == 0:
                        ready.append(child)
            return
        if node.released:
            raise RuntimeError(_FREED_MSG)
        versions = node.versions
        if versions is not None:  # inline, as it runs for most nodes; _check_versions raises
            saved = node.saved
            if saved is not None:
                for t, v in zip(saved, versions):  # (the output's version, if kept, comes last)
                    if v is not None and t._vc[0] != v:
                        _check_versions(node)
            out = node._output
            if out is not None and out._vc[0] != versions[-1]:
                _check_versions(node)
        grads = node.rule(node, g)
        if type(grads) is not tuple:
            grads = (grads,)
        if len(grads) != len(node.next):
            _wrong_count(node, grads)
        if self.check_nan:
            anomaly.check_grads(node, grads)
        if not self.retain_graph and node.versions is not None:
            # Only nodes that saved values are spent; like torch, the rest may run again.
            node.saved = None
            node._output = None
            node.released = True
        i = 0
        for child, gi in zip(node.next, grads):
            if child is not None:
                if gi is not None:
                    shape, dtype = node.meta[i]
                    if gi._data.shape != shape or gi.dtype is not dtype:
                        gi = _fit_to_input(node, i, gi)
                    prev = pending.get(child)
                    pending[child] = gi if prev is None else _sum(prev, gi, create_graph)
                left = deps[child] - 1
                deps[child] = left
                if left == 0:
                    ready.append(child)
            i += 1
        # on return, pending alone holds the gradients: a leaf's gradient held nowhere else is owned


def _wrong_count(node, grads):
    raise RuntimeError(
        f"function {node.name()} returned an incorrect number of gradients "
        f"(expected {len(node.next)}, got {len(grads)})"
    )


def _post_hooks(leaf_node):
    """A leaf's hooks that run after its ``.grad`` is updated (DDP's)."""
    if leaf_node.post_hooks:
        if debug.capture.active:
            debug.hook_runs_in_capture()
        for hook in list(leaf_node.post_hooks.values()):
            hook(leaf_node.variable)


def _sum(a, b, create_graph):
    """Two gradients for one input, which share its shape and dtype: without create_graph, the
    backend's add kernel on their arrays (what ``a + b`` runs, minus its promotion checks and
    the graph it records), as this runs once per extra use of every tensor."""
    if not create_graph and not MODES.on:  # under a mode the add is an op call it sees
        backend = a._backend
        add = backend.kernels.get("add")
        if add is not None and b._backend is backend:
            return wrap(add(a._data, b._data), backend)
    return a + b


def _check_versions(node):
    tensors = (node.saved or ()) + ((node._output,) if node._output is not None else ())
    for i, (t, v) in enumerate(zip(tensors, node.versions)):
        if v is not None and t._vc[0] != v:
            what = "the output" if t is node._output else node.saved_name(i)
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{t.dtype.name} {list(t.shape)}], which is {what} of "
                f"{node.name()}, is at version {t._vc[0]}; expected version {v} instead. "
                "Hint: enable anomaly detection to find the operation that failed to compute its "
                "gradient, with plugtorch.autograd.set_detect_anomaly(True)."
            )


def _held_by_one_local(t):
    return sys.getrefcount(t)


def _sole_reference_counts():
    """What ``sys.getrefcount`` gives, on this interpreter, for a tensor held only by the
    caller's local and a parameter, and for an array held only by one slot: _accumulate's
    call, counted the way it counts (None where there are no reference counts, as on PyPy)."""
    if not hasattr(sys, "getrefcount"):
        return None

    class Holder:
        __slots__ = ("_data",)
        _data: object

    tensor, holder = object(), Holder()
    holder._data = object()
    return _held_by_one_local(tensor), sys.getrefcount(holder._data)


_SOLE = _sole_reference_counts()
# While plugtorch.compile captures, its record holds each result it saw; a replay makes those
# arrays anew, so such references share nothing (compiler/recording.py sets this to count them).
recorded_refs: Callable[[Any], int] | None = None


def _owned(g) -> bool:
    """Whether nothing but the engine holds ``g`` and nothing but ``g`` holds its array, which is
    no view: then ``.grad`` may take it as it is, as PyTorch's AccumulateGrad takes a gradient
    whose use count says no one else has it. Called from _accumulate only (the counts assume its
    frame and its caller's). Any other holder - another leaf of the same gradient (a + b), a
    hook that kept it, a tensor sharing its array, a plugtorch.compile buffer - adds to a count,
    and the gradient is copied; a capture's record of the result does not (``recorded_refs``)."""
    if _SOLE is None or sys.getrefcount(g) != _SOLE[0] + 1:  # + 1: this frame's parameter
        return False
    recorded = 0 if recorded_refs is None else recorded_refs(g._data)
    return sys.getrefcount(g._data) == _SOLE[1] + recorded and getattr(g._data, "base", 0) is None


def _accumulate(leaf, g, create_graph):
    if not create_graph and (g.requires_grad or g.grad_fn is not None):
        g = g.detach()
    if leaf.grad is None:
        # Own the memory: the same gradient tensor can reach several leaves (a + b), and
        # optimizers and users update .grad in place; a gradient no one else holds is owned.
        leaf.grad = g if create_graph or _owned(g) else g.clone()
    else:
        prev = leaf.grad
        if prev.dtype is g.dtype and prev._data.shape == g._data.shape:
            leaf.grad = _sum(prev, g, create_graph)
        else:  # a .grad the user set to another shape or dtype: the op's own checks and errors
            leaf.grad = prev + g


# _native.c's loop, given the helpers above (None where the core's C paths are off)
_native = native.ext
if _native is not None:
    _native.configure_walk(_accumulate, _sum, _fit_to_input, _check_versions, _wrong_count, _post_hooks)
