"""Module: registration by assignment, traversal, modes, conversion, hooks and repr."""
from __future__ import annotations

import pytest

import plugtorch
from plugtorch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(plugtorch.ones(4))
        self.register_buffer("steps", plugtorch.zeros((), dtype=plugtorch.int64))
        self.register_buffer("cache", plugtorch.zeros(4), persistent=False)
        self.plain = plugtorch.zeros(2)  # a plain tensor attribute is neither

    def forward(self, x):
        return self.fc(x) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x))


def test_assignment_registers_parameters_buffers_and_modules():
    net = Net()
    # a module's own parameters come before its children's, as in torch
    assert [n for n, _ in net.named_parameters()] == [
        "block.scale", "block.fc.weight", "block.fc.bias", "head.weight", "head.bias"
    ]
    assert [n for n, _ in net.named_buffers()] == ["block.steps", "block.cache"]
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "head"]
    assert isinstance(net.block.scale, nn.Parameter) and net.block.scale.requires_grad
    assert "plain" not in dict(net.block.named_buffers())
    assert len(list(net.parameters(recurse=False))) == 0
    assert list(net.children()) == [net.block, net.head]


def test_shared_parameters_are_yielded_once():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    net[1].weight = net[0].weight
    assert len(list(net.parameters())) == 3
    assert len(list(net.named_parameters(remove_duplicate=False))) == 4


def test_reassigning_a_parameter_name_to_a_plain_tensor_is_refused():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'weight'"):
        lin.weight = plugtorch.zeros(2, 2)
    lin.bias = None
    assert lin.bias is None and "bias" not in dict(lin.named_parameters())


def test_register_validations():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.register_parameter("w", plugtorch.zeros(2))
    with pytest.raises(TypeError, match="buffer 'b'"):
        m.register_buffer("b", [1, 2])
    m.register_module("sub", nn.ReLU())
    m.add_module("sub2", nn.Tanh())
    assert isinstance(m.sub, nn.ReLU) and isinstance(m.sub2, nn.Tanh)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope


def test_assignment_before_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(plugtorch.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_forgotten_super_init_is_named():
    class NoInit(nn.Module):
        def __init__(self):
            self.k = 3

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first"):
        NoInit()(plugtorch.zeros(1))


def test_non_leaf_parameter_is_refused():
    m = nn.Module()
    w = nn.Parameter(plugtorch.ones(2))
    p = nn.Parameter(plugtorch.ones(2))
    p.grad_fn = (w * 2).grad_fn  # a Parameter that is the output of an op
    with pytest.raises(ValueError, match="non-leaf Tensor to parameter 'w'.*express 'w'"):
        m.register_parameter("w", p)


def test_buffer_marker_and_delattr():
    m = nn.Module()
    m.running = nn.Buffer(plugtorch.ones(3), persistent=False)
    assert "running" in dict(m.named_buffers()) and "running" not in m.state_dict()
    assert type(m.running) is plugtorch.Tensor
    del m.running
    assert "running" not in dict(m.named_buffers())


def test_train_eval_propagates():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(), nn.ReLU()))
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("no")


def test_zero_grad_sets_to_none_or_zeros():
    lin = nn.Linear(3, 2)
    lin(plugtorch.randn(4, 3)).sum().backward()
    assert lin.weight.grad is not None
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad.abs().sum().item() == 0.0
    lin.zero_grad()
    assert lin.weight.grad is None and lin.bias.grad is None


def test_requires_grad_toggles_all_parameters():
    net = Net()
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


def test_to_dtype_keeps_parameter_identity_and_integer_buffers():
    net = Net()
    weight = net.head.weight
    assert net.to(plugtorch.float64) is net
    assert net.head.weight is weight and weight.dtype is plugtorch.float64
    assert isinstance(net.head.weight, nn.Parameter) and net.head.weight.requires_grad
    assert net.block.steps.dtype is plugtorch.int64
    assert net.block.cache.dtype is plugtorch.float64
    out = net(plugtorch.randn(2, 3, dtype=plugtorch.float64))
    assert out.dtype is plugtorch.float64
    net.float()
    assert net.head.weight.dtype is plugtorch.float32
    net.to("cpu")
    with pytest.raises(TypeError, match="floating point dtypes"):
        net.to(plugtorch.int64)


def test_apply_visits_children_first():
    seen = []
    net = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Sequential"]


def test_apply_can_reinitialise():
    net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))

    def init_zero(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
    net.apply(init_zero)
    assert all(m.weight.abs().sum().item() == 0 for m in net if isinstance(m, nn.Linear))


def test_forward_pre_and_post_hooks():
    lin = nn.Linear(2, 2)
    calls = []

    def pre(module, args):
        calls.append("pre")
        return (args[0] * 0,)

    def post(module, args, output):
        calls.append("post")
        return output + 1

    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_hook(post)
    out = lin(plugtorch.randn(3, 2))
    expected = lin.bias.detach() + 1
    assert calls == ["pre", "post"]
    assert (out - expected).abs().amax().item() < 1e-6
    h1.remove()
    h2.remove()
    x = plugtorch.randn(3, 2)
    assert (lin(x) - (x @ lin.weight.t() + lin.bias)).abs().amax().item() < 1e-6
    assert calls == ["pre", "post"]


def test_hook_ordering_prepend_and_kwargs():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("a"))
    m.register_forward_hook(lambda mod, a, o: order.append("b"), prepend=True)

    def kw_hook(mod, args, kwargs):
        order.append("kw")
        return args, kwargs
    m.register_forward_pre_hook(kw_hook, with_kwargs=True)
    m(plugtorch.zeros(1))
    assert order == ["kw", "b", "a"]


