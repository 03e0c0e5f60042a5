"""``OpDef``: the one declaration of an op.

Everything about an op is written here once, and everything else is derived from it:

* its public face: ``function`` (torch's parameter names and defaults), where it is
  ``exposed`` (``plugtorch.*``, ``Tensor.*``, ``nn.functional.*``), ``aliases`` and
  whether an in-place ``Tensor.<name>_`` exists;
* how it computes: the backend ``primitive`` it maps to, a ``lower`` function that
  builds it from primitives on native arrays, or its ``decompose``-ition into other
  ops — a backend may register a kernel of its own for it, which dispatch prefers;
* its ``derivative`` rule, written with plugtorch ops (so it is differentiable
  itself), and what the rule reads (``save``: "inputs" for every operand, an operand's
  position for that one only, "output");
* its forward derivative ``jvp`` (forward-mode AD), also written with plugtorch ops;
* its dtype policy (``dtypes``), its docs and its conformance ``samples``.

How an op is called (the calling convention every kernel, lowering and decomposition
shares): the *operands* — the tensors it computes on; numbers or ``None`` where the
signature allows them — come positionally, the other arguments (*attrs*, already
normalised by the op's ``function``) by keyword. A ``variadic`` op takes one sequence
of tensors instead (``cat``, ``stack``, ``einsum``): kernels receive a list of arrays.

A derivative rule is ``rule(ctx, grad) -> one gradient (or None) per operand``. ``ctx``
is the graph node: ``ctx.saved`` (the operands, if ``save`` has "inputs"),
``ctx.output`` (if ``save`` has "output"), ``ctx.attrs`` (a dict), and
``ctx.needs_input_grad``.

A forward derivative is ``jvp(primals, tangents, output, attrs) -> the output's tangent`` (a
tuple, one per output, for a ``multi_output`` op): ``primals`` are the operands, ``tangents``
one per operand (None where it has none), ``output`` what the op returned. An op without one
still has forward derivatives (``plugtorch.autograd.forward_ad``): through its decomposition, or
its ``derivative`` transposed.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .complex_policy import guard_rule
from .node_names import node_class, node_namer

__all__ = ["OpDef", "PLACES", "inherit"]

# What a front-end may name in ``exposed``.
PLACES = ("plugtorch", "Tensor", "nn.functional")


@dataclass(eq=False, frozen=True, slots=True)
class OpDef:
    """An op's definition, independent of any backend (see the module docstring). Frozen: a
    changed definition is a new one (``dataclasses.replace``), registered in its place."""

    name: str
    decompose: Callable | None = None
    derivative: Callable | None = None
    save: tuple[str | int, ...] | str = ()
    doc: str = ""
    plugin: str | None = None
    samples: Callable | None = None
    primitive: str | None = None
    lower: Callable | None = None
    dtypes: str = ""
    function: Callable | None = None
    exposed: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    method: Callable | None = None
    inplace: bool = False
    variadic: bool = False
    view: bool = False
    multi_output: bool = False
    no_kernel: str = ""
    module: str = ""
    jvp: Callable | None = None
    # the derivative for complex operands where ``derivative`` is written for real ones only
    # (mul's and div's carry the conjugate): a node with a complex operand runs this instead
    complex_derivative: Callable | None = None
    # what dispatch reads on every node, worked out from the fields above (__post_init__): the
    # rule a node of this op runs when a kernel (or the primitive) computed it, right for every
    # dtype; ``real_rule``, the same without the complex checks and conjugates, which the records
    # give a node none of whose operands is complex (``rule`` itself where the two are one);
    # what the rule saves, and the class of its nodes (None where the call decides it:
    # node_namer(meta, attrs))
    rule: Callable | None = field(init=False, repr=False)
    real_rule: Callable | None = field(init=False, repr=False)
    saved_positions: bool | frozenset[int] | None = field(init=False, repr=False)
    saves_output: bool = field(init=False, repr=False)
    node_class: type | None = field(init=False, repr=False)
    node_namer: Callable | None = field(init=False, repr=False)

    def __post_init__(self):
        setattr_ = object.__setattr__
        save = (self.save,) if isinstance(self.save, str) else tuple(self.save)
        setattr_(self, "save", save)
        bad = [s for s in save if s not in ("inputs", "output") and not isinstance(s, int)]
        if bad:
            raise ValueError(f"OpDef '{self.name}': save may hold 'inputs', 'output' and operand "
                             f"positions, not {bad}")
        if self.complex_derivative is not None and self.derivative is None:
            raise ValueError(f"OpDef '{self.name}': complex_derivative replaces derivative for complex "
                             "operands; give derivative too")
        unknown = set(self.exposed) - set(PLACES)
        if unknown:
            raise ValueError(f"OpDef '{self.name}': exposed names {sorted(unknown)}; use some of {PLACES}")
        # A node holds the op's derivative and what its save names; for an op with a decomposition
        # but no derivative, the decomposition re-run from all the operands and differentiated;
        # for neither, there is no node (the op is not differentiable).
        rule: Callable | None = self.derivative
        positions: bool | frozenset[int] | None = True
        output = False
        if rule is None and self.decompose is not None:
            rule = decomposition_rule(self.decompose, self.variadic)
        else:
            picked = frozenset(s for s in save if isinstance(s, int))
            positions, output = True if "inputs" in save else (picked or None), "output" in save
        # a rule of the op's own that is not known right for complex inputs refuses them (or, for a
        # holomorphic op, is conjugated); a decomposition's gradient is its ops' rules, guarded each
        # (a record picks the unguarded rule where no operand is complex, so real nodes pay nothing)
        if rule is not self.derivative:
            setattr_(self, "rule", rule)
        elif self.complex_derivative is not None:
            setattr_(self, "rule", self.complex_derivative)
        else:
            setattr_(self, "rule", guard_rule(self.name, rule))
        setattr_(self, "real_rule", rule)
        setattr_(self, "saved_positions", positions)
        setattr_(self, "saves_output", output)
        setattr_(self, "node_class", node_class(self.name))
        setattr_(self, "node_namer", node_namer(self.name))

    @property
    def kernel_refusal(self) -> str:
        """Why no backend kernel can serve this op ("" when kernels are welcome)."""
        if self.view:
            return (f"op '{self.name}' returns a view of its input (writes through it reach the "
                    "input), built from the view primitives reshape, permute, broadcast_to and "
                    "getitem; a kernel could not keep that guarantee, so register those primitives "
                    "instead")
        if self.no_kernel:
            return f"op '{self.name}' {self.no_kernel}"
        if self.multi_output:
            return (f"op '{self.name}' returns several tensors, and kernels return one array; "
                    "register kernels for the ops it is built from instead")
        return ""

    def summary(self) -> str:
        """One line for the catalog: ``doc``, else the first line of the function's docstring."""
        return self.doc or _first_line(self.function) or _first_line(self.decompose)

    def describe_kind(self) -> str:
        """How the op computes when a backend has no kernel of its own (for the catalog)."""
        if self.primitive is not None:
            return f"primitive `{self.primitive}`"
        if self.lower is not None:
            return "lowered to primitives"
        if self.decompose is not None:
            return "composite" + (" + rule" if self.derivative is not None else "")
        return "kernel only"

    def describe_jvp(self) -> str:
        """Where the op's forward derivative comes from (for the catalog; see forward_ad)."""
        if self.jvp is not None:
            return "rule"
        if self.derivative is None and self.decompose is not None:
            return "via decomposition"
        return "via vjp" if self.derivative is not None else "—"


