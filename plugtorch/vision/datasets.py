"""``plugtorch.vision.datasets``: MNIST and Fashion-MNIST with torchvision's arguments and samples.

``MNIST(root, train=True, transform=None, target_transform=None, download=False)`` reads
``root/MNIST/raw/`` (where torchvision keeps them, so an existing torchvision download is
found) or ``root/mnist/`` (plugtorch's layout: ``MNIST("data")`` in a clone of plugtorch).
A sample is ``(image, target)``: a PIL image (mode ``L``) when Pillow is installed, as
torchvision gives, else a uint8 NumPy array ``[28, 28]``; ``transforms.ToTensor`` accepts
either. ``data`` and ``targets`` are the uint8 images ``[N, 28, 28]`` and int64 labels.

With ``transform=Compose([ToTensor(), Normalize(...)])`` (or a part of it) a DataLoader
batches a whole batch in one indexing op, giving the same values as image by image.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..core.tensor import Tensor
from ..datasets import mnist as _mnist
from ..utils.data.collate import default_collate
from ..utils.data.dataset import _index_ints, _index_tensor
from .transforms import _pil_image, batched

__all__ = ["MNIST", "FashionMNIST"]


class _TorchvisionStyle(_mnist.MNIST):
    """torchvision's sample type, folder names and repr over plugtorch's IDX-backed datasets."""

    root: str  # required here, and made a str path by __init__

    def __init__(self, root: str | os.PathLike[str], train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        if root is None:
            raise TypeError(f"{type(self).__name__}() missing required argument 'root'")
        if isinstance(root, (str, os.PathLike)):
            root = os.path.expanduser(os.fspath(root))
        super().__init__(root, train=train, transform=transform,
                         target_transform=target_transform, download=download)
        # host-memory views (no copies) for the image-by-image path
        self._pixels, self._labels = self.data.numpy(), self.targets.numpy()

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        pixels = self._pixels[int(index)]
        Image = _pil_image()
        img = Image.fromarray(pixels) if Image is not None else pixels.copy()
        target = int(self._labels[int(index)])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def get_batch(self, indices: list[int] | Tensor) -> list[Any]:
        run = batched(self.transform) if self.transform is not None else None
        if run is None or self.target_transform is not None:
            return default_collate([self[i] for i in _index_ints(indices)])
        idx = _index_tensor(indices, like=self.data)
        return [run(self.data.index_select(0, idx)), self.targets.index_select(0, idx)]

    def __repr__(self) -> str:
        # torchvision's layout, down to the StandardTransform block only its first line indented
        body = [f"Number of datapoints: {len(self)}", f"Root location: {self.root}",
                f"Split: {'Train' if self.train else 'Test'}"]
        if self.transform is not None or self.target_transform is not None:
            block = ["StandardTransform"]
            for head, tf in (("Transform: ", self.transform),
                             ("Target transform: ", self.target_transform)):
                if tf is not None:
                    lines = repr(tf).splitlines()
                    block += [head + lines[0]] + [" " * len(head) + line for line in lines[1:]]
            body.append("\n".join(block))
        return "\n".join([f"Dataset {type(self).__name__}"] + ["    " + line for line in body])


class MNIST(_TorchvisionStyle):
    """The MNIST digits, as ``torchvision.datasets.MNIST``."""

    folder = ["MNIST/raw", "mnist"]


class FashionMNIST(_TorchvisionStyle, _mnist.FashionMNIST):
    """Zalando's Fashion-MNIST, as ``torchvision.datasets.FashionMNIST``."""

    folder = ["FashionMNIST/raw", "fashion-mnist"]

