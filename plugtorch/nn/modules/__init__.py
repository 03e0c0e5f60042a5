"""The layer classes of ``plugtorch.nn``, one concept per module file."""
from .activation import (ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus,
                         Tanh)
from .batchnorm import BatchNorm1d, BatchNorm2d
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout, Dropout1d, Dropout2d
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import GroupNorm, LayerNorm
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .sparse import Embedding

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "ELU",
    "Embedding",
    "Flatten",
    "GELU",
    "GroupNorm",
    "Identity",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
    "Unflatten",
]
