"""The CuPy backend's elementwise fuser (``Backend.elementwise_fuser``): each chain of
elementwise calls that ``plugtorch.compile`` captures becomes the source of one CUDA kernel,
its intermediate values in registers instead of a global-memory array per call.

The kernel computes as NumPy's ufuncs do: every operand cast to the loop type (the result
type for arithmetic, the operands' common type for comparisons), numbers rounded to it, and
NaN propagated by ``maximum``/``minimum``. Float32 and float64 math and bool results are
fused; anything else leaves the chain to the replay as recorded. The source is an ordinary
``extern "C" __global__`` module, loaded like the hand-written ones (NVRTC on a GPU,
``plugtorch.testing.cuda_cpu`` in the CPU tests), so the same text is what both run.
"""
from __future__ import annotations

import functools
import math

import numpy

from .modules import THREADS, blocks

_C_TYPE = {"float32": "float", "float64": "double", "bool": "bool"}
_FLOATS = ("float32", "float64")
# name -> the C function for float32 and for float64 operands
_UNARY = {
    "exp": ("expf", "exp"), "log": ("logf", "log"), "sqrt": ("sqrtf", "sqrt"), "tanh": ("tanhf", "tanh"),
    "log1p": ("log1pf", "log1p"), "expm1": ("expm1f", "expm1"), "abs": ("fabsf", "fabs"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"),
}
_ARITHMETIC = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
               # NumPy's maximum and minimum return a NaN operand; fmaxf/fminf would drop it
               "maximum": "({a} > {b} || {a} != {a}) ? {a} : {b}",
               "minimum": "({a} < {b} || {a} != {a}) ? {a} : {b}"}
_COMPARE = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
_LOGICAL = {"logical_and": "&&", "logical_or": "||"}


def _number(value) -> bool:
    return isinstance(value, (bool, int, float, numpy.generic)) and math.isfinite(float(value))


def _loop_type(name, operands, result):
    """The dtype a link computes in, or None where it is not fused. ``operands``: a dtype name
    per array operand, ``("const", value)`` per number."""
    arrays = [o for o in operands if isinstance(o, str)]
    consts = [o[1] for o in operands if not isinstance(o, str)]
    if name == "cast":
        return result if len(arrays) == 1 and arrays[0] in _C_TYPE and result in _C_TYPE else None
    if any(not _number(c) for c in consts) or any(a not in _C_TYPE for a in arrays) or not arrays:
        return None
    if name in _UNARY or name == "neg":
        return result if result in _FLOATS and arrays == [result] else None
    if name in _ARITHMETIC:  # float operands of the result's type (bools are cast up exactly)
        ok = result in _FLOATS and len(operands) == 2 and all(a in (result, "bool") for a in arrays)
        return result if ok else None
    if name in _COMPARE:
        common = numpy.result_type(*arrays).name
        return common if result == "bool" and common in _FLOATS and len(operands) == 2 else None
    if name in _LOGICAL:
        return "bool" if result == "bool" and arrays == ["bool", "bool"] else None
    return None


