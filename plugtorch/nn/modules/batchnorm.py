"""``BatchNorm1d`` / ``BatchNorm2d``: per-channel normalisation with running statistics.

``running_mean``, ``running_var`` and ``num_batches_tracked`` are buffers, so they
are saved in ``state_dict`` and moved by ``to()``, but never trained.
"""
from __future__ import annotations

import plugtorch

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class _BatchNorm(Module):
    _expected_dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(plugtorch.empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(plugtorch.empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", plugtorch.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", plugtorch.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 plugtorch.tensor(0, dtype=plugtorch.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input(self, input):
        if input.ndim not in self._expected_dims:
            dims = " or ".join(f"{d}D" for d in self._expected_dims)
            raise ValueError(f"expected {dims} input (got {input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(
                f"{self._get_name()}({self.num_features}): expected input with {self.num_features} "
                f"channels at dim 1, got {input.shape[1]} (input shape {list(input.shape)})"
            )

    def forward(self, input):
        self._check_input(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            count = self._batches_tracked() if self.momentum is None else None
            with plugtorch.no_grad():
                self.num_batches_tracked.add_(1)
            if count is not None:  # a cumulative moving average
                self._host_count = (self.num_batches_tracked, self.num_batches_tracked._version, count + 1)
                factor = 1.0 / (count + 1)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def _batches_tracked(self) -> int:
        """num_batches_tracked as a Python int, for momentum=None's factor 1 / count.

        torch reads the buffer on every step (a device sync); the count is kept on the host
        beside the buffer instead, and read back only when someone else wrote the buffer
        (load_state_dict, reset_running_stats, .to(): a new tensor or a new version).
        """
        n, known = self.num_batches_tracked, self.__dict__.get("_host_count")
        if known is not None and known[0] is n and known[1] == n._version:
            return known[2]
        return int(n.item())

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # As torch does for checkpoints without version metadata (ours never carry it):
        # a missing num_batches_tracked is not an error; the current count is kept.
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else plugtorch.tensor(0, dtype=plugtorch.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) inputs."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) inputs."""
    _expected_dims = (4,)
