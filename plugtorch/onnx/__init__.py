"""``plugtorch.onnx``: write a model as an ONNX graph, as ``torch.onnx.export`` does.

``export`` traces the model with ``plugtorch.fx`` (plugtorch's layers kept as one node each),
runs the trace on the example inputs and maps every node to ONNX operators; what has no
mapping is an error naming the op and the node. Writing ONNX needs the ``onnx`` package
(``pip install plugtorch[onnx]``); importing this module does not. ``docs/onnx.md`` lists the ops.
"""
from __future__ import annotations

import enum
import inspect
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import plugtorch

from ._builder import OnnxExporterError, V, onnx_dtype

__all__ = ["export", "is_in_onnx_export", "TrainingMode", "OperatorExportTypes", "ONNXProgram", "OnnxExporterError"]



class TrainingMode(enum.IntEnum):
    """The mode a model is exported in: eval (torch's default), as it is, or training."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """How ops without an ONNX form are exported; plugtorch writes standard ONNX only."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


_EXPORTING = False


def is_in_onnx_export() -> bool:
    """Whether an ``export`` is running (a model's forward may ask, as in torch)."""
    return _EXPORTING


class ONNXProgram:
    """What ``export(..., dynamo=True)`` returns: the ONNX model, and ``save`` to write it."""

    def __init__(self, model_proto: Any) -> None:
        self.model_proto = model_proto

    def save(self, destination: str | os.PathLike | Any, **kwargs: Any) -> None:
        import onnx
        onnx.save_model(self.model_proto, destination)

    def __repr__(self) -> str:
        return f"ONNXProgram(\n{_text(self.model_proto.graph)}\n)"


_Axes = Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]]
_Path = str | os.PathLike | Any


