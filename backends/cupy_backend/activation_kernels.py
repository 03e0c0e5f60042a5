"""threshold_backward, tanh_backward and sigmoid_backward as CUDA kernels: one launch each, where
the ops' decompositions are three elementwise launches and two temporaries; gelu and
gelu_backward (exact and tanh forms, ``kernels/gelu.cu``): one launch each where the
decompositions make five.

``make_kernels(xp, load)`` gives the registered-op kernels, with the NumPy backend's signatures
(``backends/numpy_backend/native/activation.py``), over ``kernels/activation_grads.cu``; they
compute what the native kernels compute, bit for bit. Operands of one float32/float64 dtype and
one layout (C-contiguous, or dense in the same other order, as a convolution's channel-major
output and its gradient are) run on their memory as it lies; float16, mixed dtypes or layouts
run the NumPy kernels' formulas in ``xp``. gelu's kernels compute the native kernels' formulas
(to libm's and CUDA's erf/tanh/exp, not bit for bit); float16 or other layouts run them on a
C-contiguous float32/float64 copy, rounded back once.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy
from plugtorch_backends.numpy_backend.layout import dense_alike, flat_views

from .modules import FLOATS, THREADS, as_operand, blocks, float_work_dtype, kernel_finder


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

    def gelu_launch(name, operands, tanh_form):
        """``name`` of gelu.cu over same-shape operands: on their memory as it lies where they are
        floats laid out alike, else on C-contiguous copies in the work dtype (float16 in float32)."""
        first = xp.asarray(operands[0])
        operands = [xp.asarray(a) for a in operands]
        if first.dtype in FLOATS and all(a.dtype == first.dtype and dense_alike(a, first) for a in operands):
            out = xp.empty_like(first)
            flat = flat_views(*operands, out)
        else:
            work = float_work_dtype(first.dtype, name + ": no CUDA kernel for {dtype}: it takes float16, float32 "
                                    "or float64")
            operands = [as_operand(a, work) for a in operands]
            out = xp.empty(first.shape, dtype=work)
            flat = [*operands, out]
        if first.size:
            find("gelu", name, out.dtype)((blocks(first.size),), (THREADS,), (
                *flat, numpy.int64(first.size), numpy.int32(tanh_form)))
        return out if out.dtype == first.dtype else out.astype(first.dtype)

    def _tanh_form(name, approximate):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"{name}: approximate must be 'none' or 'tanh', got {approximate!r}")
        return approximate == "tanh"

    def gelu(x, *, approximate):
        return gelu_launch("gelu", [x], _tanh_form("gelu", approximate))

    def gelu_backward(grad_output, x, *, approximate):
        return gelu_launch("gelu_backward", [grad_output, x], _tanh_form("gelu_backward", approximate))

    return {"gelu": gelu, "gelu_backward": gelu_backward, "threshold_backward": threshold_backward,
            "tanh_backward": tanh_backward, "sigmoid_backward": sigmoid_backward}
