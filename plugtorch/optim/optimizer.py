"""The optimizer base class: parameter groups, per-parameter state, and their state dict.

``step`` here loops over the parameters that have a gradient and calls ``_update(p, group)``,
which a subclass implements to say how one parameter moves (Adam, RMSprop); a subclass
that needs the whole group at once (SGD) overrides ``step`` instead. The rest is
bookkeeping shared by all of them, with PyTorch's names, formats and error messages so
code and checkpoints written for ``torch.optim`` read the same here.
"""
from __future__ import annotations

import functools
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any, TypeVar, cast

from ..compiler import capturing, guard, not_capturable
from ..core import profiling
from ..core.grad_mode import enable_grad, no_grad
from ..core.tensor import Tensor
from ..profiler.ranges import record_function

# What an optimizer takes as ``params``: tensors, parameter groups, or (name, tensor) pairs.
ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]

_StepT = TypeVar("_StepT", bound=Callable[..., Any])


class _RequiredParameter:
    """Marks a default that every parameter group must set itself (like SGD's lr once was)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj: object) -> str:
    return f"plugtorch.{type(obj).__name__}" if isinstance(obj, Tensor) else type(obj).__name__


def _marks_stepped(step: _StepT) -> _StepT:
    """Wrap a ``step`` so the optimizer records that it ran: a scheduler stepped before its
    optimizer ever was warns, as torch's does (it skips the schedule's first value)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._opt_called = True
        if capturing():
            if not getattr(self, "_capturable_step", False):
                not_capturable(f"{type(self).__name__}.step computes its update from Python state (step counts, "
                               "learning rate) that a replay would not see; Adam, AdamW and SGD can be captured")
            guard(self._captured_state, identity=True)
        if profiling.ACTIVE:  # a profile records: the step is a range named as torch's
            with record_function(f"Optimizer.step#{type(self).__name__}.step"):
                return step(self, *args, **kwargs)
        return step(self, *args, **kwargs)
    return cast(_StepT, wrapper)  # wraps() keeps step's signature, which the checker cannot follow


class Optimizer:
    """Base class of all optimizers.

    ``params`` is an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts
    (parameter groups) each holding ``"params"`` and any per-group options that
    override ``defaults``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # subclasses that write their own step (SGD, user optimizers)
            # replacing the subclass's own method by its wrapped form is the point here
            cls.step = _marks_stepped(cls.__dict__["step"])  # type: ignore[method-assign]

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))
        if defaults.get("differentiable"):
            raise RuntimeError(f"{type(self).__name__}(differentiable=True) is not supported: "
                               "plugtorch's optimizers update parameters in place under no_grad")
        if defaults.get("fused") and not getattr(self, "_fused", False):
            raise RuntimeError(f"{type(self).__name__}(fused=True) is not supported: plugtorch has "
                               "no fused optimizer kernels; leave fused=None")
        # foreach and capturable are speed/CUDA-graph hints in PyTorch; results do not depend on them.
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        groups: list[Any] = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(dict(group))

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key not in ("params", "param_names"):
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # -- parameter groups -------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters, with options falling back to the optimizer's defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but "
                            "the ordering of tensors in sets will change between runs. Please use "
                            "a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        tensors = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. "
                                 "Some param names are missing")
            param_group["param_names"] = names
        param_group["params"] = tensors

        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        if len({id(p) for p in tensors}) != len(tensors):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error", stacklevel=3)

        seen: set[int] = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if any(id(p) in seen for p in tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # -- gradients ----------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors (to None by default, as in PyTorch)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    @_marks_stepped
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Re-evaluate the loss with ``closure`` (if given), then update every parameter that has a
        gradient, under no_grad. Subclasses implement ``_update(p, group)``, or override this."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, group)
        return loss

    def _captured_state(self) -> list:
        """What a captured step reads besides the parameters' values, as objects a replay must
        find again: the groups (a replay rereads their options, such as the learning rate,
        from these dicts), their parameters, the state dict of each and its tensors (which
        ``load_state_dict`` replaces), and each group's ``_captured_options``."""
        state = self.state
        out: list = [state, self.param_groups]
        for group in self.param_groups:
            out.append(group)
            out += self._captured_options(group)
            out += group["params"]
        # the state dicts as the table holds them, keys and values, rather than looked up per
        # parameter: this runs before every replay, and a tensor's hash is a Python call
        out += state.keys()
        out += state.values()
        out += [v for s in state.values() for v in s.values() if isinstance(v, Tensor)]
        return out

    def _captured_options(self, group: dict[str, Any]) -> tuple:
        """The options of a group that decide which kernels a step calls, where the update's
        refreshed attributes do not cover them (``SGD``'s momentum on or off)."""
        return ()

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement _update(p, group) or step(closure=None)")

    @staticmethod
    def _evaluate(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- state dict ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are replaced by their position across all groups, so the dict
        can be loaded into an optimizer built over a fresh copy of the model. The
        state values are the live tensors (not copies), as in PyTorch.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: _saved_scalars(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state and options saved by :meth:`state_dict` (tensors are copied in)."""
        state_dict = _copy_state(state_dict)
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            key = int(key) if isinstance(key, str) and key.isdigit() else key
            if key in id_map:
                param = id_map[key]
                state[param] = {k: _cast_like(param, k, v) for k, v in value.items()}
            else:
                state[key] = value
        self.state = state
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            saved = dict(saved)
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
            new_groups.append(saved)
        self.param_groups = new_groups


def _copy_state(sd):
    """A copy of a state dict's containers with tensors cloned, so loading never aliases it."""
    if isinstance(sd, Tensor):
        return sd.detach().clone()
    if isinstance(sd, dict):
        return {k: _copy_state(v) for k, v in sd.items()}
    if isinstance(sd, (list, tuple)):
        return type(sd)(_copy_state(v) for v in sd)
    return sd


# per-parameter scalars that torch keeps as 0-d tensors (step; NAdam's mu_product; ASGD's eta and
# mu) and plugtorch as Python numbers, which its update reads without a tensor's item() per step
_SCALAR_STATE = frozenset({"step", "mu_product", "eta", "mu"})


def _saved_scalars(state):
    """``state`` as torch saves it: the scalars above as 0-d tensors in torch's scalar dtype
    (float32, or float64 where that is the default dtype), so that torch's optimizers load it;
    the live dict itself where there are none."""
    if not any(type(state.get(k)) in (int, float) for k in _SCALAR_STATE):
        return state
    from ..core.dtypes import float32, float64, get_default_dtype
    from ..core.ops.creation import tensor
    dtype = float64 if get_default_dtype() is float64 else float32
    return {k: tensor(float(v), dtype=dtype) if k in _SCALAR_STATE and type(v) in (int, float) else v
            for k, v in state.items()}


def _cast_like(param, key, value):
    """State tensors follow the parameter's dtype and backend; the scalars (torch's 0-d tensors)
    become the Python numbers the updates read: step an int, the others floats."""
    if key in _SCALAR_STATE:
        if isinstance(value, Tensor):
            value = value.item()
            return int(value) if key == "step" else float(value)
        return value
    if not isinstance(value, Tensor):
        return value
    if value.is_floating_point():
        return value.to(dtype=param.dtype, device=param.backend)
    return value.to(device=param.backend)
