"""``plugtorch.cuda``: torch.cuda's queries, answered from the registered backends.

A backend declaring ``Backend(accelerator="cuda")`` (a CuPy plugin) is "CUDA" here; without
one, ``is_available()`` is False and ``device_count()`` is 0, truthfully, and the calls
scripts make regardless (``manual_seed_all``, ``synchronize``, ``empty_cache``) do nothing,
as torch's do without a GPU.
"""
from __future__ import annotations

from .accelerator import _count, accelerator_backend

__all__ = ["is_available", "device_count", "current_device", "get_device_name", "manual_seed",
           "manual_seed_all", "synchronize", "empty_cache", "is_bf16_supported"]


def is_available() -> bool:
    """Whether a CUDA backend is registered and available."""
    return accelerator_backend("cuda") is not None


def device_count() -> int:
    return _count(accelerator_backend("cuda"))


def current_device() -> int:
    if not is_available():
        raise RuntimeError("No CUDA GPUs are available: no backend declaring accelerator='cuda' is available "
                           "(`plugtorch plugins` says why; the built-in one needs CuPy: pip install "
                           "'plugtorch[cupy13]', or [cupy12] for CUDA 12)")
    return 0


def get_device_name(device=None) -> str:
    current_device()
    return accelerator_backend("cuda").name


def manual_seed(seed: int) -> None:
    """Seed the CUDA backend's stream of the default generator (nothing without one)."""
    b = accelerator_backend("cuda")
    if b is None:
        return
    from .core.random import default_generator
    # only that backend's native generator restarts, as torch's seeds only the CUDA generator
    default_generator._native[b.name] = b.primitives["generator"](int(seed))


manual_seed_all = manual_seed


def synchronize(device=None) -> None:
    """Wait for the CUDA backend's queued work (nothing to wait for without one)."""
    b = accelerator_backend("cuda")
    if b is not None and b.synchronize is not None:
        b.synchronize()


def empty_cache() -> None:
    """Nothing to release: plugtorch keeps no cache of its own (a backend's pool is its own)."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def __getattr__(name: str):
    if name == "amp":  # torch.cuda.amp: autocast("cuda") and GradScaler("cuda"), loaded on first use
        from .amp import cuda_amp
        return cuda_amp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
