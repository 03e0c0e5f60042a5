"""``plugtorch.autocast``: mixed precision as a dispatch mode, with torch 2.13's op policies.

While an autocast region is in force, every op called on tensors reaches
:meth:`autocast.dispatch` (``optable.MODES``), which casts the op's floating operands (float16,
bfloat16 and float32; float64 is left alone, as torch does) by the op's policy and computes it:

* *lower precision*: matrix products and convolutions run in the region's dtype;
* *float32*: ops that lose too much in 16 bits (losses, and on cuda softmax, norms, sums,
  exp/log/pow...) run in float32;
* *promote*: ops that take several tensors (cat, stack, ...) run in the widest of their dtypes;
* any other op runs in whatever dtype its inputs have.

The policies are torch's per device type: ``"cpu"`` (the NumPy backend) and ``"cuda"`` (a
backend declaring the cuda accelerator: CuPy). The casts are the differentiable ``cast`` op, so
gradients flow back through them to float32 parameters in float32. Within a region a leaf
tensor that requires grad (a parameter) is cast once per dtype and reused (``cache_enabled``),
as torch caches it; leaving the outermost region clears the cache.
"""
from __future__ import annotations

import functools
import threading
import warnings
from typing import Any

from ..core.dispatch import call_op
from ..core.dtypes import bfloat16, float16, float32, promote_types
from ..core.dtypes import dtype as _dtype
from ..core.grad_mode import _state as _grad_state
from ..core.optable import DispatchMode
from ..core.tensor import Tensor

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
           "clear_autocast_cache"]

_LOWER, _FP32, _PROMOTE = "lower", "fp32", "promote"

# torch 2.13's lists (aten/src/ATen/autocast_mode.cpp), spelled as plugtorch's ops are named;
# torch's names plugtorch has no op for are kept, so an op added later is covered by its name
_CPU_LOWER = ("conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "addbmm", "linear",
              "matmul", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
              "scaled_dot_product_attention", "lstm_layer")
_CPU_FP32 = ("avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile", "stft",
             "cdist", "trace", "view_as_complex", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse",
             "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d",
             "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
             "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
             "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss", "cross_entropy", "l1_loss", "huber_loss",
             "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "ctc_loss",
             "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits", "linalg_matrix_norm",
             "linalg_cond", "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals",
             "linalg_eigvals", "linalg_eigvalsh", "linalg_inv", "linalg_householder_product", "linalg_tensorinv",
             "linalg_tensorsolve", "fake_quantize_per_tensor_affine", "geqrf", "qr", "svd", "triangular_solve",
             "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d", "linalg_qr",
             "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh", "linalg_lstsq", "linalg_inv_ex")
_CPU_PROMOTE = ("stack", "cat", "index_copy")

_CUDA_LOWER = ("conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
               "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot",
               "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
               "scaled_dot_product_attention", "lstm_layer")
_CUDA_FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
              "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm",
              "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
              "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
              "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
              "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
              "logsumexp", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d",
              "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d", "interpolate_linear",
              "interpolate_nearest", "interpolate_filtered", "prod", "cumprod", "cumsum", "linalg_vector_norm",
              "linalg_matrix_norm", "norm", "normalize", "softmax", "log_softmax", "softmin", "cross_entropy", "sum")
_CUDA_PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "linalg_cross", "dot", "vdot", "grid_sampler",
                 "index_put", "tensordot", "scatter_add", "stack", "cat", "index_copy")


def _policies(lower, fp32, promote) -> dict[str, str]:
    return {**dict.fromkeys(promote, _PROMOTE), **dict.fromkeys(fp32, _FP32), **dict.fromkeys(lower, _LOWER)}


_POLICY = {"cpu": _policies(_CPU_LOWER, _CPU_FP32, _CPU_PROMOTE),
           "cuda": _policies(_CUDA_LOWER, _CUDA_FP32, _CUDA_PROMOTE)}
_SUPPORTED = {"cpu": (bfloat16, float16)}  # what the cpu takes; cuda refuses bfloat16 (docs/amp.md)


class _DeviceState:
    __slots__ = ("enabled", "dtype")

    def __init__(self, dtype: _dtype) -> None:
        self.enabled = False
        self.dtype = dtype


class _ThreadState(threading.local):
    """Autocast's state, one per thread as torch's: a region entered in one thread leaves another
    thread's ops (a DataLoader's, DDP's communication) and ``is_autocast_enabled`` alone."""

    def __init__(self) -> None:
        self.devices = {"cpu": _DeviceState(bfloat16), "cuda": _DeviceState(float16)}
        self.cache_enabled = True
        self.depth = 0  # autocast regions entered (enabled or not): the cache lives while one is
        self.cache: dict[tuple[int, _dtype], tuple[Tensor, Tensor]] = {}


_LOCAL = _ThreadState()


def _device_state(device_type: str, caller: str) -> _DeviceState:
    if not isinstance(device_type, str):
        raise TypeError(f"{caller}: expected device_type of type str, got {type(device_type).__name__}")
    state = _LOCAL.devices.get(device_type)
    if state is None:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}' ({caller}: "
                           "plugtorch's autocast runs on 'cpu', the NumPy backend, and 'cuda', a CUDA backend "
                           "such as CuPy)")
    return state


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on ``device_type`` ("cpu" and "cuda")."""
    return device_type in _POLICY


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an autocast region is in force for ``device_type`` (torch's default: "cuda")."""
    return _device_state("cuda" if device_type is None else device_type, "is_autocast_enabled").enabled


