"""Sequential, ModuleList and ModuleDict."""
from __future__ import annotations

from collections import OrderedDict

import pytest

import plugtorch
from plugtorch import nn


def test_sequential_chains_and_indexes():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = plugtorch.randn(5, 3)
    manual = seq[2](seq[1](seq[0](x)))
    assert (seq(x) - manual).abs().amax().item() == 0
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    sub = seq[:2]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is seq[0]
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear"]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]


def test_sequential_with_ordered_dict_names():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert list(seq.state_dict()) == ["fc.weight", "fc.bias"]
    assert isinstance(seq.act, nn.Tanh)


def test_sequential_mutation():
    seq = nn.Sequential(nn.ReLU(), nn.Tanh())
    seq.append(nn.Sigmoid())
    seq.insert(0, nn.Identity())
    assert [type(m).__name__ for m in seq] == ["Identity", "ReLU", "Tanh", "Sigmoid"]
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    seq[0] = nn.ReLU()
    assert isinstance(seq[0], nn.ReLU)


def test_module_list_registers_parameters():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    s = Stack()
    assert len(list(s.parameters())) == 6
    assert list(s.state_dict())[:2] == ["layers.0.weight", "layers.0.bias"]
    s.layers.append(nn.Linear(2, 2))
    s.layers.extend([nn.Linear(2, 2)])
    assert len(s.layers) == 5 and len(list(s.parameters())) == 10
    popped = s.layers.pop(0)
    assert isinstance(popped, nn.Linear) and len(s.layers) == 4
    assert [n for n, _ in s.layers.named_children()] == ["0", "1", "2", "3"]
    assert s(plugtorch.randn(1, 2)).shape == (1, 2)


def test_module_dict():
    d = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    d["c"] = nn.Tanh()
    assert list(d.keys()) == ["a", "b", "c"] and "b" in d and len(d) == 3
    assert list(d.state_dict()) == ["a.weight", "a.bias"]
    assert isinstance(d.pop("b"), nn.ReLU) and list(d) == ["a", "c"]
    d.update([("e", nn.Identity())])
    assert list(d) == ["a", "c", "e"]


def test_repr_of_nested_containers():
    net = nn.Sequential(nn.ModuleList([nn.ReLU()]), nn.ModuleDict({"t": nn.Tanh()}))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): ModuleList(\n"
        "    (0): ReLU()\n"
        "  )\n"
        "  (1): ModuleDict(\n"
        "    (t): Tanh()\n"
        "  )\n"
        ")"
    )


def test_module_list_repr_compresses_repeats_like_torch(torch):
    ours = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.Sequential(nn.Tanh())])
    theirs = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)]
                                 + [torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Tanh())])
    assert repr(ours) == repr(theirs)
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList()) == "ModuleList()"