def export(model: Any, args: Any = (), f: _Path | None = None, *, kwargs: dict[str, Any] | None = None,
           verbose: bool | None = None, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, opset_version: int | None = None, dynamo: bool = True,
           external_data: bool = True, dynamic_shapes: Any = None, custom_translation_table: Any = None,
           report: bool = False, optimize: bool = True, verify: bool = False, profile: bool = False,
           dump_exported_program: bool = False, artifacts_dir: _Path = ".", export_params: bool = True,
           keep_initializers_as_inputs: bool = False, dynamic_axes: _Axes | None = None,
           training: TrainingMode = TrainingMode.EVAL,
           operator_export_type: OperatorExportTypes = OperatorExportTypes.ONNX, do_constant_folding: bool = True,
           custom_opsets: Mapping[str, int] | None = None, export_modules_as_functions: bool | Collection[type] = False,
           autograd_inlining: bool = True) -> ONNXProgram | None:
    """Export ``model`` called with ``args`` (and ``kwargs``) as ONNX, written to ``f`` when given.

    torch 2.13's signature. ``dynamo`` picks only what is returned (an :class:`ONNXProgram` for
    True, None for False, as torch): both trace with ``plugtorch.fx``. Sizes that ``dynamic_axes``
    names stay symbolic; every other size is the example's. Arguments of torch's exporters that
    change the graph in ways plugtorch does not (``dynamic_shapes``, ``custom_translation_table``,
    ``custom_opsets``, module functions, ATen fallbacks) are refused.
    """
    try:
        import onnx
        from onnx import helper
    except ImportError as e:
        raise ImportError("plugtorch.onnx.export needs the onnx package: pip install plugtorch[onnx]") from e
    from plugtorch.fx.proxy import TraceError

    from ._export import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, Converter, Recorder, flat, trace

    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"plugtorch.onnx.export: opset_version {opset} is not supported; use {MIN_OPSET} to "
                         f"{MAX_OPSET} (default {DEFAULT_OPSET})")
    refused = {"dynamic_shapes": dynamic_shapes is not None, "custom_translation_table": custom_translation_table,
               "custom_opsets": custom_opsets, "export_modules_as_functions": export_modules_as_functions,
               "report": report, "verify": verify, "profile": profile, "dump_exported_program": dump_exported_program}
    for name, given in refused.items():
        if given:
            hint = "; use dynamic_axes=" if name == "dynamic_shapes" else ""
            raise ValueError(f"plugtorch.onnx.export: {name}= is not supported (plugtorch exports through "
                             f"plugtorch.fx); leave it at its default{hint}")
    if operator_export_type != OperatorExportTypes.ONNX:
        raise ValueError(f"plugtorch.onnx.export: operator_export_type={operator_export_type!r} is not supported; "
                         "only OperatorExportTypes.ONNX (standard ONNX operators)")
    if not isinstance(model, plugtorch.nn.Module):
        raise TypeError(f"plugtorch.onnx.export: model must be a plugtorch.nn.Module, got {type(model).__name__}")
    args = (args,) if isinstance(args, plugtorch.Tensor) else tuple(args)
    call_kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict):  # torch's older convention: a trailing dict holds keyword arguments
        call_kwargs = {**args[-1], **call_kwargs}
        args = args[:-1]

    global _EXPORTING
    was_training = model.training
    if training == TrainingMode.TRAINING or (training == TrainingMode.PRESERVE and was_training):
        raise ValueError("plugtorch.onnx.export: exporting in training mode is not supported (dropout and batch "
                         "statistics have no fixed ONNX graph); export with training=TrainingMode.EVAL")
    model.train(False)
    _EXPORTING = True
    try:
        placeholders, values_in, grown = _bind(model, args, call_kwargs, dynamic_axes, input_names)
        try:
            gm, prefix = trace(model, placeholders.names, placeholders.concrete)
        except TraceError as e:
            raise OnnxExporterError(f"plugtorch.onnx.export traces {type(model).__name__}.forward with "
                                    f"plugtorch.fx, which could not trace it: {e}") from e
        with plugtorch.no_grad():
            values = Recorder(gm).values(values_in)
            try:
                values2 = Recorder(gm).values(grown) if grown is not None else None
            except Exception as e:
                raise OnnxExporterError("plugtorch.onnx.export: running the model on inputs one longer along each "
                                        "of dynamic_axes failed (axes that must agree, such as the batch of an input "
                                        f"and of its hidden state, must all be dynamic): {e}") from e
        cx = Converter(gm, opset, export_params, prefix)
        inputs = _graph_inputs(placeholders.names, values_in, input_names)
        for reserved in [v.name for i in inputs for v in flat(i[0]) if isinstance(v, V)] + list(output_names or []):
            cx.b.fresh(reserved)  # the names the caller chose are not given to anything else
        result = cx.run([i[0] for i in inputs], values, values2)
    finally:
        _EXPORTING = False
        model.train(was_training)
    graph = _graph(cx, [v for i in inputs for v in flat(i[0])], list(flat(result)), values2 is not None,
                   output_names, dynamic_axes or {}, keep_initializers_as_inputs, type(model).__name__, helper)
    names = {v.name for v in graph.input} | {v.name for v in graph.output}
    for key in dynamic_axes or {}:
        if key not in names:
            warnings.warn(f"Provided key {key} for dynamic axes is not a valid input/output name", stacklevel=2)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="plugtorch",
                              producer_version=plugtorch.__version__)
    proto.ir_version = min(onnx.IR_VERSION, 10)  # what current onnxruntime releases read
    if verbose:
        print(_text(graph))
    if f is not None:
        onnx.save_model(proto, f)
    return ONNXProgram(proto) if dynamo else None


def _text(graph: Any) -> str:
    """The graph as ONNX's textual syntax (``printable_graph`` before onnx 1.16, deprecated since)."""
    import onnx
    printer = getattr(onnx, "printer", None)
    return printer.to_text(graph) if printer is not None else onnx.helper.printable_graph(graph)


class _Placeholders:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.concrete: dict[str, Any] = {}


