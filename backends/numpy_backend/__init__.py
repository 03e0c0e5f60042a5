"""The NumPy backend plugin: plugtorch's default CPU backend.

It registers through the ``plugtorch`` entry point exactly as a third-party
backend would: a table of primitives (shared with CuPy via ``xp_table``), a NumPy
random generator, and a few fused kernels for composite ops where NumPy can do
better than the decomposition.
"""
from __future__ import annotations

import numpy as np

from plugtorch.backend_api import CONTRACT_VERSION, Backend, hookimpl

from . import allocator, fused, native
from .attention import ATTENTION_KERNELS
from .bfloat16 import through_float32
from .fused import FUSED_KERNELS
from .fused_optim import OPTIM_KERNELS
from .rnn import RNN_KERNELS
from .xp_table import make_dtype_maps, make_out_variants, make_table

PLUGTORCH_CONTRACT = CONTRACT_VERSION
NAME = "numpy"

_TO_NATIVE, _FROM_NATIVE = make_dtype_maps(np)


def _generator(seed):
    return np.random.Generator(np.random.PCG64(seed))


def _get_state(gen):
    return gen.bit_generator.state


def _set_state(gen, state):
    gen.bit_generator.state = state


def _uniform(gen, shape, low, high, dtype):
    if dtype.name in ("float32", "float64"):
        out = gen.random(shape, dtype=_TO_NATIVE[dtype])
    else:
        out = gen.random(shape).astype(_TO_NATIVE[dtype])
    if low != 0.0 or high != 1.0:
        out = out * (high - low) + low
    return np.asarray(out, dtype=_TO_NATIVE[dtype])


def _normal(gen, shape, mean, std, dtype):
    if dtype.name in ("float32", "float64"):
        out = gen.standard_normal(shape, dtype=_TO_NATIVE[dtype])
    else:
        out = gen.standard_normal(shape).astype(_TO_NATIVE[dtype])
    if mean != 0.0 or std != 1.0:
        out = out * std + mean
    return np.asarray(out, dtype=_TO_NATIVE[dtype])


def _randint(gen, low, high, shape, dtype):
    return np.asarray(gen.integers(low, high, size=shape), dtype=_TO_NATIVE[dtype])


def make_primitives():
    table = make_table(np, to_host=lambda x: x, from_host_array=lambda a: a, add_at=native.add_at(fused.add_at))
    table.update({
        "generator": _generator,
        "generator_get_state": _get_state,
        "generator_set_state": _set_state,
        "uniform": _uniform,
        "normal": _normal,
        "randint": _randint,
        "permutation": lambda gen, n: gen.permutation(n).astype(np.int64),
    })
    table.update(native.primitives())  # erf in C, where the native kernels are built and on
    return table


def make_backend(name: str = NAME, aliases=("cpu",), host_memory: bool = True) -> Backend:
    return Backend(
        name=name,
        primitives=make_primitives(),
        dtype_of=lambda a: _FROM_NATIVE[a.dtype],
        is_native=lambda obj: isinstance(obj, (np.ndarray, np.generic)),
        aliases=aliases,
        array_module=np,
        host_memory=host_memory,
        out_variants=make_out_variants(np),
    )


# What serves ops on this backend besides their own declarations, stated whether or not the C
# extension was built on this machine, so that the catalog generated from it (docs/ops.md) is the
# same everywhere (the format: plugtorch.testing.catalog). The C kernels are native.kernels() where
# the extension loaded, the NumPy ones FUSED_KERNELS and OPTIM_KERNELS; where an op's C kernel is
# missing, its NumPy kernel serves, or else the op's declaration (None). The tests named hold the
# kernels to the op beside the conformance kit; tests/conformance/test_kernel_declarations.py keeps
# all of this in step.
C_KERNEL_OPS = frozenset({"_fused_adam_",
                          "adam_step_", "batch_norm", "batch_norm_backward", "batch_norm_weight_grad", "conv2d",
                          "conv2d_input_grad", "conv2d_weight_grad", "cross_entropy", "cross_entropy_backward",
                          "fold", "gelu", "gelu_backward", "index_select", "layer_norm", "layer_norm_backward",
                          "layer_norm_weight_grad", "layer_norm_gradients", "log_softmax", "log_softmax_backward",
                          "lstm_layer",
                          "lstm_layer_backward", "max_pool2d",
                          "max_pool2d_backward", "relu", "scaled_dot_product_attention",
                          "scaled_dot_product_attention_backward", "sigmoid_backward", "softmax", "softmax_backward",
                          "tanh_backward", "threshold_backward"})
