"""plugtorch: a PyTorch-compatible deep-learning framework whose ops dispatch through plugins.

Backends (NumPy, CuPy, ...) and services (MPI) are pluggy plugins; see
``plugtorch.core.hookspecs`` for the contract and ``plugtorch.core.primitives``
for what a backend implements.
"""
from __future__ import annotations

from . import (
    _ops,
    accelerator,
    autograd,
    backends,
    cuda,
    distributed,
    fft,
    library,
    linalg,
    nn,
    onnx,  # noqa: F401  (an attribute of plugtorch, not in __all__, as torch.onnx)
    optim,
    return_types,
    sparse,
    special,
    utils,
)
from ._ops import *  # noqa: F403  (every op and tensor function, from the op table)
from .amp import (
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
)
from .compiler import compile
from .core.debug import debug_mode, is_debug, set_debug
from .core.device import Device as device
from .core.device import backend, current_backend, get_backend, use
from .core.dtypes import (
    bfloat16,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    result_type,
    set_default_dtype,
    uint8,
)
from .core.dtypes import bool_ as bool
from .core.errors import BackendMismatchError, BackendUnavailableError, MissingKernelError, PluginError
from .core.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .core.inference_mode import inference_mode, is_inference_mode_enabled
from .core.legacy_types import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .core.plugin_report import plugins
from .core.plugins import get_registry, list_plugins, register_plugin, unregister_plugin
from .core.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .core.tensor import Size, Tensor
from .interop.safetensors import load_file, save_file
from .library import ops
from .serialization import load, save
from .sparse import layout, sparse_coo, sparse_coo_tensor, spmm, strided
from .threads import get_num_threads, set_num_threads

__version__ = "0.1.0"

float = float32
double = float64
long = int64
half = float16
cfloat = complex64
cdouble = complex128
short = int16
int = int32

__all__ = [
    "device", "backend", "current_backend", "get_backend", "use", "debug_mode", "is_debug", "set_debug",
    "bool", "dtype", "float16", "float32", "float64", "get_default_dtype", "int8", "int16", "int32",
    "int64", "promote_types", "result_type", "set_default_dtype", "uint8", "float", "double", "long",
    "half", "short", "int", "BackendMismatchError", "BackendUnavailableError", "MissingKernelError",
    "PluginError", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "get_registry",
    "list_plugins", "plugins", "register_plugin", "unregister_plugin", "Generator", "get_rng_state",
    "initial_seed", "manual_seed",
    "seed", "set_rng_state", "Size", "Tensor", "autograd", "nn", "distributed", "optim", "utils",
    "load", "save", "load_file", "save_file", "library", "ops", "get_num_threads", "set_num_threads",
    "inference_mode", "is_inference_mode_enabled", "accelerator", "backends", "cuda", "linalg", "return_types",
    "compile", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor", "complex64", "complex128", "cfloat", "cdouble", "fft", "special",
] + ["bfloat16", "autocast", "clear_autocast_cache", "get_autocast_dtype", "is_autocast_available",
     "is_autocast_cache_enabled", "is_autocast_enabled", "set_autocast_cache_enabled", "set_autocast_dtype",
     "sparse", "layout", "sparse_coo", "sparse_coo_tensor", "spmm", "strided",
     ] + _ops.__all__

from . import distributions, func  # noqa: E402, F401  (last: they build on the dtypes, ops and autograd above)
