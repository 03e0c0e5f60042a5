"""``functional_call`` and ``stack_module_state``: a module's parameters as a function's inputs.

``functional_call`` runs a module with tensors given for some of its parameters and buffers
(the entries of its ``_parameters``/``_buffers`` tables are swapped for the call and put back
afterwards, also when the call raises), so the transforms can differentiate or vmap a module
with respect to them. ``stack_module_state`` stacks the parameters and buffers of several
modules of one class, ready for ``vmap(functional_call...)`` over an ensemble.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.tensor import Tensor

__all__ = ["functional_call", "stack_module_state"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """``module(*args, **kwargs)`` with the named tensors in place of its parameters and buffers."""
    if isinstance(parameter_and_buffer_dicts, dict):
        values = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                             "ambiguous")
        values = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if tie_weights:
        values = _tied(module, values)
    if strict:
        _check_strict(module, values)
    swapped: list[tuple[Any, str, str, Any]] = []  # (owner module, table, name, the old entry)
    try:
        for name, value in values.items():
            owner, leaf = _owner(module, name)
            d = owner.__dict__
            if leaf in d["_parameters"]:
                table = "_parameters"
            elif leaf in d["_buffers"]:
                table = "_buffers"
            else:  # torch sets a name the module does not have, as an attribute, for the call
                swapped.append((owner, "", leaf, d.get(leaf, _ABSENT)))
                d[leaf] = value
                continue
            swapped.append((owner, table, leaf, d[table][leaf]))
            d[table][leaf] = value
        return module(*args, **kwargs)
    finally:
        for owner, table, leaf, old in reversed(swapped):
            d = owner.__dict__
            if not table:
                if old is _ABSENT:
                    d.pop(leaf, None)
                else:
                    d[leaf] = old
            else:
                d[table][leaf] = old


_ABSENT = object()


def _owner(module, name: str):
    *path, leaf = name.split(".")
    owner = module
    for part in path:
        sub = owner.__dict__["_modules"].get(part)
        if sub is None:
            raise AttributeError(f"{owner._get_name()} has no attribute `{part}` (functional_call was given "
                                 f"'{name}')")
        owner = sub
    return owner, leaf


def _tied(module, values: dict) -> dict:
    """``values`` with each given tensor also given for the names tied to the same parameter."""
    names_of: dict[int, list[str]] = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + list(
            module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), []).append(name)
    out = dict(values)
    for names in names_of.values():
        if len(names) < 2:
            continue
        given = [n for n in names if n in values]
        if not given:
            continue
        if any(values[n] is not values[given[0]] for n in given[1:]):
            raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, which are tied. "
                             "Consider using tie_weights=False")
        for n in names:
            out[n] = values[given[0]]
    return out


def _check_strict(module, values: dict) -> None:
    expected = [n for n, _ in module.named_parameters(remove_duplicate=False)] + [
        n for n, _ in module.named_buffers(remove_duplicate=False)]
    missing = [n for n in expected if n not in values]
    unexpected = [n for n in values if n not in expected]
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(), "\n\t".join(errors)))


def stack_module_state(models) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(parameters, buffers) of ``models``, each name's tensors stacked along a new dim 0."""
    from .._ops import stack
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors, name):
        if not (all(t.requires_grad for t in tensors) or not any(t.requires_grad for t in tensors)):
            raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
        out = stack(list(tensors))
        return out.detach().requires_grad_() if tensors[0].requires_grad else out

    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return ({k: stacked([p[k] for p in params], k) for k in params[0]},
            {k: stacked([b[k] for b in buffers], k) for k in buffers[0]})
