"""Runs a vendored pytorch/examples script (tests/examples/scripts/<name>/, commit 77f55b9) as
``__main__`` with its own command line, once with ``import torch`` resolving to plugtorch and once on
PyTorch, the test oracle; each test compares a figure the two runs print.

torchvision is not installed (and has no plugtorch build), so ``torchvision`` is a stand-in: MNIST
read from the data root the tests use (never a download) and cut to its first images so that an
epoch is a few batches; on plugtorch its datasets and transforms are ``plugtorch.vision``'s.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import os
import pathlib
import re
import runpy
import signal
import sys
import types

import numpy as np
from torchvision_resnet import resnet_models

import plugtorch
import plugtorch.vision

SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"


class _TorchAsPlugtorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import torch.X`` gives ``plugtorch.X`` itself (not a second copy loaded under torch's
    name, whose classes would differ from plugtorch's)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torch" or fullname.startswith("torch."):
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("plug" + spec.name)

    def exec_module(self, module):
        pass


def floats(pattern: str, text: str) -> list[float]:
    """Every number the regular expression's group captured in a script's output."""
    return [float(m) for m in re.findall(pattern, text)]


def run_script(script: str, argv: list[str], framework, cwd: pathlib.Path,
               modules: dict[str, types.ModuleType] | None = None, timeout: int = 120) -> str:
    """Run ``scripts/<script>`` as ``__main__`` with ``sys.argv[1:] = argv`` in ``cwd`` on
    ``framework`` (the plugtorch or torch module); returns what it printed. A script still
    running after ``timeout`` seconds raises TimeoutError (regression/main.py, for one, loops
    until its loss is small: a wrong gradient would otherwise hang the suite)."""
    path = SCRIPTS / script
    on_plugtorch = framework is plugtorch
    hidden = {n: m for n, m in sys.modules.items() if n == "torch" or n.startswith("torch.")} if on_plugtorch else {}
    for name in hidden:
        del sys.modules[name]
    added = dict(modules or {})
    saved = {name: sys.modules.get(name) for name in added}
    sys.modules.update(added)
    finder = _TorchAsPlugtorch()
    if on_plugtorch:
        sys.meta_path.insert(0, finder)
    argv_before, cwd_before = sys.argv, os.getcwd()
    sys.argv = [str(path), *argv]
    os.chdir(cwd)
    out = io.StringIO()

    def too_long(signum, frame):
        raise TimeoutError(f"{script} on {framework.__name__} ran for more than {timeout} s:\n{out.getvalue()}")
    alarm_before = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, alarm_before)
        os.chdir(cwd_before)
        sys.argv = argv_before
        if on_plugtorch:
            sys.meta_path.remove(finder)
            for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
                del sys.modules[name]
        sys.modules.update(hidden)
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return out.getvalue()


def _mnist_arrays(data_root: pathlib.Path, train: bool) -> tuple[np.ndarray, np.ndarray]:
    ds = plugtorch.vision.datasets.MNIST(str(data_root), train=train)
    return ds.data.numpy(), ds.targets.numpy()


def torchvision_standin(torch, data_root: pathlib.Path, n_train: int, n_test: int,
                        saved_images: list | None = None) -> dict[str, types.ModuleType]:
    """``torchvision``, ``torchvision.datasets``, ``.transforms`` and ``.utils`` for ``torch``
    (plugtorch or PyTorch). ``MNIST(root, ...)`` ignores ``root`` (the scripts say ``../data``)
    and holds the first ``n_train``/``n_test`` images; ``utils.save_image`` records the shape of
    each image batch in ``saved_images`` instead of writing a file."""
    from PIL import Image

    data_root = pathlib.Path(data_root).resolve()  # the scripts run in a folder of their own
    if torch is plugtorch:
        import plugtorch.vision as vision
        base = vision.datasets.MNIST

        class MNIST(base):  # type: ignore[misc,valid-type]
            def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
                super().__init__(str(data_root), train=train, transform=transform,
                                 target_transform=target_transform)
                n = n_train if train else n_test
                self.data, self.targets = self.data[:n], self.targets[:n]
                self._pixels, self._labels = self._pixels[:n], self._labels[:n]

        transforms = vision.transforms
    else:
        class MNIST(torch.utils.data.Dataset):  # type: ignore[no-redef]
            def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
                n = n_train if train else n_test
                pixels, labels = _mnist_arrays(data_root, train)
                self._pixels, self._labels = pixels[:n], labels[:n]
                self.data = torch.from_numpy(self._pixels.copy())
                self.targets = torch.from_numpy(self._labels.astype(np.int64))
                self.transform, self.target_transform = transform, target_transform

            def __len__(self):
                return len(self._labels)

            def __getitem__(self, i):
                img, target = Image.fromarray(self._pixels[i]), int(self._labels[i])
                if self.transform is not None:
                    img = self.transform(img)
                if self.target_transform is not None:
                    target = self.target_transform(target)
                return img, target

        transforms = types.ModuleType("torchvision.transforms")

        class Compose:
            def __init__(self, tfs):
                self.tfs = tfs

            def __call__(self, x):
                for tf in self.tfs:
                    x = tf(x)
                return x

        class ToTensor:
            def __call__(self, img):
                pixels = np.asarray(img, dtype=np.float32) / 255.0
                return torch.from_numpy(pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1).copy())

        class Normalize:
            def __init__(self, mean, std):
                self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

            def __call__(self, x):
                return (x - self.mean) / self.std

        class Lambda:
            def __init__(self, fn):
                self.fn = fn

            def __call__(self, x):
                return self.fn(x)

        transforms.Compose, transforms.ToTensor, transforms.Normalize = Compose, ToTensor, Normalize
        transforms.Lambda = Lambda

    class FakeData(torch.utils.data.Dataset):
        """torchvision's FakeData: random images (a PIL image each, as torchvision gives) and labels,
        the same for a given index on either library; ``size`` is at most ``n_train`` (imagenet's
        --dummy asks for 1281167 images) and defaults to it, not 1000."""

        def __init__(self, size=n_train, image_size=(3, 224, 224), num_classes=10, transform=None,
                     target_transform=None, random_offset=0):
            self.size, self.image_size, self.num_classes = min(size, n_train), image_size, num_classes
            self.transform, self.target_transform, self.random_offset = transform, target_transform, random_offset

        def __len__(self):
            return self.size

        def __getitem__(self, index):
            if not 0 <= index < self.size:
                raise IndexError(f"{type(self).__name__} index out of range")
            rng = np.random.default_rng(index + self.random_offset)
            c, h, w = self.image_size
            pixels = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
            img = Image.fromarray(pixels[:, :, 0] if c == 1 else pixels)
            target = int(rng.integers(0, self.num_classes))
            if self.transform is not None:
                img = self.transform(img)
            if self.target_transform is not None:
                target = self.target_transform(target)
            return img, target

    datasets = types.ModuleType("torchvision.datasets")
    datasets.MNIST = MNIST  # type: ignore[attr-defined]
    datasets.FakeData = FakeData  # type: ignore[attr-defined]
    utils = types.ModuleType("torchvision.utils")

    def save_image(tensor, fp, **kwargs):
        if saved_images is not None:
            saved_images.append((str(fp), tuple(tensor.shape), float(tensor.float().mean())))

    utils.save_image = save_image  # type: ignore[attr-defined]
    models = resnet_models(torch)
    top = types.ModuleType("torchvision")
    top.datasets, top.transforms, top.utils, top.models = datasets, transforms, utils, models  # type: ignore[attr-defined]
    return {"torchvision": top, "torchvision.datasets": datasets, "torchvision.transforms": transforms,
            "torchvision.utils": utils, "torchvision.models": models}


def same_start(monkeypatch, framework, optimizer: str, start: dict) -> None:
    """Make ``framework.optim.<optimizer>`` set the parameters it is given to ``start``'s arrays (by
    position), or record them there when ``start`` is empty: the two libraries draw different initial
    weights, and the optimizer is where an unmodified script hands over its model's parameters."""
    base = getattr(framework.optim, optimizer)
    recording = not start

    class SameStart(base):  # type: ignore[misc,valid-type]
        def __init__(self, params, *args, **kwargs):
            params = list(params)
            with framework.no_grad():
                for i, p in enumerate(params):
                    if recording:
                        start[i] = p.detach().numpy().copy()
                    else:
                        assert tuple(p.shape) == start[i].shape, (i, tuple(p.shape), start[i].shape)
                        p.copy_(framework.from_numpy(start[i]))
            super().__init__(params, *args, **kwargs)

    SameStart.__name__ = base.__name__
    monkeypatch.setattr(framework.optim, optimizer, SameStart)
