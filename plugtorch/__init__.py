"""plugtorch: a PyTorch-compatible deep-learning framework whose ops dispatch through plugins.

Backends (NumPy, CuPy, ...) and services (MPI) are pluggy plugins; see
``plugtorch.core.hookspecs`` for the contract and ``plugtorch.core.primitives``
for what a backend implements.
"""
from __future__ import annotations

from .core import tensor_methods as _tensor_methods  # noqa: F401  (binds Tensor methods)
from .core.device import Device as device, backend, current_backend, get_backend, use
from .core.dtypes import (bool_ as bool, dtype, float16, float32, float64, get_default_dtype,
                          int8, int16, int32, int64, promote_types, result_type, set_default_dtype,
                          uint8)
from .core.errors import (BackendMismatchError, BackendUnavailableError, MissingKernelError,
                          PluginError)
from .core.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .core.ops.activation import log_softmax, relu, sigmoid, softmax
from .core.ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, max_pool2d
from .core.ops.creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full,
                                full_like, linspace, ones, ones_like, rand, rand_like, randint,
                                randn, randn_like, randperm, tensor, zeros, zeros_like)
from .core.ops.elementwise import (abs, add, ceil, clamp, clip, cos, div, eq, exp, expm1, floor,
                                   floor_divide, ge, gt, isfinite, isinf, isnan, le, log, log1p,
                                   logical_and, logical_not, logical_or, lt, maximum, minimum, mul,
                                   ne, neg, pow, reciprocal, remainder, round, rsqrt, sign, sin,
                                   sqrt, square, sub, tanh, where)
from .core.ops.einsum import einsum
from .core.ops.elementwise import erf
from .core.ops.elementwise import clamp_max, clamp_min
from .core.ops.index import (argwhere, count_nonzero, gather, index_select, masked_fill, masked_select,
                             nonzero, scatter_add, take_along_dim)
from .core.ops.activation import celu, selu
from .core.ops.linalg import addmm, diag, diagonal, dot, ger, outer, trace
from .core.ops.pointwise import cosh, exp2, fix, frac, lerp, log2, log10, sinh, trunc
from .core.ops.movement import (chunk, flip, fliplr, flipud, meshgrid, moveaxis, movedim, narrow, ravel,
                                repeat_interleave, roll, split, tensor_split, tile, tril, triu, unbind)
from .core.ops.reduce import all, any
from .core.ops.shape import swapdims
from .core.ops.statistics import cumsum, norm, prod, std, std_mean, var, var_mean
from .core.ops.sorting import argsort, kthvalue, median, sort, topk
from .core.ops.scatter import index_add, scatter
from .core.ops.linalg import bmm, matmul, mm
from .core.ops.reduce import amax, amin, argmax, argmin, logsumexp, max, mean, min, sum
from .core.ops.shape import (broadcast_shapes, broadcast_to, cat, concat, concatenate, flatten,
                             permute, reshape, squeeze, stack, swapaxes, t, transpose, unflatten,
                             unsqueeze)
from .core.plugins import get_registry, list_plugins, register_plugin
from .core.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .core.tensor import Size, Tensor
from . import autograd, viz
from . import nn
from . import distributed
from . import optim, utils
from .serialization import load, save

__version__ = "0.1.0"

float = float32
double = float64
long = int64
half = float16
short = int16