_KERNEL_TESTS = {
    **dict.fromkeys(("adam_step_", "sgd_step_"), "tests/optim/test_fused_updates.py"),
    **dict.fromkeys(("_fused_adam_", "_fused_sgd_"), "tests/optim/test_foreach_adamw.py"),
    **dict.fromkeys(("conv2d", "conv2d_weight_grad"), "tests/ops/test_native_conv.py"),
    "conv2d_input_grad": "tests/ops/test_native_conv_grads.py",
    **dict.fromkeys(("cross_entropy", "cross_entropy_backward"), "tests/ops/test_fused_cross_entropy.py"),
    "fold": "tests/ops/test_fused_fold.py",
    **dict.fromkeys(("gelu", "gelu_backward"), "tests/ops/test_gelu_kernels.py"),
    **dict.fromkeys(("layer_norm", "layer_norm_backward", "layer_norm_weight_grad", "layer_norm_gradients",
                     "batch_norm", "batch_norm_backward", "batch_norm_weight_grad"), "tests/ops/test_norm_kernels.py"),
    "index_select": "tests/ops/test_native_gather.py",
    **dict.fromkeys(("scaled_dot_product_attention", "scaled_dot_product_attention_backward", "softmax",
                     "softmax_backward", "log_softmax", "log_softmax_backward"),
                    "tests/ops/test_attention_kernels.py"),
    **dict.fromkeys(("lstm_layer", "lstm_layer_backward"), "tests/ops/test_lstm_layer.py"),
    **dict.fromkeys(("gru_layer", "gru_layer_backward"), "tests/ops/test_gru_layer.py"),
    **dict.fromkeys(("max_pool2d", "max_pool2d_backward"), "tests/ops/test_fused_max_pool.py"),
    **dict.fromkeys(("relu", "threshold_backward", "tanh_backward", "sigmoid_backward"),
                    "tests/ops/test_activation_grad_kernels.py"),
}


# the kernels written with NumPy, which serve wherever the C is missing or declines an input
NUMPY_KERNELS = {**FUSED_KERNELS, **OPTIM_KERNELS, **RNN_KERNELS, **ATTENTION_KERNELS}


def _kinds(op: str) -> tuple[str | None, ...]:
    numpy_kernel = "NumPy" if op in NUMPY_KERNELS else None
    return ("C", numpy_kernel) if op in C_KERNEL_OPS else (numpy_kernel,)


PLUGTORCH_KERNELS = {NAME: {op: (_kinds(op), _KERNEL_TESTS.get(op, ""))
                            for op in sorted(C_KERNEL_OPS | NUMPY_KERNELS.keys())}}


@hookimpl
def plugtorch_register(registrar):
    allocator.tune()  # process-wide glibc settings that stop steps re-faulting their memory
    registrar.add_backend(make_backend())
    natives = native.kernels()
    kernels = {**NUMPY_KERNELS, **natives}
    native.share_blas_threads()  # NumPy's OpenBLAS and the native kernels on one pool of threads
    plain = set(OPTIM_KERNELS)
    if natives:  # the C activations take bfloat16 as torch does themselves, at no cost to float32
        from .native.activation import BFLOAT16_INSIDE
        plain |= BFLOAT16_INSIDE
    for op, fn in kernels.items():
        registrar.add_kernel(op, NAME, fn if op in plain else through_float32(op, fn))
