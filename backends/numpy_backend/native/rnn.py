"""lstm_layer and its backward op with each step's gate arithmetic in one C pass (``rnn.c``, the
``_rnn`` extension): the NumPy backend's kernels (``..rnn``) over the C step functions, for
float32/float64 operands of one dtype; anything else runs those kernels over their NumPy steps.
Where ``_rnn`` was not built, the NumPy kernels serve alone."""
from __future__ import annotations

from .. import rnn
from . import FLOATS


def _load():
    try:
        from . import _rnn
    except ImportError:  # built without a C compiler, or by a setup.py older than rnn.c
        return None
    return _rnn


_rnn = _load()


def _floats(*arrays):
    dtypes = {a.dtype for a in arrays if a is not None}
    return len(dtypes) == 1 and dtypes <= set(FLOATS)


def make_kernels():
    """The two kernels over the C steps and layer loops (float arrays of one dtype only); None where
    not built."""
    if _rnn is None:
        return None
    # (an _rnn built from older sources has the steps only: an editable install not rebuilt)
    return rnn.make_kernels(_rnn.lstm_forward_step, _rnn.lstm_backward_step,
                            getattr(_rnn, "lstm_forward_layer", None), getattr(_rnn, "lstm_backward_layer", None))


def rnn_kernels() -> dict:
    """op name -> kernel: the C steps for float operands of one dtype, the NumPy ones otherwise."""
    c = make_kernels()
    if c is None:
        return {}

    def lstm_layer(input_gates, h0, c0, weight_hh, bias_hh, *, reverse):
        kernels = c if _floats(input_gates, h0, c0, weight_hh, bias_hh) else rnn.RNN_KERNELS
        return kernels["lstm_layer"](input_gates, h0, c0, weight_hh, bias_hh, reverse=reverse)

    def lstm_layer_backward(grad_state, c0, weight_hh, state, *, reverse):
        kernels = c if _floats(grad_state, c0, weight_hh, state) else rnn.RNN_KERNELS
        return kernels["lstm_layer_backward"](grad_state, c0, weight_hh, state, reverse=reverse)

    return {"lstm_layer": lstm_layer, "lstm_layer_backward": lstm_layer_backward}
