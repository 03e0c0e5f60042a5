"""The scheduler base class: ``base_lrs``, ``last_epoch``, ``step()`` writing ``get_lr()`` into
the optimizer's groups, and the state dict, as ``torch.optim.lr_scheduler.LRScheduler``.

Schedules are "chainable": most compute the next rate from the group's current one, so
several schedulers may act on one optimizer, and ``step(epoch)`` (deprecated in torch too)
falls back to a closed form where the scheduler has one (``_get_closed_form_lr``).
"""
from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ...compiler import not_capturable
from ..optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available.")

_StepT = TypeVar("_StepT", bound=Callable[..., Any])


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list:
    """One value per parameter group: a list of that length, or one value repeated."""
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has {n}.")
        return list(param)
    return [param] * n


def _group_values(optimizer: Optimizer, key: str) -> list:
    return [group[key] for group in optimizer.param_groups]


def _warn_get_lr_called_within_step(scheduler: LRScheduler) -> None:
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=3)


def _refuses_capture(step: _StepT) -> _StepT:
    """Wrap a scheduler's ``step``: inside plugtorch.compile's capture it changes the learning rate
    in Python, which a replay would skip, so the capture falls back (all subclasses get this)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        not_capturable(f"{type(self).__name__}.step() changes the learning rate in Python; step the "
                       "scheduler outside the compiled function")
        return step(self, *args, **kwargs)
    return cast(_StepT, wrapper)  # wraps() keeps step's signature, which the checker cannot follow


class LRScheduler:
    """Base class: subclasses implement ``get_lr()`` (and may override ``step``).

    Building a scheduler sets each group's ``initial_lr`` (``last_epoch=-1``) or requires
    it (resuming with ``last_epoch >= 0``), then takes the first step, which writes the
    rate for epoch 0 into the groups.
    """

    # Class-level defaults, shadowed per instance once the scheduler has stepped (so they
    # appear in state_dict() exactly where torch's do).
    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        "scheduler with last_epoch >= 0. Load the optimizer's state dict (which "
                        "carries 'initial_lr') before building the scheduler, or pass last_epoch=-1.")
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and take the first step (which sets the epoch-0 rates)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The rates for ``last_epoch``; called by ``step()`` (use ``get_last_lr()`` to read them)."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def get_last_lr(self) -> list:
        """The learning rates set by the latest ``step()``, one per parameter group."""
        return self._last_lr

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            # replacing the subclass's own method by its wrapped form is the point here
            cls.step = _refuses_capture(cls.__dict__["step"])  # type: ignore[method-assign]

    @_refuses_capture
    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (call after ``optimizer.step()``), or jump to ``epoch`` (deprecated)."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
                "1.1.0 and later, you should call them in the opposite order: `optimizer.step()` "
                "before `lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping "
                "the first value of the learning rate schedule.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = _group_values(self.optimizer, "lr")

    def state_dict(self) -> dict:
        """Every attribute but the optimizer (save and load the optimizer's state alongside)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """The old name of :class:`LRScheduler`, kept as torch keeps it."""


class _FunctionsState:
    """state_dict for schedulers holding one function per group (``lr_lambdas``): plain
    functions and lambdas are not state, a callable object's ``__dict__`` is."""

    lr_lambdas: list

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, fn_state in zip(self.lr_lambdas, saved):
            if fn_state is not None:
                fn.__dict__.update(fn_state)


def _lr_lambdas(optimizer: Optimizer, lr_lambda: Any) -> list:
    n = len(optimizer.param_groups)
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * n
    if len(lr_lambda) != n:
        raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)
