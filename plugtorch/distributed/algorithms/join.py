"""The join context manager for uneven inputs (torch.distributed.algorithms.join).

Collectives need every rank. When ranks have different numbers of batches, the
ranks that run out first would leave the others waiting in their next
collective. Inside ``with Join([ddp_model, ...]):`` a rank that leaves the loop
*joins*: until every rank has joined, it repeats the collectives one training
iteration of the others posts (each :class:`Joinable`'s ``join_hook().main_hook()``),
contributing nothing; then every hook's ``post_hook`` runs (DDP takes the model of
the last rank to join, so all ranks end with the same parameters).

Each iteration every non-joined rank's first joinable calls
:meth:`Join.notify_join_context`, an all-reduce of 1 that the joined ranks match
with an all-reduce of 0: its sum is the number of ranks still training.
"""
from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any, NamedTuple

from ... import distributed as dist
from ...core.ops.creation import ones, zeros

__all__ = ["JoinHook", "Joinable", "Join"]


class JoinHook:
    """What a joined rank does for one :class:`Joinable`: ``main_hook()`` once per iteration
    of the ranks still training, ``post_hook(is_last_joiner)`` once all have joined."""

    def main_hook(self) -> None:
        """Shadow the collectives of one training iteration of the non-joined ranks."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Run once every rank has joined; ``is_last_joiner``: this rank was among the last."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config() -> _JoinConfig:
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(ABC):
    """A class that can take part in :class:`Join`: ``join_hook()``, ``join_device``,
    ``join_process_group``; its per-iteration code calls :meth:`Join.notify_join_context`."""

    @abstractmethod
    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_join_config", _JoinConfig.construct_disabled_join_config())

    @abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        """A :class:`JoinHook` for this object; ``kwargs`` come from ``Join(..., **kwargs)``."""

    @property
    @abstractmethod
    def join_device(self) -> Any:
        """The device of the join context manager's own collectives."""

    @property
    @abstractmethod
    def join_process_group(self) -> Any:
        """The process group of the join context manager's own collectives."""


class Join:
    """``with Join(joinables, enable=True, throw_on_early_termination=False, **kwargs):``

    ``throw_on_early_termination=True``: instead of shadowing, every rank raises
    ``RuntimeError`` as soon as one rank runs out of inputs (for loops with collectives
    the joinables do not know about).
    """

    def __init__(self, joinables: list, enable: bool = True, throw_on_early_termination: bool = False,
                 **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = joinables
        self._join_hooks = [j.join_hook(**kwargs) for j in joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        for i, j in enumerate(joinables):
            object.__setattr__(j, "_join_config", _JoinConfig(enable, throw_on_early_termination, i == 0))
        groups = {id(j.join_process_group) for j in joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._process_group = joinables[0].join_process_group
        self._device = joinables[0].join_device
        self._rank = dist.get_rank(self._process_group)

    def __enter__(self):
        return self

    def __exit__(self, type, value, traceback):
        try:
            if not self._enable or type is not None:
                return None  # an exception propagates as it is
            is_last_joiner = True
            shadowed = 0
            while self._num_nonjoined() > 0:
                if self._throw_on_early_termination:
                    self._notify_procs_to_terminate()
                if shadowed == 1000:
                    warnings.warn(f"Detected uneven input skew of greater than 1000. This means that rank "
                                  f"{self._rank} has at least 1000 fewer inputs than other currently-active "
                                  "ranks. This level of skew could lead to performance degradation during "
                                  "training.", stacklevel=2)
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                shadowed += 1
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
            return None
        finally:
            for j in self._joinables:  # outside the block, the joinables run unshadowed again
                object.__setattr__(j, "_join_config", _JoinConfig.construct_disabled_join_config())

    def _num_nonjoined(self) -> int:
        count = zeros(1, device=self._device)
        # async, then waited: the training ranks compute meanwhile, and a waited work sleeps
        # where ranks share cores (a sync collective would spin on a core they need)
        dist.all_reduce(count, group=self._process_group, async_op=True).wait()
        return int(count.item())

    def _notify_procs_to_terminate(self):
        dist.all_reduce(ones(1, device=self._device), group=self._process_group)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable: Joinable):
        """Called by ``joinable`` before its per-iteration collectives: tells the joined ranks
        this rank is still training. Returns the all-reduce's work (its sum is the number of
        ranks still training) for the first joinable of an enabled context, else None."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(f"Check that the {type(joinable)} constructor calls the ``Joinable`` constructor")
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        device, group = joinable.join_device, joinable.join_process_group
        work = dist.all_reduce(ones(1, device=device), group=group, async_op=True)
        if config.throw_on_early_termination:
            flag = zeros(1, device=device)
            dist.all_reduce(flag, group=group)
            if flag.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work
