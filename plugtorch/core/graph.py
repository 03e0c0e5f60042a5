"""Autograd graph nodes.

A :class:`Node` is recorded by each differentiable op whose inputs need grad. It
keeps only what the op's derivative rule reads (saved inputs and/or output, plus
the input shapes and dtypes) and the edges to the nodes of its inputs. Leaves that
require grad get an :class:`AccumulateGrad` node, created on first use. A node with
several outputs (a custom ``autograd.Function``'s) is reached through one
:class:`OutputNode` per output, so an edge still names one node and the engine's
path for single-output nodes stays as it is.

The node is also the context its rule receives — for built-in ops and for
``autograd.Function`` alike: ``ctx.saved`` (``ctx.saved_tensors``), ``ctx.output``,
``ctx.attrs`` (always a dict of named fields), ``ctx.needs_input_grad`` and
``ctx.meta`` (each operand's shape and dtype; None for a number or None operand).
A Function's ctx is a subclass of :class:`Node` (``autograd/function.py``).
"""
from __future__ import annotations

from .grad_mode import _state as _grad_state

_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class Node:
    """A node of the graph. Built-in ops make their nodes of a subclass named as torch names the
    node (``MmBackward0``: ``node_names.class_for``), which adds no fields; ``op`` is the op's name
    in the op table (``"matmul"``)."""

    __slots__ = ("op", "rule", "next", "meta", "saved", "versions", "_output", "attrs",
                 "pre_hooks", "released", "trace", "__weakref__")

    def __init__(self, op, rule, next_, meta, saved, output, attrs):
        self.op = op
        self.rule = rule
        self.next = next_          # per input: Node, AccumulateGrad or None
        self.meta = meta           # per input: (shape, dtype), or None for a number/None operand
        self.saved = saved         # tuple of input tensors the rule reads, or None
        self.versions = None       # their version counters at save time
        self._output = output      # the output, when the rule reads it (see `output`)
        self.attrs = attrs         # the op's non-tensor arguments, by name (a dict)
        self.pre_hooks = None
        self.released = False
        self.trace = None          # creation stack, under detect_anomaly

    # -- what derivative rules see -------------------------------------------------
    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        nxt = self.next
        if len(nxt) == 2:  # binary ops, the commonest rules that read it: unrolled
            return (nxt[0] is not None, nxt[1] is not None)
        return tuple([n is not None for n in nxt])  # a list comprehension: rules read it per call

    @property
    def output(self):
        """The op's output, for a rule that reads it (``ctx.output``).

        The node keeps an alias of it (``dispatch._attach``): the same array and version counter
        without ``grad_fn``, as torch's SavedVariable keeps an output, since the output itself
        would hold the node that holds it — a cycle only the garbage collector frees, so a result
        dropped without a backward (an evaluation loop without ``no_grad``) would stay in memory.
        Read while grad mode is on (a rule under ``create_graph``), it is the output again as
        this node's result, so a gradient of the rule's result flows back through the node.
        """
        o = self._output
        if o is None or o.grad_fn is not None or not _grad_state.enabled:
            return o
        from .dispatch import as_result_of
        return as_result_of(o, self)

    @output.setter
    def output(self, value) -> None:
        self._output = value

    @property
    def saved_tensors(self) -> tuple:
        if self.released:
            raise RuntimeError(_FREED_MSG)
        return self.saved

    def __repr__(self) -> str:
        return f"<{self.name()}>"

    def name(self) -> str:
        """torch's name for the node: ``log_softmax`` -> ``LogSoftmaxBackward0``, a custom op
        ``mylib::swish`` -> ``MylibSwishBackward0``; exceptions in ``node_names``."""
        if type(self) is not Node:
            return type(self).__name__
        from .node_names import torch_name
        return torch_name(self)

    @property
    def next_functions(self):
        # torch's (node, output_nr) pairs: an OutputNode stands for output `index` of its node
        return tuple((n.fn, n.index) if type(n) is OutputNode else (n, 0) for n in self.next)

    def saved_name(self, i: int) -> str:
        """How the version-check error names saved tensor ``i``."""
        return f"input {i}"


class OutputNode:
    """Output ``index`` of ``fn``, a node with several outputs: what that output's ``grad_fn`` is.

    The engine files the gradient reaching it under ``index`` in the list of per-output
    gradients ``fn`` receives (length ``fn.n_outputs``; None where nothing arrived).
    Anything else read off it (``name()``, ``saved_tensors``, ``next_functions``, attributes
    a Function set on its ctx) is ``fn``'s, as torch's ``grad_fn`` of every output is the
    Function's one node.
    """

    __slots__ = ("fn", "index", "next", "pre_hooks", "__weakref__")

    def __init__(self, fn, index: int):
        self.fn = fn
        self.index = index
        self.next = (fn,)
        self.pre_hooks = None

    def __getattr__(self, name):
        if name.startswith("__") or name in OutputNode.__slots__:  # unset slot, copy protocols
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return f"<{self.fn.name()}>"

    @property
    def next_functions(self):
        return self.fn.next_functions


class AccumulateGrad:
    """The graph node of a leaf tensor that requires grad: sums gradients into ``.grad``."""

    __slots__ = ("variable", "pre_hooks", "post_hooks", "__weakref__")
    next = ()

    def __init__(self, variable):
        self.variable = variable
        self.pre_hooks = None
        self.post_hooks = None  # called with the tensor after .grad is updated (DDP uses them)

    def __repr__(self) -> str:
        return "<AccumulateGrad>"

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # what torch's says

    @property
    def next_functions(self):
        return ()