def _literal(value, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    exact = float(numpy.dtype(dtype).type(value))  # rounded as NumPy rounds a weak scalar
    return f"({_C_TYPE[dtype]}){exact.hex()}"


def source(chain) -> str:
    """The CUDA source of one kernel ``fused_chain(in0, ..., out, n)`` computing ``chain``."""
    params = [f"const {_C_TYPE[d]}* __restrict__ in{k}" for k, (d, _) in enumerate(chain.inputs)]
    params += [f"{_C_TYPE[chain.ops[-1][2]]}* __restrict__ out", "const long long n"]
    body = []
    dtypes: list[str] = []  # the dtype of each link's value
    for m, (name, operands, result) in enumerate(chain.ops):
        shown: list[str | None] = []
        operand_dtypes: list = []
        for kind, ref in operands:
            if kind == "in":
                dtype, scalar = chain.inputs[ref]
                shown.append(f"in{ref}[{'0' if scalar else 'i'}]")
                operand_dtypes.append(dtype)
            elif kind == "op":
                shown.append(f"v{ref}")
                operand_dtypes.append(dtypes[ref])
            else:
                shown.append(None)  # a number: written once the loop type is known
                operand_dtypes.append(("const", ref))
        loop = _loop_type(name, operand_dtypes, result)
        if loop is None:
            raise ValueError(f"fused_chain: {name} on {operand_dtypes} -> {result} cannot be fused")
        c = _C_TYPE[loop]
        if name == "cast":  # its second operand is the dtype, which the result type already says
            shown, operand_dtypes = shown[:1], operand_dtypes[:1]
        vals = [f"({c})({s})" if s is not None else _literal(o[1], loop) for s, o in zip(shown, operand_dtypes)]
        if name == "cast":
            expr = vals[0]
        elif name == "neg":
            expr = f"-{vals[0]}"
        elif name in _UNARY:
            expr = f"{_UNARY[name][_FLOATS.index(loop)]}({vals[0]})"
        elif name in _ARITHMETIC:
            expr = _ARITHMETIC[name].format(a=vals[0], b=vals[1])
        elif name in _COMPARE:
            expr = f"{vals[0]} {_COMPARE[name]} {vals[1]}"
        else:
            expr = f"{vals[0]} {_LOGICAL[name]} {vals[1]}"
        body.append(f"        const {_C_TYPE[result]} v{m} = ({expr});")
        dtypes.append(result)
    body.append(f"        out[i] = v{len(chain.ops) - 1};")
    return ("// generated by plugtorch's CuPy backend for one elementwise chain of a captured trace\n"
            f'extern "C" __global__ void fused_chain({", ".join(params)}) {{\n'
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
            "         i += (long long)blockDim.x * gridDim.x) {\n" + "\n".join(body) + "\n    }\n}\n")


class ElementwiseFuser:
    """``fusable`` and ``build`` for ``plugtorch.compiler.fusion``; ``load_source(code)`` gives a
    module with ``get_function`` (``cupy.RawModule`` or ``CpuModule``)."""

    def __init__(self, xp, load_source):
        self.xp = xp
        self._load = functools.lru_cache(maxsize=256)(load_source)

    def fusable(self, name, operands, result) -> bool:
        return _loop_type(name, operands, result) is not None

    def build(self, chain):
        kernel = self._load(source(chain)).get_function("fused_chain")
        xp, shape, out_dtype = self.xp, chain.shape, chain.ops[-1][2]
        n = math.prod(shape)
        grid = (blocks(n),)

        def fused(*arrays):
            out = xp.empty(shape, dtype=out_dtype)
            kernel(grid, (THREADS,), (*arrays, out, numpy.int64(n)))
            return out
        return fused


def sample_chains() -> list:
    """Chains covering every kind of link, in both float dtypes, for the compile checks (nvcc
    and NVRTC, test_kernel_sources.py) and the CPU tests."""
    from plugtorch.backend_api import Chain
    unary = [(name, "float32") for name in _UNARY] + [("neg", "float64")]
    first = Chain((5,), (("float32", False), ("float64", False)), tuple(
        (name, (("in", 0) if m == 0 else ("op", m - 1),), "float32") for m, (name, _) in enumerate(unary[:-1])))
    ops: list = [("neg", (("in", 0),), "float64")]
    ops += [(name, (("op", len(ops) - 1 + m), ("in", 1)), "float64") for m, name in enumerate(_ARITHMETIC)]
    value = len(ops) - 1
    acc = None
    for m, name in enumerate(_COMPARE):  # each comparison folded into one bool by the logical ops
        ops.append((name, (("op", value), ("const", 0.5)), "bool"))
        other = ("in", 2) if acc is None else ("op", acc)
        ops.append((("logical_and", "logical_or")[m % 2], (("op", len(ops) - 1), other), "bool"))
        acc = len(ops) - 1
    ops.append(("cast", (("op", acc), ("const", None)), "float32"))
    second = Chain((5,), (("float64", False), ("float64", True), ("bool", False)), tuple(ops))
    return [Chain(first.shape, first.inputs[:1], first.ops), second]
