"""The CuPy backend plugin: plugtorch on NVIDIA GPUs.

Registered through the ``plugtorch`` entry point like any third-party backend. Importing
this module imports neither CuPy nor CUDA: the backend is always listed, and the first
question about it (``plugtorch.use("cupy")``, ``device="cuda"``, ``plugtorch.cuda.is_available()``)
runs :func:`probe.why_unavailable`; when that finds no CuPy, driver, device or NVRTC the
backend stays listed as unavailable with that reason, which selecting it raises.

It answers to ``cupy``, ``cuda`` and ``cupy:N`` / ``cuda:N``. Its primitives are NumPy's
table over ``cupy`` (``table.py``), its random numbers a counter-based Philox generator
(``philox.py``), and conv, pooling, softmax, cross-entropy, layer_norm, gelu, the LSTM step,
attention's forward and the optimizer updates run hand-written kernels (``kernels/*.cu``),
compiled by NVRTC on first use.
"""
from __future__ import annotations

from plugtorch.backend_api import CONTRACT_VERSION, Backend, hookimpl

from .probe import why_unavailable

PLUGTORCH_CONTRACT = CONTRACT_VERSION
NAME = "cupy"
ALIASES = ("cuda",)

_registrars: list = []  # the registrar of plugtorch_register, for the kernels the probe adds


def _probe(backend: Backend) -> str | None:
    reason = why_unavailable()
    if reason:
        return reason
    import cupy
    import cupyx
    import cupyx.scipy.special
    from plugtorch_backends.numpy_backend.special_functions import from_scipy

    from . import table
    from .modules import cupy_loader, cupy_source_loader

    table.install(backend, _registrars[-1], cupy, cupy_loader(), load_source=cupy_source_loader(),
                  add_at=cupyx.scatter_add, erf=cupyx.scipy.special.erf, to_host=cupy.asnumpy,
                  special=from_scipy(cupyx.scipy.special))
    backend.is_native = lambda obj: isinstance(obj, cupy.ndarray)
    backend.device_index = lambda a: a.device.id
    backend.device_count = cupy.cuda.runtime.getDeviceCount
    backend.current_device = cupy.cuda.runtime.getDevice  # type: ignore[attr-defined]
    backend.synchronize = lambda: cupy.cuda.get_current_stream().synchronize()
    return None


def _is_cupy_array(obj) -> bool:
    # before the probe: recognise CuPy arrays without importing CuPy
    return type(obj).__module__.startswith("cupy")


def make_backend() -> Backend:
    return Backend(name=NAME, primitives={}, dtype_of=lambda a: None, is_native=_is_cupy_array,
                   aliases=ALIASES, host_memory=False, accelerator="cuda", probe=_probe)


# What the probe registers where CuPy runs, stated without importing CuPy so that the catalog
# generated from it (docs/ops.md) is the same on every machine (the format: plugtorch.testing.catalog):
# kernels/<source>.cu -> the ops its kernels serve (table.make_kernels; binary.cu stands in front of
# CuPy's add, sub, mul and div for large operands) and the test that runs the source on the CPU
# against the NumPy backend. tests/conformance/test_kernel_declarations.py keeps this and
# table.make_kernels in step.
_CUDA_SOURCES = {
    "activation_grads": (("threshold_backward", "tanh_backward", "sigmoid_backward"),
                         "tests/cupy_backend/test_kernels_activation_grads.py"),
    "attention": (("scaled_dot_product_attention",), "tests/cupy_backend/test_kernels_attention.py"),
    "binary": (("add", "sub", "mul", "div"), "tests/cupy_backend/test_kernels_binary.py"),
    "gelu": (("gelu", "gelu_backward"), "tests/cupy_backend/test_kernels_gelu_layer_norm.py"),
    "layer_norm": (("layer_norm", "layer_norm_backward", "layer_norm_weight_grad", "layer_norm_gradients"),
                   "tests/cupy_backend/test_kernels_gelu_layer_norm.py"),
    "cross_entropy": (("cross_entropy", "cross_entropy_backward"), "tests/cupy_backend/test_kernels_loss_optim.py"),
    "im2col": (("conv2d", "conv2d_input_grad", "conv2d_weight_grad"), "tests/cupy_backend/test_kernels_conv_pool.py"),
    "lstm": (("lstm_layer", "lstm_layer_backward"), "tests/cupy_backend/test_kernels_lstm.py"),
    "maxpool": (("max_pool2d", "max_pool2d_backward"), "tests/cupy_backend/test_kernels_conv_pool.py"),
    "optim": (("adam_step_", "sgd_step_"), "tests/cupy_backend/test_kernels_loss_optim.py"),
    "softmax": (("softmax", "log_softmax"), "tests/cupy_backend/test_kernels_loss_optim.py"),
}
PLUGTORCH_KERNELS = {NAME: {
    op: ((f"CUDA `{source}.cu`",) + (("CuPy",) if source == "binary" else ()), test)
    for source, (ops, test) in _CUDA_SOURCES.items() for op in ops}}


@hookimpl
def plugtorch_register(registrar):
    _registrars.append(registrar)
    registrar.add_backend(make_backend())
