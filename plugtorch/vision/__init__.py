"""``plugtorch.vision``: torchvision's datasets and transforms for plugtorch tensors.

A torchvision data pipeline ports by changing its imports::

    from plugtorch.vision import datasets, transforms
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train = datasets.MNIST("data", train=True, download=True, transform=tf)
"""
from . import datasets, transforms

__all__ = ["datasets", "transforms"]
