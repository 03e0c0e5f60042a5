"""Public names, argument names and defaults follow PyTorch's (torch code ports unchanged)."""
from __future__ import annotations

import inspect
import math

import pytest

import plugtorch.nn.functional as F
from plugtorch import nn

FUNCTIONAL = ["linear", "relu", "leaky_relu", "gelu", "silu", "elu", "softplus", "sigmoid", "tanh",
              "softmax", "log_softmax", "dropout", "dropout2d", "conv2d", "max_pool2d",
              "avg_pool2d", "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "embedding",
              "mse_loss", "l1_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
              "binary_cross_entropy_with_logits", "one_hot", "pad"]
MODULES = ["Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten",
           "Unflatten", "Dropout", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding",
           "Identity", "ReLU", "LeakyReLU", "GELU", "SiLU", "ELU", "Softplus", "Sigmoid", "Tanh",
           "Softmax", "LogSoftmax", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
           "BCEWithLogitsLoss", "Sequential", "ModuleList", "ModuleDict"]
INIT = ["uniform_", "normal_", "constant_", "ones_", "zeros_", "xavier_uniform_",
        "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "calculate_gain"]
# Extensions beyond torch's signatures, each deliberate:
EXTRA = {"generator"}  # explicit RNGs for reproducible init and dropout


def params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = doc_signature(fn)
        if sig is None:
            return None
    return {k: v for k, v in sig.parameters.items() if k not in ("self", "args", "kwargs")}


def doc_signature(fn):
    """A C builtin's signature from the first line of its docstring: ``name(a, b=1) -> Tensor``."""
    line = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
    head = line.split(" -> ")[0]
    if "(" not in head:
        return None
    namespace = {}
    try:
        exec(f"def _f{head[head.index('('):]}: pass", {"inf": float("inf")}, namespace)
    except (SyntaxError, NameError):
        return None
    return inspect.signature(namespace["_f"])


def same_default(a, b):
    if a is inspect.Parameter.empty or b is inspect.Parameter.empty:
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b or (type(a).__name__ == type(b).__name__ == "dtype")


def check(ours, theirs, what):
    p_ours, p_theirs = params(ours), params(theirs)
    assert p_theirs is not None, f"{what}: torch's signature could not be read"
    missing = [k for k in p_theirs if k not in p_ours]
    assert not missing, f"{what}: torch arguments missing here: {missing}"
    extra = [k for k in p_ours if k not in p_theirs and k not in EXTRA and not k.startswith("_")]
    assert not extra, f"{what}: arguments torch does not have: {extra}"
    shared = [k for k in p_ours if k in p_theirs]
    assert [k for k in p_theirs if k in shared] == shared, f"{what}: argument order differs"
    for k in shared:
        assert same_default(p_ours[k].default, p_theirs[k].default), (
            f"{what}: default of {k!r} is {p_ours[k].default!r}, torch's is {p_theirs[k].default!r}")


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_signatures(torch, name):
    theirs = getattr(torch.nn.functional, name)
    if name == "max_pool2d":  # torch's public one is a (*args, **kwargs) dispatcher
        theirs = torch.nn.functional._max_pool2d
    check(getattr(F, name), theirs, f"F.{name}")


@pytest.mark.parametrize("name", MODULES)
def test_module_constructor_signatures(torch, name):
    check(getattr(nn, name).__init__, getattr(torch.nn, name).__init__, f"nn.{name}")


@pytest.mark.parametrize("name", INIT)
def test_init_signatures(torch, name):
    check(getattr(nn.init, name), getattr(torch.nn.init, name), f"nn.init.{name}")


@pytest.mark.parametrize("name", ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
                                  "vector_to_parameters"])
def test_utils_signatures(torch, name):
    check(getattr(nn.utils, name), getattr(torch.nn.utils, name), f"nn.utils.{name}")


@pytest.mark.parametrize("name", ["state_dict", "load_state_dict", "named_parameters",
                                  "named_buffers", "named_modules", "zero_grad", "train",
                                  "register_buffer", "register_forward_hook",
                                  "register_forward_pre_hook", "requires_grad_"])
def test_module_method_signatures(torch, name):
    check(getattr(nn.Module, name), getattr(torch.nn.Module, name), f"Module.{name}")
