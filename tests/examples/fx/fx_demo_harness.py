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


def resnet18_models(torch) -> types.ModuleType:
    """A stand-in ``torchvision.models`` with ``resnet18()``: torchvision's ResNet-18, layer for layer
    (torchvision is not installed, and has no plugtorch build)."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            out = self.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, layers, num_classes=1000):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(64, layers[0])
            self.layer2 = self._make_layer(128, layers[1], stride=2)
            self.layer3 = self._make_layer(256, layers[2], stride=2)
            self.layer4 = self._make_layer(512, layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                           nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.conv1(x)
            x = self.bn1(x)
            x = self.relu(x)
            x = self.maxpool(x)
            x = self.layer1(x)
            x = self.layer2(x)
            x = self.layer3(x)
            x = self.layer4(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            x = self.fc(x)
            return x

    models = types.ModuleType("torchvision.models")
    models.resnet18 = lambda: ResNet([2, 2, 2, 2])
    return models


__all__ = ["run_demo", "code_as_torch", "assert_same_graph", "resnet18_models", "operator"]
