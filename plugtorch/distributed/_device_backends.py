"""torch.distributed.get_default_backend_for_device: which backend torch picks for a device.

The names are torch's (``Backend.default_device_backend_map``), so a script that asks for the
CPU's backend gets "gloo" and passes it on to ``init_process_group``, which takes "gloo" (and
"nccl") as the MPI plugin's CPU collectives.
"""
from __future__ import annotations

import re

from ..accelerator import current_accelerator
from ..core.device import Device

__all__ = ["get_default_backend_for_device"]

DEFAULT_DEVICE_BACKENDS = {"cpu": "gloo", "cuda": "nccl", "xpu": "xccl", "mps": "gloo"}
# the device types torch.device parses: another name is an error there, not an unregistered type
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
                "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
_DEVICE_STRING = re.compile(r"[a-zA-Z_]+(?::(?:[1-9][0-9]*|0))?")


def get_default_backend_for_device(device: str | Device | int) -> str:
    """The default backend for ``device`` as a lower-case string: "gloo" for the CPU, "nccl" for
    CUDA; an int is an index on the current accelerator (an error without one, as in torch)."""
    if isinstance(device, int) and not isinstance(device, bool):
        acc = current_accelerator()
        if acc is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        kind = acc.type
    elif isinstance(device, Device):
        kind = device.type
    elif isinstance(device, str):
        # torch.device's parse: a type name, optionally ":" and an index without leading zeros
        if not device:
            raise RuntimeError("Device string must not be empty")
        if not _DEVICE_STRING.fullmatch(device):
            raise RuntimeError(f"Invalid device string: '{device}'")
        kind = device.split(":", 1)[0]
        if kind not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device "
                               f"string: {device}")
    else:
        raise TypeError(f"get_default_backend_for_device: device must be a str, a plugtorch.device or an "
                        f"int index, got {type(device).__name__}")
    backend = DEFAULT_DEVICE_BACKENDS.get(kind)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend
