"""torch's FSDP2 policies: mixed precision (float32 only here) and CPU offload (a no-op on host memory)."""
from __future__ import annotations

from dataclasses import dataclass

from ...core import dtypes


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """torch's ``MixedPrecisionPolicy``. plugtorch's FSDP computes and reduces in the parameters'
    dtype: any other ``param_dtype``, ``reduce_dtype`` or ``output_dtype`` is refused."""

    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True

    def _check(self, module) -> None:
        dtypes_ = {p.dtype for p in module.parameters()}
        for field in ("param_dtype", "reduce_dtype", "output_dtype"):
            want = getattr(self, field)
            if want is not None and (want is not dtypes.float32 or dtypes_ - {dtypes.float32}):
                raise NotImplementedError(
                    f"fully_shard: MixedPrecisionPolicy({field}={want}) is not supported: plugtorch's FSDP "
                    f"gathers, computes and reduces in the parameters' dtype ({sorted(d.name for d in dtypes_)}); "
                    f"leave {field}=None, or cast the model with module.to(dtype) first")


@dataclass(frozen=True)
class OffloadPolicy:
    """torch's ``OffloadPolicy``: no offloading (the default)."""


@dataclass(frozen=True)
class CPUOffloadPolicy(OffloadPolicy):
    """torch's ``CPUOffloadPolicy``. The shards of parameters already in host memory (the NumPy
    backend's) stay there, so it changes nothing; device parameters are refused."""

    pin_memory: bool = True

    def _check(self, module) -> None:
        for name, p in module.named_parameters():
            if not p.is_cpu:
                raise NotImplementedError(f"fully_shard: CPUOffloadPolicy is not supported for parameters on "
                                          f"{p.device} ({name}); move the module to the CPU first")
