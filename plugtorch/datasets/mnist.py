"""MNIST and Fashion-MNIST: 28x28 greyscale images in ten classes, read from IDX files."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.dtypes import float32
from ..core.ops.creation import from_numpy
from ..core.tensor import Tensor
from ..utils.data.collate import default_collate
from ..utils.data.dataset import Dataset, _index_ints, _index_tensor
from .idx import IDXFormatError, parse_idx
from .store import Resource, load_files


class MNIST(Dataset):
    """The MNIST handwritten digits (60,000 train, 10,000 test).

    ``root`` is a data root holding ``mnist/`` (or torchvision's ``MNIST/raw/``; see
    :mod:`plugtorch.datasets.store` for the default). A sample is ``(image, label)``: a float32 ``[1, 28, 28]``
    tensor in [0, 1] (what torchvision's ``ToTensor()`` gives) and an int, each
    passed through ``transform`` / ``target_transform`` when given. ``data``
    holds all images as uint8 ``[N, 28, 28]`` and ``targets`` the int64 labels.
    """

    title = "MNIST"
    folder: list[str] = ["mnist", "MNIST/raw"]  # plugtorch's layout, then torchvision's
    mirrors: list[str] = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
               "http://yann.lecun.com/exdb/mnist/"]
    resources: list[Resource] = [
        Resource("train-images-idx3-ubyte", "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                 "6bbc9ace898e44ae57da46a324031adb"),
        Resource("train-labels-idx1-ubyte", "d53e105ee54ea40749a09fcbcd1e9432",
                 "a25bea736e30d166cdddb491f175f624"),
        Resource("t10k-images-idx3-ubyte", "9fb629c4189551a2d022fa330f9573f3",
                 "2646ac647ad5339dbf082846283269ea"),
        Resource("t10k-labels-idx1-ubyte", "ec29112dd5afa0611ce80d1b7f02629c",
                 "27ae3e4e09519cfbb04c329615203637"),
    ]
    classes: list[str] = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
               "7 - seven", "8 - eight", "9 - nine"]
    system_package: str | None = None
    mean, std = 0.1307, 0.3081  # of the training pixels scaled to [0, 1]

    def __init__(self, root: str | os.PathLike[str] | None = None, train: bool = True,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 download: bool = False) -> None:
        self.root = root
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        prefix = "train" if train else "t10k"
        wanted = [r for r in self.resources if r.name.startswith(prefix + "-")]
        others = [r for r in self.resources if r not in wanted]
        contents = load_files(self.title, self.folder, wanted, data_dir=root,
                              download_missing=download, mirrors=self.mirrors,
                              system_package=self.system_package, companions=others)
        images = parse_idx(contents[f"{prefix}-images-idx3-ubyte"], f"{prefix}-images-idx3-ubyte")
        labels = parse_idx(contents[f"{prefix}-labels-idx1-ubyte"], f"{prefix}-labels-idx1-ubyte")
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXFormatError(
                f"{self.title} {prefix} files do not pair up: images have shape {images.shape}, "
                f"labels {labels.shape} (expected [N, 28, 28] and [N])")
        self.data = from_numpy(np.ascontiguousarray(images))
        self.targets = from_numpy(labels.astype(np.int64))

    _get_batch_takes_tensors = True  # get_batch indexes with _index_tensor (see utils.data.dataset)

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image = (self.data[index].to(float32) / 255.0).unsqueeze(0)
        target = int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def get_batch(self, indices: list[int] | Tensor) -> list[Any]:
        """``[images [B, 1, 28, 28], labels [B]]`` in one gather (per sample only with transforms)."""
        if self.transform is not None or self.target_transform is not None:
            return default_collate([self[i] for i in _index_ints(indices)])
        idx = _index_tensor(indices, like=self.data)
        return [self.scaled(self.data.index_select(0, idx)), self.targets.index_select(0, idx)]

    @staticmethod
    def scaled(images: Tensor) -> Tensor:
        """uint8 images [B, H, W] as float32 [B, 1, H, W] in [0, 1], as ``get_batch`` gives them."""
        return (images.to(float32) / 255.0).unsqueeze(1)

    def __repr__(self) -> str:
        return (f"Dataset {type(self).__name__}\n    Number of datapoints: {len(self)}\n"
                f"    Root location: {self.root}\n    Split: {'Train' if self.train else 'Test'}")


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: the MNIST layout with ten kinds of clothing (folder ``fashion-mnist/``)."""

    title = "Fashion-MNIST"
    folder = ["fashion-mnist", "FashionMNIST/raw"]
    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
               "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"]
    resources = [
        Resource("train-images-idx3-ubyte", "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                 "f4a8712d7a061bf5bd6d2ca38dc4d50a"),
        Resource("train-labels-idx1-ubyte", "25c81989df183df01b3e8a0aad5dffbe",
                 "9018921c3c673c538a1fc5bad174d6f9"),
        Resource("t10k-images-idx3-ubyte", "bef4ecab320f06d8554ea6380940ec79",
                 "8181f5470baa50b63fa0f6fddb340f0a"),
        Resource("t10k-labels-idx1-ubyte", "bb300cfdad3c16e7a12a480ee83cd310",
                 "15d484375f8d13e6eb1aabb0c3f46965"),
    ]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
    system_package = "dataset-fashion-mnist"
    mean, std = 0.2860, 0.3530