def decomposition_rule(decompose: Callable, variadic: bool = False) -> Callable:
    """The derivative of an op whose kernel ran but which has no rule of its own: its
    decomposition is re-run from the saved operands and differentiated with autograd.grad, so
    the gradient is the one the ops it is built from define (and with create_graph the re-run
    stays in the graph). It costs a second forward: hot ops carry a derivative instead,
    written with registered ops a backend can fuse."""
    def rule(ctx, g):
        from ..autograd.functional import grad
        from .grad_mode import _state, enable_grad
        create = _state.enabled
        with enable_grad():
            # Each operand is differentiated through an alias of its own: autograd.grad gives
            # total derivatives, so an operand computed from another (op(x, 2 * x)) would bring
            # the other's path too - counted again by the engine, and walked (and freed) below.
            operands = [t.view_as(t) if nxt is not None else t for t, nxt in zip(ctx.saved, ctx.next)]
            wanted = [t for t, nxt in zip(operands, ctx.next) if nxt is not None]
            out = decompose(*((operands,) if variadic else operands), **ctx.attrs)
            grads = iter(grad(out, wanted, g, create_graph=create, allow_unused=True))
        return tuple(next(grads) if nxt is not None else None for nxt in ctx.next)
    return rule


def inherit(new: OpDef, old: OpDef) -> OpDef:
    """What an overriding definition keeps of the one it replaces: the op's public face.

    An override replaces how an op computes and differentiates; its signature, where it
    is exposed, its docs and its samples stay unless the override gives its own (a
    different signature is a different op: define it under a new name). Returns the
    definition to register (``new`` is left as it is).
    """
    return replace(
        new, function=old.function, method=old.method if new.method is None else new.method,
        exposed=new.exposed or old.exposed, aliases=new.aliases or old.aliases, inplace=new.inplace or old.inplace,
        variadic=old.variadic, view=old.view, multi_output=old.multi_output, no_kernel=new.no_kernel or old.no_kernel,
        dtypes=new.dtypes or old.dtypes, samples=new.samples or old.samples, module=new.module or old.module,
        doc=new.doc or old.summary())


def _first_line(fn: Any) -> str:
    return ((getattr(fn, "__doc__", None) or "").strip().split("\n") or [""])[0]
