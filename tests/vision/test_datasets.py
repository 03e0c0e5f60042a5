"""plugtorch.vision.datasets: torchvision's MNIST / FashionMNIST arguments, samples and layout."""
from __future__ import annotations

import gzip
import pathlib

import numpy as np
import pytest

import plugtorch
from plugtorch.datasets import DatasetNotFoundError
from plugtorch.utils.data import DataLoader
from plugtorch.vision import datasets
from plugtorch.vision import transforms as T

NORMALIZE = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])


def test_samples_are_pil_images_and_ints_as_torchvision_gives(data_root):
    pytest.importorskip("PIL", reason="Pillow is not installed")
    from PIL import Image
    ds = datasets.MNIST(data_root, train=False)
    img, target = ds[0]
    assert isinstance(img, Image.Image) and img.mode == "L" and img.size == (28, 28)
    assert target == 7 and isinstance(target, int)
    np.testing.assert_array_equal(np.asarray(img), ds.data[0].numpy())
    assert len(ds) == 10000 and ds.data.dtype is plugtorch.uint8 and ds.targets.dtype is plugtorch.int64
    assert ds.class_to_idx["7 - seven"] == 7


def test_without_pillow_samples_are_uint8_arrays(data_root, monkeypatch):
    from plugtorch.vision import transforms
    monkeypatch.setattr(transforms, "_pil_image", lambda: None)
    monkeypatch.setattr(datasets, "_pil_image", lambda: None)
    ds = datasets.MNIST(data_root, train=False, transform=NORMALIZE)
    raw = datasets.MNIST(data_root, train=False)
    img, _ = raw[3]
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (28, 28)
    img[:] = 0  # a copy: the dataset is untouched
    assert raw.data[3].sum().item() > 0
    expected = (raw.data[3].numpy().astype(np.float32) / 255 - np.float32(0.1307)) / np.float32(0.3081)
    np.testing.assert_allclose(ds[3][0].numpy()[0], expected, rtol=1e-6)


def test_torchvision_layout_is_found(data_root, tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):  # torchvision extracts them
        raw.joinpath(name).write_bytes(gzip.decompress((data_root / "mnist" / f"{name}.gz").read_bytes()))
    ds = datasets.MNIST(tmp_path, train=False)
    assert len(ds) == 10000 and ds.raw_folder == str(raw)


def test_missing_files_are_listed_all_at_once(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        datasets.MNIST(tmp_path, train=True)
    msg = str(info.value)
    for name in ("train-images", "train-labels", "t10k-images", "t10k-labels"):
        assert f"{name}-idx" in msg, name
    assert str(tmp_path / "MNIST" / "raw") in msg
    assert isinstance(info.value, RuntimeError)  # what torchvision raises, so ported handlers work
    with pytest.raises(TypeError, match="missing required argument 'root'"):
        datasets.MNIST(None)


def test_a_dataloader_batches_the_pipeline_in_one_gather(data_root):
    ds = datasets.MNIST(data_root, train=False, transform=NORMALIZE)
    images, labels = next(iter(DataLoader(ds, batch_size=16)))
    assert images.shape == (16, 1, 28, 28) and labels.dtype is plugtorch.int64
    one_by_one = plugtorch.stack([ds[i][0] for i in range(16)])
    np.testing.assert_array_equal(images.numpy(), one_by_one.numpy())
    assert labels.tolist() == [ds[i][1] for i in range(16)]


def test_repr_is_torchvisions(data_root):
    ds = datasets.MNIST(data_root, train=False, transform=NORMALIZE)
    assert repr(ds) == (
        "Dataset MNIST\n    Number of datapoints: 10000\n"
        f"    Root location: {data_root}\n    Split: Test\n    StandardTransform\n"
        "Transform: Compose(\n               ToTensor()\n"
        "               Normalize(mean=(0.1307,), std=(0.3081,))\n           )")


def test_random_augmentation_in_workers_is_seeded(data_root):
    tf = T.Compose([T.RandomCrop(28, padding=2), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = plugtorch.utils.data.Subset(datasets.MNIST(data_root, train=False, transform=tf), range(64))

    def run():
        plugtorch.manual_seed(5)
        loader = DataLoader(ds, batch_size=16, num_workers=2, shuffle=True)
        return [(x.numpy(), y.numpy()) for x, y in loader]

    a, b = run(), run()
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    plain = np.stack([np.asarray(ds.dataset.data[i].numpy(), np.float32) / 255 for i in range(64)])
    assert not all(np.array_equal(x, plain[:16]) for x, _ in a)  # something was augmented


def test_fashion_mnist_from_debian():
    if not pathlib.Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    ds = datasets.FashionMNIST("/nonexistent-root", train=False, transform=T.ToTensor())
    img, target = ds[0]
    assert len(ds) == 10000 and img.shape == (1, 28, 28) and ds.classes[target] == "Ankle boot"