def get_autocast_dtype(device_type: str) -> _dtype:
    """The dtype autocast lowers to on ``device_type``: the region's, else the default (bfloat16
    on cpu, float16 on cuda, as torch)."""
    return _device_state(device_type, "get_autocast_dtype").dtype


def set_autocast_dtype(device_type: str, dtype: _dtype) -> None:
    _device_state(device_type, "set_autocast_dtype").dtype = dtype


def is_autocast_cache_enabled() -> bool:
    return _LOCAL.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _LOCAL.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    _LOCAL.cache.clear()


def _eligible(t: Any) -> bool:
    return isinstance(t, Tensor) and t.dtype in (float32, float16, bfloat16)


def _cast(t: Tensor, dtype: _dtype) -> Tensor:
    if t.dtype is dtype:
        return t
    from ..core.ops.conversion import cast
    local = _LOCAL
    if local.cache_enabled and t.is_leaf and t.requires_grad and _grad_state.enabled:
        key = (id(t), dtype)
        hit = local.cache.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        out = cast(t, dtype)
        local.cache[key] = (t, out)  # the source is kept, so its id is not reused while cached
        return out
    return cast(t, dtype)


class autocast(DispatchMode):
    """``with plugtorch.autocast("cpu"):`` (or ``@plugtorch.autocast("cpu")`` on a function):
    ops in the region run in mixed precision by torch's policies (module docstring).

    dtype: the lower precision (default: ``get_autocast_dtype(device_type)``). On cpu bfloat16
    and float16 are supported (another dtype warns and disables the region, as torch does); on
    cuda bfloat16 is refused (the CuPy backend has none), and without a CUDA backend the
    region warns and is disabled, as torch's. ``enabled=False`` makes a region in which
    autocast is off for the device type, also inside an enabled one.
    """

    def __init__(self, device_type: str, dtype: _dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        _device_state(device_type, "autocast")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = _LOCAL.cache_enabled if cache_enabled is None else bool(cache_enabled)
        if self._enabled and device_type == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available. Disabling autocast.", UserWarning, stacklevel=2)
                self._enabled = False
            elif self.fast_dtype is bfloat16:  # cuda.is_bf16_supported(): the CuPy backend has none
                raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to float16.")
        elif self._enabled and self.fast_dtype not in _SUPPORTED[device_type]:
            names = ", ".join(f"plugtorch.{d.name}" for d in _SUPPORTED[device_type])
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype is not supported. Disabling "
                          f"autocast.\n{device_type.upper()} Autocast only supports dtypes of {names} currently.",
                          UserWarning, stacklevel=2)
            self._enabled = False
        self._saved: list[tuple[bool, _dtype, bool, bool]] = []

    def __enter__(self):
        local = _LOCAL
        state = local.devices[self.device]
        self._saved.append((state.enabled, state.dtype, local.cache_enabled, self._enabled))
        state.enabled, state.dtype = self._enabled, self.fast_dtype
        local.cache_enabled = self._cache_enabled
        local.depth += 1
        if self._enabled:
            super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        local = _LOCAL
        enabled, dtype, cache, pushed = self._saved.pop()
        if pushed:
            super().__exit__(*exc)
        state = local.devices[self.device]
        state.enabled, state.dtype = enabled, dtype
        local.cache_enabled = cache
        local.depth -= 1
        if local.depth == 0:
            local.cache.clear()

    def __call__(self, fn):
        @functools.wraps(fn)
        def in_region(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return in_region

    def dispatch(self, opdef, operands: tuple, attrs: dict) -> Any:
        cast = self.cast_operands(opdef.name, operands)
        if cast is None:
            return call_op(opdef, operands, attrs)
        if attrs.get("dtype") in (float16, bfloat16) and _POLICY[self.device][opdef.name] is _FP32:
            attrs = {**attrs, "dtype": float32}  # a reduction's result dtype, bound from its input's
        return call_op(opdef, cast, attrs)

    def cast_operands(self, name: str, operands: tuple) -> tuple | None:
        """``operands`` cast by op ``name``'s policy, or None where the region leaves them alone
        (off, an op without a policy, tensors on another device type, nothing to promote)."""
        state = _LOCAL.devices[self.device]
        policy = _POLICY[self.device].get(name) if state.enabled else None
        if policy is None or not self._on_device(operands):
            return None
        if policy is _LOWER:
            target = state.dtype
        elif policy is _FP32:
            target = float32
        else:
            widest = None
            for o in operands:
                if _eligible(o):
                    widest = o.dtype if widest is None else promote_types(widest, o.dtype)
            if widest is None:
                return None
            target = widest
        return tuple(_cast(o, target) if _eligible(o) else o for o in operands)

    def _on_device(self, operands: tuple) -> bool:
        for o in operands:
            if isinstance(o, Tensor):
                return o.is_cuda if self.device == "cuda" else not o.is_cuda
        return False
