"""threshold_backward, tanh_backward and sigmoid_backward as CUDA kernels: one launch each, where
the ops' decompositions are three elementwise launches and two temporaries.

``make_kernels(xp, load)`` gives the registered-op kernels, with the NumPy backend's signatures
(``backends/numpy_backend/native/activation.py``), over ``kernels/activation_grads.cu``; they
compute what the native kernels compute, bit for bit. Operands of one float32/float64 dtype and
one layout (C-contiguous, or dense in the same other order, as a convolution's channel-major
output and its gradient are) run on their memory as it lies; float16, mixed dtypes or layouts
run the NumPy kernels' formulas in ``xp``.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy
from plugtorch_backends.numpy_backend.layout import dense_alike, flat_views

from .modules import FLOATS, THREADS, blocks, kernel_finder


def _flat(first, second) -> bool:
    """Whether the kernel runs on the two operands' flat memory: floats of one dtype laid out
    alike and densely (``numpy_backend.layout``)."""
    return first.dtype in FLOATS and second.dtype == first.dtype and dense_alike(first, second)


def make_kernels(xp, load: Callable) -> dict[str, Callable]:
    """op name -> kernel over ``xp`` arrays (``cupy``, or NumPy with the CPU-built kernels)."""
    find = kernel_finder(load)

    def launch(name, a, b, *scalars):
        a, b = xp.asarray(a), xp.asarray(b)  # (a NumPy scalar from the CPU tests' 0-d results)
        out = xp.empty_like(a)  # a's layout (order 'K'), so the flat memories line up
        if a.size:
            flat = flat_views(a, b, out)
            find("activation_grads", name, a.dtype)((blocks(a.size),), (THREADS,),
                                                    (flat[0], flat[1], *scalars, flat[2], numpy.int64(a.size)))
        return out

    def threshold_backward(grad_output, input, *, threshold):
        if _flat(grad_output, input):
            return launch("threshold_backward", grad_output, input, input.dtype.type(threshold))
        return grad_output * ~(input <= threshold)

    def tanh_backward(grad_output, output):
        if _flat(grad_output, output):
            return launch("tanh_backward", grad_output, output)
        return grad_output * (1 - output * output)

    def sigmoid_backward(grad_output, output):
        if _flat(grad_output, output):
            return launch("sigmoid_backward", grad_output, output)
        return grad_output * (1 - output) * output

    return {"threshold_backward": threshold_backward, "tanh_backward": tanh_backward,
            "sigmoid_backward": sigmoid_backward}
