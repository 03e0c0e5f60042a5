"""The ONNX graph under construction: value names, nodes, initializers and constants.

A traced value that lives in the ONNX graph is a :class:`V`: its name there and the value the
same node had when the model ran on the example inputs (a Tensor, or an int for a size read
under ``dynamic_axes``), which gives the converters dtypes and ranks. Everything else a node
produces (shapes without dynamic axes, dtypes, strings) stays a Python value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import plugtorch

__all__ = ["V", "Builder", "onnx_dtype", "numpy_dtype", "scalar_dtype", "OnnxExporterError"]

INT64_MAX = np.iinfo(np.int64).max


class OnnxExporterError(RuntimeError):
    """A model (or an argument of export) that plugtorch.onnx.export cannot write as ONNX."""
    __module__ = "plugtorch.onnx"


@dataclass(frozen=True, eq=False)
class V:
    """A value of the ONNX graph: its name and its example value (Tensor or int)."""
    name: str
    ex: Any

    @property
    def dtype(self) -> Any:
        return self.ex.dtype if isinstance(self.ex, plugtorch.Tensor) else scalar_dtype(self.ex)

    @property
    def ndim(self) -> int:
        if isinstance(self.ex, plugtorch.Tensor):
            return self.ex.ndim
        return 1 if isinstance(self.ex, tuple) else 0

    @property
    def shape(self) -> tuple[int, ...]:
        if isinstance(self.ex, plugtorch.Tensor):
            return tuple(self.ex.shape)
        return (len(self.ex),) if isinstance(self.ex, tuple) else ()


def scalar_dtype(value: Any) -> Any:
    """The dtype a traced Python number (a size, or arithmetic on one) has in the ONNX graph."""
    if isinstance(value, bool):
        return plugtorch.bool
    return plugtorch.float32 if isinstance(value, float) else plugtorch.int64


_NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def onnx_dtype(dtype: Any) -> int:
    """The ONNX ``TensorProto`` element type of a plugtorch dtype."""
    from onnx import TensorProto
    name = str(dtype).rpartition(".")[2]
    code = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
            "bfloat16": TensorProto.BFLOAT16, "int64": TensorProto.INT64, "int32": TensorProto.INT32,
            "int16": TensorProto.INT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
            "bool": TensorProto.BOOL}.get(name)
    if code is None:
        raise OnnxExporterError(f"plugtorch.onnx.export: dtype {dtype} has no ONNX element type")
    return code


def numpy_dtype(dtype: Any) -> Any:
    name = str(dtype).rpartition(".")[2]
    if name not in _NUMPY:
        raise OnnxExporterError(f"plugtorch.onnx.export: a constant of dtype {dtype} cannot be written")
    return _NUMPY[name]


class Builder:
    """Collects the nodes and initializers of one exported graph."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._used: set[str] = set()
        self._consts: dict[tuple, V] = {}
        self.scope = ""  # the traced node being converted: its name names the ONNX nodes and values

    def fresh(self, base: str) -> str:
        """A name not used yet in this graph, ``base`` itself where it is free."""
        name, i = base, 0
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def op(self, op_type: str, inputs: list[V | None], ex: Any, base: str | None = None, **attrs: Any) -> V:
        """Add one node with one output; ``ex`` is the output's example value."""
        return self.op_n(op_type, inputs, [ex], base, **attrs)[0]

    def op_n(self, op_type: str, inputs: list[V | None], exs: list[Any], base: str | None = None,
             **attrs: Any) -> list[V]:
        """Add one node with ``len(exs)`` outputs."""
        from onnx import helper
        base = base or self.scope or op_type.lower()
        outs = [V(self.fresh(base if len(exs) == 1 else f"{base}_{i}"), ex) for i, ex in enumerate(exs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        while inputs and inputs[-1] is None:  # optional inputs left out at the end are not written
            inputs = inputs[:-1]
        name = self.fresh(f"/{self.scope or base}/{op_type}")
        self.nodes.append(helper.make_node(op_type, ["" if v is None else v.name for v in inputs],
                                           [v.name for v in outs], name=name, **attrs))
        return outs

    def initializer(self, name: str, array: np.ndarray, ex: Any) -> V:
        from onnx import numpy_helper
        v = V(self.fresh(name), ex)
        # np.array, not ascontiguousarray, which makes a 0-d array 1-d
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), v.name))
        return v

    def const(self, value: Any, dtype: Any) -> V:
        """A constant (a number or nested list) of plugtorch ``dtype``, shared by equal constants."""
        array = np.asarray(value, dtype=numpy_dtype(dtype))
        key = (str(dtype), array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.initializer("const", array, plugtorch.tensor(array))
        return self._consts[key]

    def ints(self, values: list[Any] | tuple[Any, ...]) -> V:
        """A 1-D int64 vector; items that are traced sizes (``V``) are concatenated in."""
        if not any(isinstance(v, V) for v in values):
            return self.const([int(v) for v in values], plugtorch.int64)
        parts = [self.unsqueeze(self.cast(v, plugtorch.int64), [0]) if isinstance(v, V) else
                 self.const([int(v)], plugtorch.int64) for v in values]
        ex = tuple(int(v.ex) if isinstance(v, V) else int(v) for v in values)
        return self.op("Concat", list(parts), ex, "shape", axis=0)

    def cast(self, v: V, dtype: Any) -> V:
        if v.dtype == dtype:
            return v
        ex = v.ex.to(dtype) if isinstance(v.ex, plugtorch.Tensor) else v.ex
        return self.op("Cast", [v], ex, "cast", to=onnx_dtype(dtype))

    def unsqueeze(self, v: V, axes: list[int]) -> V:
        ex = v.ex
        if isinstance(ex, plugtorch.Tensor):
            for a in sorted(a % (ex.ndim + len(axes)) for a in axes):
                ex = ex.unsqueeze(a)
        else:
            ex = plugtorch.tensor(ex).reshape([1] * len(axes))
        return self.op("Unsqueeze", [v, self.const(axes, plugtorch.int64)], ex, "unsqueeze")

    def squeeze(self, v: V, axes: list[int], ex: Any) -> V:
        return self.op("Squeeze", [v, self.const(axes, plugtorch.int64)], ex, "squeeze")
