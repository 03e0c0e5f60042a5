"""Samples for the bitwise ops: & | ^ ~ << >> on integers (logical on bool), and their errors."""
from __future__ import annotations

import operator

from ._common import Sample, Waiver, np

SAMPLES: dict = {}

_OPERATORS = {"&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
              ">>": operator.rshift}
_NO_GRAD = Waiver("grad", "bitwise ops take integer and bool tensors, which have no gradient")


def _ints(g, *shape, dtype=np.int64):
    return g.ints(*shape, low=-40, high=40).astype(dtype)


def _binary(name, ref, symbol):
    def samples(g):
        ints32 = np.array([[1, -8, 1], [32, 1, 6]], np.int32)
        return [
            Sample((_ints(g, 3, 4), _ints(g, 3, 4)), grad=False, ref=ref),
            Sample((ints32, ints32), grad=False, ref=ref, desc="int32 keeps int32"),
            Sample((_ints(g, 3, 1, dtype=np.int16), _ints(g, 4, dtype=np.int8)), grad=False, ref=ref,
                   desc="broadcast, int16 with int8 promotes"),
            Sample((g.bools(2, 3), g.bools(2, 3)), grad=False, ref=ref, desc="bool: logical"),
            Sample((ints32, 6), grad=False, ref=ref, desc="python int keeps int32"),
            Sample((g.bools(3), True), grad=False, ref=ref, desc="bool with python bool"),
            Sample((np.asarray(12), np.asarray(10)), grad=False, ref=ref),
            Sample((np.zeros((0, 2), np.int64), _ints(g, 2)), grad=False, ref=ref),
            Sample((ints32, ints32), call=lambda m, a, b: _OPERATORS[symbol](a, b), grad=False, ref=ref,
                   desc=f"operator {symbol}"),
            Sample((ints32,), call=lambda m, a: _OPERATORS[symbol](5, a), grad=False,
                   ref=lambda a: ref(np.int32(5), a), desc=f"reflected: int {symbol} tensor"),
            Sample((g.randn(2, 3), g.randn(2, 3)), raises=NotImplementedError, desc="floating input"),
            Sample((_ints(g, 2), 1.5), raises=NotImplementedError, desc="a python float"),
            _NO_GRAD,
        ]
    SAMPLES[name] = samples


_binary("bitwise_and", np.bitwise_and, "&")
_binary("bitwise_or", np.bitwise_or, "|")
_binary("bitwise_xor", np.bitwise_xor, "^")


def _shift(name, ref, symbol):
    def samples(g):
        x = np.array([[1, -8, 5], [32, -1, 6]], np.int32)
        amounts = np.array([[0, 1, 3], [31, 40, 2]], np.int32)
        return [
            Sample((x, amounts), grad=False, ref=ref, desc="shifts past the bit width"),
            Sample((_ints(g, 3, 4), g.ints(4, low=0, high=70)), grad=False, ref=ref, desc="int64, broadcast"),
            Sample((x, 2), grad=False, ref=ref, desc="python int"),
            Sample((np.array([100, -100], np.int8), 2), grad=False, ref=ref, desc="int8 overflow wraps"),
            Sample((np.asarray(7), np.asarray(1)), grad=False, ref=ref),
            Sample((np.zeros((0,), np.int64), 1), grad=False, ref=ref),
            Sample((x, amounts), call=lambda m, a, b: _OPERATORS[symbol](a, b), grad=False, ref=ref,
                   desc=f"operator {symbol}"),
            Sample((amounts,), call=lambda m, a: _OPERATORS[symbol](64, a), grad=False,
                   ref=lambda a: ref(np.int32(64), a), desc=f"reflected: int {symbol} tensor"),
            Sample((g.randn(3), 1), raises=NotImplementedError, desc="floating input"),
            Sample((g.bools(3), g.bools(3)), raises=NotImplementedError, desc="bool by bool"),
            _NO_GRAD,
        ]
    SAMPLES[name] = samples


_shift("bitwise_left_shift", np.left_shift, "<<")
_shift("bitwise_right_shift", np.right_shift, ">>")


def _bitwise_not(g):
    x = np.array([[1, -8, 1], [32, 1, 6]], np.int32)
    return [
        Sample((x,), grad=False, ref=np.invert),
        Sample((_ints(g, 3, 4, dtype=np.uint8),), grad=False, ref=np.invert, desc="uint8"),
        Sample((g.bools(2, 3),), grad=False, ref=np.invert, desc="bool: logical not"),
        Sample((x,), call=lambda m, a: ~a, grad=False, ref=np.invert, desc="operator ~"),
        Sample((np.asarray(5),), grad=False, ref=np.invert),
        Sample((np.zeros((0, 3), np.int64),), grad=False, ref=np.invert),
        Sample((g.randn(3),), raises=NotImplementedError, desc="floating input"),
        Sample((g.randn(3),), call=lambda m, a: ~a, raises=TypeError, desc="~ on floating input"),
        _NO_GRAD,
    ]


SAMPLES["bitwise_not"] = _bitwise_not
