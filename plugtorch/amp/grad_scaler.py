"""``plugtorch.amp.GradScaler``: loss scaling for float16 training, as torch's.

The loss is multiplied by a scale before ``backward`` so small float16 gradients do not flush to
zero; ``unscale_`` divides the gradients back and notes, as a tensor, whether any is inf or NaN;
``step`` skips the optimizer's step when one was; ``update`` shrinks the scale after such a step
(``backoff_factor``) and grows it after ``growth_interval`` clean ones (``growth_factor``).

The scale, the growth tracker and the found-inf flags stay tensors on the gradients' device,
updated with tensor ops: the one read of a value on the host is in :meth:`GradScaler.step`,
which must know whether to call ``optimizer.step()`` (torch syncs at the same place).
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable
from enum import Enum
from typing import Any

from ..core.dtypes import float16, float32, float64, int32
from ..core.grad_mode import no_grad
from ..core.tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _full(value, dtype, device):
    from .. import full
    return full((), value, dtype=dtype, device=device)


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
            self._init_scale = float(init_scale)
            self._scale: Tensor | None = None
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = int(growth_interval)
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: defaultdict = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None or self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device) -> None:
        self._scale = _full(self._init_scale, float32, device)
        self._growth_tracker = _full(self._init_growth_tracker, int32, device)

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them, nested) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            assert self._scale is not None
            return outputs * self._scale.to(device=outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                assert self._scale is not None
                return val * self._scale.to(device=val.device)
            if isinstance(val, Iterable):
                iterable = map(apply_scale, val)
                return type(val)(iterable) if isinstance(val, (list, tuple)) else iterable
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, found_inf: Tensor, allow_fp16: bool) -> dict:
        from .. import isfinite
        per_device: dict[str, Tensor] = {}
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if not allow_fp16 and param.grad.dtype is float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    grad = param.grad
                    key = str(grad.device)
                    flag = per_device.get(key)
                    if flag is None:
                        flag = found_inf.to(device=grad.device).clone()
                    # non-finite anywhere sets the flag; the multiply keeps inf/NaN as they are
                    bad = (~isfinite(grad)).any().to(float32)
                    per_device[key] = flag.maximum(bad)
                    grad.mul_(inv_scale.to(device=grad.device))
        return per_device

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale (in place), noting inf/NaN ones."""
        if not self._enabled:
            return
        scale, _ = self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = scale.to(float64).reciprocal().to(float32)  # as torch: the reciprocal in double
        found_inf = _full(0.0, float32, scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless a gradient was inf/NaN (unscaling them first
        if ``unscale_`` was not called). Reads the found-inf flags on the host: the one sync."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):  # the host read
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """The next scale: ``new_scale`` if given, else backed off after an inf/NaN step and grown
        after ``growth_interval`` clean ones, as tensor ops (no host read)."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale = _full(new_scale, float32, scale.device)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor "
                          "with requires_grad=False.")
                assert isinstance(new_scale, Tensor), reason
                assert new_scale.numel() == 1, reason
                assert new_scale.requires_grad is False, reason
                self._scale = new_scale.to(float32).reshape(()).clone()
        else:
            found_infs = [f.to(device=scale.device) for state in self._per_optimizer_states.values()
                          for f in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            found = found_infs[0]
            for f in found_infs[1:]:
                found = found + f
            self._scale, self._growth_tracker = self._updated(scale, tracker, found > 0)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _updated(self, scale: Tensor, tracker: Tensor, found: Tensor) -> tuple[Tensor, Tensor]:
        """torch's _amp_update_scale_: back off on inf/NaN; else count the clean step and, at the
        growth interval, grow the scale (unless that overflows float32) and restart the count."""
        from .. import where
        successful = tracker + 1
        at_interval = successful == self._growth_interval
        grown = scale * self._growth_factor
        grow = at_interval & grown.isfinite()
        new_scale = where(found, scale * self._backoff_factor, where(grow, grown, scale))
        new_tracker = where(found | at_interval, tracker * 0, successful)
        return new_scale, new_tracker.to(int32)

    def get_scale(self) -> float:
        """The current scale as a Python float (a host read; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (empty when
        disabled), as torch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = _full(self._init_scale, float32, self._scale.device)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = _full(self._init_growth_tracker, int32, self._growth_tracker.device)
