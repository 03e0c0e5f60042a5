"""A stand-in ``torchvision`` (not installed; no plugtorch build) for vendored pytorch/examples
scripts run in subprocesses, whose classes must pickle by name for ``spawn``ed workers: MNIST read
from $PLUGTORCH_DATA (never a download), cut to the first $TORCHVISION_STANDIN_MNIST="train,test"
images, with plugtorch.vision's datasets and transforms when ``torch`` is plugtorch."""
from __future__ import annotations

import os
import types

import numpy as np
import torch

import plugtorch
import plugtorch.vision

_ROOT = os.environ["PLUGTORCH_DATA"]
_N_TRAIN, _N_TEST = (int(n) for n in os.environ.get("TORCHVISION_STANDIN_MNIST", "60000,10000").split(","))


def _first(train: bool) -> int:
    return _N_TRAIN if train else _N_TEST


if torch is plugtorch:
    class MNIST(plugtorch.vision.datasets.MNIST):
        def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
            super().__init__(_ROOT, train=train, transform=transform, target_transform=target_transform)
            n = _first(train)
            self.data, self.targets = self.data[:n], self.targets[:n]
            self._pixels, self._labels = self._pixels[:n], self._labels[:n]

    transforms = plugtorch.vision.transforms
else:
    class MNIST(torch.utils.data.Dataset):  # type: ignore[no-redef]
        def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
            ds = plugtorch.vision.datasets.MNIST(_ROOT, train=train)
            n = _first(train)
            self._pixels, self._labels = ds.data.numpy()[:n].copy(), ds.targets.numpy()[:n].copy()
            self.data, self.targets = torch.from_numpy(self._pixels), torch.from_numpy(self._labels)
            self.transform, self.target_transform = transform, target_transform

        def __len__(self):
            return len(self._labels)

        def __getitem__(self, i):
            img, target = self._pixels[i], int(self._labels[i])
            if self.transform is not None:
                img = self.transform(img)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return img, target

    class Compose:
        def __init__(self, tfs):
            self.tfs = tfs

        def __call__(self, x):
            for tf in self.tfs:
                x = tf(x)
            return x

    class ToTensor:
        def __call__(self, img):
            return torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).unsqueeze(0)

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = mean, std

        def __call__(self, x):
            return (x - torch.tensor(self.mean).view(-1, 1, 1)) / torch.tensor(self.std).view(-1, 1, 1)

    transforms = types.SimpleNamespace(Compose=Compose, ToTensor=ToTensor, Normalize=Normalize)  # type: ignore[assignment]

datasets = types.SimpleNamespace(MNIST=MNIST)
