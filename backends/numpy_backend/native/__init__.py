"""The NumPy backend's native kernels: one C pass where NumPy needs many (``_kernels.c``).

NumPy runs each op as its own pass over memory, and on small images its inner loops are too
short or too strided to vectorise. The kernels here take the same arguments as the NumPy
kernels and ops they stand in for and return the same values (bit for bit, except where a
module says otherwise); they call C for float32/float64 arrays and compute anything else
with NumPy. The extension is built at install (``setup.py``, optional): where it is missing,
or ``PLUGTORCH_NATIVE_KERNELS=0`` is set, the backend registers its NumPy kernels alone, and
:func:`status` says why.

The loops run on the threads NumPy's OpenBLAS is told to use, in one pool shared with it
(``threadpool.c``, ``blas_threads.py``), where OpenBLAS takes a threads callback; elsewhere on one.
Two other ways to thread them lost to that pool. OpenMP: on 2 cores its threads and
OpenBLAS's spin against each other (with libgomp's default waiting a CNN step took 72 ms
instead of 13.7; with passive waiting 13.4, no real gain in a step whose BLAS calls keep the
other core busy), and a forked child (a DataLoader worker) hangs in libgomp unless guarded.
Splitting max-pool and relu over the batch on two Python threads (the loops release the GIL):
relu alone on 6 MiB went from 520 to 350 us, but a CNN step with 2 BLAS threads took 12.5 ms
instead of 12.0 (12.4 against 12.55 with OPENBLAS_THREAD_TIMEOUT=4, which slows the GEMMs
instead): threading these kernels needs a pool shared with BLAS. relu has a loop of its own on
it (``activation.py``).
The extension is built for baseline x86-64 (SSE, 4 floats a vector), except Adam's loop, which
is built for AVX-512 and AVX2 as well (GCC's target_clones, chosen at load time, same bits).
On 100k-400k floats that gains little (0.78 -> 0.70 ns an element: memory-bound); on the MLP's
parameters, which fit in cache, the divides bind, and the four updates take 81 us instead of 88.
"""
from __future__ import annotations

import os
from types import ModuleType

import numpy as np

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes the C loops take

ABI = 9  # _kernels.c's interface version (its ABI constant); they change together


def _load() -> tuple[ModuleType | None, str]:
    """The extension, or None and why the kernels are off. Decided once, at import, as the core
    decides about its own C paths (``plugtorch/core/native.py``): what registers, what ``status``
    reports and whether the BLAS pool is shared never disagree."""
    if os.environ.get("PLUGTORCH_NATIVE_KERNELS", "1") == "0":
        return None, "PLUGTORCH_NATIVE_KERNELS=0"
    try:
        from . import _kernels
    except ImportError as exc:  # built without a C compiler (setup.py's optional extension)
        return None, f"not built ({exc})"
    if getattr(_kernels, "ABI", None) != ABI:  # built from older sources: an editable install not rebuilt
        return None, (f"the built extension is stale (interface {getattr(_kernels, 'ABI', None)}, these "
                      f"sources expect {ABI}); rebuild it with pip install -e .")
    return _kernels, ""


_kernels, _missing = _load()


def enabled() -> bool:
    return _kernels is not None


def status() -> str:
    """Whether the native kernels run, and if not why (``plugtorch plugins`` prints it)."""
    if _kernels is None:
        return f"native kernels off: {_missing}"
    from . import blas_threads
    return "native kernels on: " + ", ".join(sorted(kernels())) + f"; shared BLAS threads {blas_threads.STATUS}"


def share_blas_threads() -> str:
    """Run NumPy's OpenBLAS jobs and split the kernels' loops on one pool (``blas_threads``)."""
    from . import blas_threads
    return blas_threads.install()


def primitives() -> dict:
    """primitive name -> native function, for the backend's primitive table (empty when not
    enabled): the error function, which NumPy has no ufunc for."""
    if not enabled():
        return {}
    from .activation import erf
    return {"erf": erf}


def add_at(fallback):
    """The backend's ``add_at`` (see ``make_table``): whole rows added in C where the native kernels
    are on (``gather.add_at``), ``fallback`` elsewhere."""
    if not enabled():
        return fallback
    from .gather import add_at as native_add_at
    return native_add_at(fallback)


def out_ufunc(ufunc, nin: int, slow, float_slow: np.dtype | None = None):
    """``slow``, a Python function calling ``ufunc(*args, out=...)`` on ``nin`` arrays, made a C
    call (``_kernels.OutUfunc``): the same call without the Python frame, a fifth of ``a + b`` on
    small tensors. Keyword arguments, another argument count and a Python float beside a first
    operand of dtype ``float_slow`` (bfloat16's scalar rule) still go to ``slow``; so does
    everything where the extension is off or older."""
    cls = getattr(_kernels, "OutUfunc", None)
    return slow if cls is None else cls(ufunc, nin, slow, float_slow)


def kernels() -> dict:
    """op name -> native kernel, for the backend to register (empty when not enabled)."""
    if not enabled():
        return {}
    import functools

    from .. import fused
    from . import activation, norm
    from .activation import gelu, gelu_backward, relu, sigmoid_backward, tanh_backward, threshold_backward
    from .attention import ATTENTION_KERNELS
    from .conv import conv2d, conv2d_input_grad, conv2d_weight_grad, fold
    from .gather import index_select
    from .loss import cross_entropy, cross_entropy_backward
    from .optim import _fused_adam_, adam_step_
    from .pool import max_pool2d, max_pool2d_backward
    from .rnn import rnn_kernels
    return {**rnn_kernels(), **ATTENTION_KERNELS, "max_pool2d": max_pool2d, "max_pool2d_backward": max_pool2d_backward,
            "fold": fold,
            "conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad, "conv2d_weight_grad": conv2d_weight_grad,
            "adam_step_": adam_step_,
            "_fused_adam_": _fused_adam_, "cross_entropy": cross_entropy,
            "cross_entropy_backward": cross_entropy_backward,
            "relu": relu, "threshold_backward": threshold_backward, "tanh_backward": tanh_backward,
            "sigmoid_backward": sigmoid_backward, "index_select": index_select, "gelu": gelu,
            "gelu_backward": gelu_backward, "softmax": activation.softmax,
            "softmax_backward": activation.softmax_backward, "log_softmax": activation.log_softmax,
            "log_softmax_backward": activation.log_softmax_backward,
            **{name: functools.partial(getattr(norm, name), fallback=getattr(fused, name))
               for name in ("layer_norm", "layer_norm_backward", "layer_norm_weight_grad", "layer_norm_gradients",
                            "batch_norm", "batch_norm_backward", "batch_norm_weight_grad")}}