def test_always_call_hook_runs_when_forward_raises():
    seen = []
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, a, o: seen.append(("always", o)), always_call=True)
    lin.register_forward_hook(lambda m, a, o: seen.append(("normal", o)))
    with pytest.raises(RuntimeError, match="in_features=2"):
        lin(plugtorch.zeros(1, 3))
    assert seen == [("always", None)]


def test_forward_hook_sees_input_and_output_of_each_layer():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    shapes = []
    for layer in net:
        layer.register_forward_hook(lambda m, a, o: shapes.append((tuple(a[0].shape), tuple(o.shape))))
    net(plugtorch.randn(5, 4))
    assert shapes == [((5, 4), (5, 3)), ((5, 3), (5, 3))]


def test_missing_forward_is_a_clear_error():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


def test_repr_is_torch_like():
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(16, 2, bias=False))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): ReLU()\n"
        "  (2): Flatten(start_dim=1, end_dim=-1)\n"
        "  (3): Linear(in_features=16, out_features=2, bias=False)\n"
        ")"
    )


def test_repr_matches_torch(torch):
    pairs = [
        (nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)),
        (nn.LayerNorm(4), torch.nn.LayerNorm(4)),
        (nn.Dropout(0.25), torch.nn.Dropout(0.25)),
        (nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
        (nn.Embedding(5, 2, padding_idx=0), torch.nn.Embedding(5, 2, padding_idx=0)),
        (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
        (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
        (nn.Conv2d(2, 4, 3, stride=2, dilation=2, groups=2, bias=False),
         torch.nn.Conv2d(2, 4, 3, stride=2, dilation=2, groups=2, bias=False)),
        (nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1)),
        (nn.Unflatten(1, (2, 3)), torch.nn.Unflatten(1, (2, 3))),
        (nn.GELU(), torch.nn.GELU()),
        (nn.Conv2d(1, 2, 3, padding="same"), torch.nn.Conv2d(1, 2, 3, padding="same")),
        (nn.AvgPool2d(3, 2, 1, ceil_mode=True), torch.nn.AvgPool2d(3, 2, 1, ceil_mode=True)),
        (nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1)),
        (nn.BatchNorm1d(4, affine=False, momentum=None),
         torch.nn.BatchNorm1d(4, affine=False, momentum=None)),
        (nn.LayerNorm((2, 3), bias=False), torch.nn.LayerNorm((2, 3), bias=False)),
        (nn.ELU(0.5, inplace=True), torch.nn.ELU(0.5, inplace=True)),
        (nn.Softplus(2.0), torch.nn.Softplus(2.0)),
        (nn.ReLU(inplace=True), torch.nn.ReLU(inplace=True)),
        (nn.Identity(), torch.nn.Identity()),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)


def test_extra_repr_of_custom_module():
    class Scale(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def extra_repr(self):
            return f"k={self.k}"
    assert repr(nn.Sequential(Scale(3))) == "Sequential(\n  (0): Scale(k=3)\n)"


def test_parameter_is_a_tensor_sharing_memory():
    t = plugtorch.zeros(3)
    p = nn.Parameter(t)
    assert isinstance(p, plugtorch.Tensor) and p.requires_grad and p.is_leaf
    with plugtorch.no_grad():
        p.add_(1.0)
    assert t.tolist() == [1.0, 1.0, 1.0]
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(plugtorch.zeros(1), requires_grad=False).requires_grad
    with pytest.raises(TypeError, match="must be a Tensor"):
        nn.Parameter([1.0])


def test_get_submodule_and_parameter():
    net = Net()
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.get_parameter("head.bias") is net.head.bias
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        net.get_submodule("block.nope")


def test_deepcopy_gives_independent_parameters():
    import copy
    lin = nn.Linear(2, 2)
    twin = copy.deepcopy(nn.Sequential(lin))[0]
    assert twin.weight is not lin.weight
    assert twin.weight.tolist() == lin.weight.tolist()
    with plugtorch.no_grad():
        twin.weight.add_(1.0)
    assert twin.weight.tolist() != lin.weight.tolist()


def test_deepcopy_of_a_model_with_buffers():
    # Needed Tensor.__deepcopy__ in core: plain tensors used to fail with
    # "cannot pickle 'module' object" (the backend object).
    import copy
    bn = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    bn(plugtorch.randn(4, 2))
    twin = copy.deepcopy(bn)
    for (name, a), (_, b) in zip(bn.state_dict().items(), twin.state_dict().items()):
        assert a.tolist() == b.tolist() and a.dtype is b.dtype, name
    twin[1].running_mean.add_(1.0)
    assert twin[1].running_mean.tolist() != bn[1].running_mean.tolist()
    assert twin[1].num_batches_tracked.item() == 1
    x = plugtorch.randn(3, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(x * 2)
