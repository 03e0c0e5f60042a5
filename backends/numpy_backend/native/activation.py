"""The activations' gradients in one C pass each: threshold_backward (relu's; the decomposition
is a comparison, a cast and a multiply, three passes and two temporaries over every activation),
tanh_backward and sigmoid_backward (three passes each in fused.py)."""
from __future__ import annotations

import numpy as np

from .. import fused
from . import FLOATS, _kernels


def _memory_order(x):
    """``x`` transposed so that its dims run in memory order (a C-contiguous view where ``x`` is
    dense in any order, such as a convolution's channel-major output), and the axes used."""
    axes = tuple(sorted(range(x.ndim), key=lambda i: -x.strides[i]))
    return x.transpose(axes), axes


def threshold_backward(grad_output, input, *, threshold):
    if input.dtype in FLOATS and grad_output.dtype == input.dtype:
        if input.flags.c_contiguous and grad_output.flags.c_contiguous:  # the common case, kept cheap
            out = np.empty_like(input)
            _kernels.threshold_backward(grad_output, input, threshold, out)
            return out
        if grad_output.strides == input.strides:
            x, axes = _memory_order(input)
            if x.flags.c_contiguous:
                out = np.empty_like(x)
                _kernels.threshold_backward(grad_output.transpose(axes), x, threshold, out)
                inverse = [0] * len(axes)
                for i, a in enumerate(axes):
                    inverse[a] = i
                return out.transpose(inverse)
    # other dtypes and layouts: the decomposition's formula
    return grad_output * (input > threshold).astype(grad_output.dtype)


def _output_backward(c_kernel, numpy_kernel):
    """A kernel of (grad_output, output) that runs ``c_kernel`` where both are C-contiguous floats
    of one dtype (what the engine hands over) and ``numpy_kernel``, the same rounding, elsewhere."""
    def kernel(grad_output, output):
        if (output.dtype in FLOATS and grad_output.dtype == output.dtype and output.flags.c_contiguous
                and grad_output.flags.c_contiguous):
            out = np.empty_like(output)
            c_kernel(grad_output, output, out)
            return out
        return numpy_kernel(grad_output, output)
    kernel.__name__ = kernel.__qualname__ = numpy_kernel.__name__
    return kernel


assert _kernels is not None, "imported by native.kernels() only once the extension has loaded"
tanh_backward = _output_backward(_kernels.tanh_backward, fused.tanh_backward)
sigmoid_backward = _output_backward(_kernels.sigmoid_backward, fused.sigmoid_backward)
