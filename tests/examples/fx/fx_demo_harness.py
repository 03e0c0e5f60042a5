"""Runs a pytorch/examples fx demo's source as a script twice: with ``import torch`` resolving to
plugtorch (``torch``, ``torch.fx``, ``torch.nn`` ... are plugtorch's modules in ``sys.modules`` while
it runs) and with the real torch, the test oracle. The tests compare what each run computed.
"""
from __future__ import annotations

import contextlib
import io
import operator
import sys
import types

from torchvision_resnet import resnet_models

import plugtorch
import plugtorch.fx
import plugtorch.nn.functional


def _plugtorch_modules() -> dict[str, types.ModuleType]:
    return {"torch": plugtorch, "torch.fx": plugtorch.fx, "torch.fx.node": plugtorch.fx.node,
            "torch.fx.proxy": plugtorch.fx.proxy, "torch.fx.graph": plugtorch.fx.graph,
            "torch.nn": plugtorch.nn, "torch.nn.functional": plugtorch.nn.functional}


def run_demo(source: str, framework: str, extra_modules: dict | None = None) -> tuple[dict, str]:
    """Execute ``source`` as the script ``__main__`` on ``framework`` ("plugtorch" or "torch");
    returns its globals and what it printed."""
    modules = dict(extra_modules or {})
    if framework == "plugtorch":
        modules.update(_plugtorch_modules())
    else:
        import torch
        import torch.fx
        modules["torch"] = torch
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    out = io.StringIO()
    namespace: dict = {"__name__": "__main__"}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, f"<fx demo on {framework}>", "exec"), namespace)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return namespace, out.getvalue()


def code_as_torch(code: str) -> str:
    """plugtorch's generated code with its module spelled ``torch``, to compare with torch's text."""
    return code.replace("plugtorch.", "torch.")


def _same_target(ours, theirs) -> bool:
    if isinstance(theirs, str) or ours is theirs:
        return ours == theirs
    import torch.fx.node as tnode
    name = tnode._get_qualified_name(theirs)
    if name.startswith("torch."):  # the same public name must be our target
        obj = plugtorch
        for atom in name.split(".")[1:]:
            obj = getattr(obj, atom, None)
        return obj is ours
    return getattr(ours, "__name__", None) == getattr(theirs, "__name__", None)


def assert_same_graph(ours, theirs) -> None:
    """The two graphs have the same nodes in the same order: kinds, targets (torch's public
    name resolves to our target), and arguments (nodes by position, other values equal)."""
    a, b = list(ours.nodes), list(theirs.nodes)
    assert [n.op for n in a] == [n.op for n in b], f"\n{ours}\n!=\n{theirs}"
    index_a = {n: i for i, n in enumerate(a)}
    index_b = {n: i for i, n in enumerate(b)}

    def shape(x, index):
        if type(x).__name__ == "Node":
            return ("node", index[x])
        if isinstance(x, (list, tuple)):  # torch's node arguments hold immutable lists
            return ("list" if isinstance(x, list) else "tuple", tuple(shape(e, index) for e in x))
        if isinstance(x, dict):
            return ("dict", tuple((k, shape(v, index)) for k, v in x.items()))
        return ("value", x)
    for na, nb in zip(a, b):
        assert _same_target(na.target, nb.target), f"{na.format_node()} vs {nb.format_node()}"
        assert shape(na.args, index_a) == shape(nb.args, index_b), f"{na.format_node()} vs {nb.format_node()}"
        assert shape(na.kwargs, index_a) == shape(nb.kwargs, index_b), f"{na.format_node()} vs {nb.format_node()}"


__all__ = ["run_demo", "code_as_torch", "assert_same_graph", "resnet_models", "operator"]