def _bind(model: Any, args: tuple, kwargs: dict, dynamic_axes: Any, input_names: Any) -> tuple:
    """Which forward parameters are traced inputs, their values, and the values grown along dynamic axes."""
    sig = inspect.signature(type(model).forward)
    params = [p for p in list(sig.parameters.values())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if len(args) > len(params):
        raise TypeError(f"plugtorch.onnx.export: {type(model).__name__}.forward takes {len(params)} arguments, "
                        f"{len(args)} were given")
    ph, values = _Placeholders(), []
    for i, p in enumerate(params):
        value = args[i] if i < len(args) else kwargs.get(p.name, p.default)
        if value is p.empty:
            raise TypeError(f"plugtorch.onnx.export: {type(model).__name__}.forward's argument {p.name!r} "
                            "was not given")
        if any(isinstance(v, plugtorch.Tensor) for v in _leaves(value)):
            ph.names.append(p.name)
            values.append(value)
        else:
            ph.concrete[p.name] = value
    grown = None
    if dynamic_axes:
        names = _input_names(ph.names, values, input_names)
        leaves = [v for value in values for v in _leaves(value)]
        axes = {n: _axes(dynamic_axes.get(n, {})) for n in names}
        new = [_grow(t, axes[n]) for n, t in zip(names, leaves)]
        it = iter(new)
        grown = tuple(_restructure(value, it) for value in values)
    return ph, tuple(values), grown


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _restructure(value: Any, it: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_restructure(v, it) for v in value)
    return next(it)


def _grow(t: Any, axes: dict[int, str]) -> Any:
    """``t`` one longer along each dynamic axis (its first slice repeated: valid token ids stay valid)."""
    for a in axes:
        t = plugtorch.cat([t, t.narrow(a, 0, 1)], a)
    return t


def _axes(spec: Any) -> dict[int, str]:
    return dict(spec) if isinstance(spec, Mapping) else {int(a): "" for a in spec}


def _input_names(ph_names: list[str], values: Sequence[Any], input_names: Sequence[str] | None) -> list[str]:
    names = []
    for name, value in zip(ph_names, values):
        leaves = _leaves(value)
        names += [name] if len(leaves) == 1 and not isinstance(value, (tuple, list)) else \
            [f"{name}.{i}" for i in range(len(leaves))]
    given = list(input_names or [])
    if len(given) > len(names):
        raise ValueError(f"plugtorch.onnx.export: {len(given)} input_names for {len(names)} inputs")
    return given + names[len(given):]


def _graph_inputs(ph_names: list[str], values: Sequence[Any], input_names: Sequence[str] | None) -> list[tuple]:
    names = iter(_input_names(ph_names, values, input_names))

    def build(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return type(value)(build(v) for v in value)
        return V(next(names), value) if isinstance(value, plugtorch.Tensor) else value
    return [(build(v),) for v in values]


def _value_info(helper: Any, v: V, name: str, dims: dict[int, str], dynamic_all: set[int]) -> Any:
    shape: list[Any] = []
    for i, d in enumerate(v.shape):
        shape.append(dims[i] if dims.get(i) else (f"{name}_dynamic_axes_{i + 1}" if i in dims or i in dynamic_all
                                                   else d))
    return helper.make_tensor_value_info(name, onnx_dtype(v.dtype), shape)


def _graph(cx: Any, inputs: list[Any], outputs: list[Any], dynamic: bool, output_names: Any, dynamic_axes: Any,
           keep_inits: bool, name: str, helper: Any) -> Any:
    b = cx.b
    given = list(output_names or [])
    if len(given) > len(outputs):
        raise ValueError(f"plugtorch.onnx.export: {len(given)} output_names for {len(outputs)} outputs")
    input_names = {v.name for v in inputs if isinstance(v, V)} | {i.name for i in b.initializers}
    out_info, seen = [], set()
    for i, v in enumerate(outputs):
        if not isinstance(v, V):
            raise OnnxExporterError(f"plugtorch.onnx.export: output {i} is a {type(v).__name__}, not a tensor "
                                    "computed from the inputs")
        varying = cx.dynamic_dims(v) if dynamic and v.name in cx.varying else set()
        want = given[i] if i < len(given) else v.name
        if want != v.name or v.name in input_names or v.name in seen:  # an Identity gives it its own name
            want = want if i < len(given) else b.fresh(v.name)
            b.nodes.append(helper.make_node("Identity", [v.name], [want], name=b.fresh("/output/Identity")))
            v = V(want, v.ex)
        seen.add(v.name)
        out_info.append(_value_info(helper, v, v.name, _axes(dynamic_axes.get(v.name, {})), varying))
    in_info = [_value_info(helper, v, v.name, _axes(dynamic_axes.get(v.name, {})), set())
               for v in inputs if isinstance(v, V)]
    in_info += [_value_info(helper, v, v.name, {}, set()) for v in cx.param_inputs]
    if keep_inits:
        in_info += [_value_info(helper, v, v.name, {}, set()) for v in cx.params.values() if v not in cx.param_inputs]
    return helper.make_graph(b.nodes, name, in_info, out_info, initializer=b.initializers)
