"""``state_dict`` / ``load_state_dict``: a Module's parameters and persistent buffers by name.

Kept apart from ``module.py``: this is the serialisation half of a Module, and
the half a checkpoint or a port from PyTorch reads.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ...core.grad_mode import no_grad
from ...core.tensor import Tensor
from ..parameter import Parameter

if TYPE_CHECKING:
    from .module import Module


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class StateDictMixin:
    """Mixed into ``Module``; reads its ``_parameters``, ``_buffers`` and ``_modules`` tables."""

    # Module's tables, made in Module.__init__
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: dict[str, Module | None]

    if TYPE_CHECKING:  # Module's methods, which this half calls
        def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                          remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]: ...

        def _get_name(self) -> str: ...

    def _save_to_state_dict(self, destination: dict[str, Tensor], prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        """An ordered ``name -> tensor`` dict of parameters and persistent buffers.

        The tensors share memory with the module's (detached unless ``keep_vars``).
        """
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, local_metadata: dict[str, Any],
                              strict: bool, missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Load this module's own entries (torch's signature, so ported overrides work)."""
        assign = local_metadata.get("assign_to_params_buffers", False)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected plugtorch.Tensor from '
                    f"checkpoint but received {type(value).__name__}"
                )
                continue
            if value.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {param.shape}."
                )
                continue
            with no_grad():
                if assign:
                    new = value.to(device=param.device)
                    if isinstance(param, Parameter):
                        setattr(self, name, Parameter(new, requires_grad=param.requires_grad))
                    else:
                        self._buffers[name] = new
                else:
                    param.copy_(value)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix):
                    continue
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` into this module and its children.

        Shape mismatches (and non-tensor values) are always errors; with ``strict`` so
        are missing and unexpected keys. All problems are listed in one error. Returns
        ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        state_dict = OrderedDict(state_dict)  # overrides of _load_from_state_dict may edit it
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        # A module reachable under two names is loaded under both, as state_dict saves both.
        for name, module in self.named_modules(remove_duplicate=False):
            prefix = name + "." if name else ""
            metadata = {"assign_to_params_buffers": assign}
            module._load_from_state_dict(state_dict, prefix, metadata, True, missing, unexpected,
                                         errors)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)
