"""plugtorch.vision.transforms: torchvision's transforms on PIL images, NumPy arrays and tensors."""
from __future__ import annotations

import numpy as np
import pytest

import plugtorch
from plugtorch.vision import transforms as T

Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install pillow)")

RNG = np.random.default_rng(0)
GREY = RNG.integers(0, 256, (5, 7), dtype=np.uint8)
RGB = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def _as(kind, arr):
    """The same image as each kind a transform accepts."""
    if kind == "pil":
        return Image.fromarray(arr)
    if kind == "numpy":
        return arr.copy()
    return plugtorch.tensor(np.moveaxis(arr, -1, 0) if arr.ndim == 3 else arr[None])


def _pixels(img):
    """Back to [H, W(, C)] uint8 for comparison."""
    if isinstance(img, plugtorch.Tensor):
        a = img.numpy()
        return a[0] if a.shape[0] == 1 else np.moveaxis(a, 0, -1)
    return np.asarray(img)


def test_to_tensor_scales_uint8_and_moves_channels_first():
    for img in (GREY, RGB, Image.fromarray(GREY), Image.fromarray(RGB)):
        t = T.ToTensor()(img)
        arr = np.asarray(img)
        expected = (arr[None] if arr.ndim == 2 else np.moveaxis(arr, -1, 0)).astype(np.float32) / 255
        assert t.dtype is plugtorch.float32 and t.backend == "numpy"
        np.testing.assert_array_equal(t.numpy(), expected)
    floats = RNG.standard_normal((4, 4, 2))
    np.testing.assert_array_equal(T.ToTensor()(floats).numpy(), np.moveaxis(floats, -1, 0))  # not scaled
    with pytest.raises(TypeError, match="pic should be PIL Image or ndarray"):
        T.ToTensor()(plugtorch.ones(1, 2, 2))


def test_normalize_per_channel_and_its_errors():
    x = plugtorch.tensor(RNG.random((3, 4, 4), dtype=np.float32))
    out = T.Normalize((0.1, 0.2, 0.3), (0.5, 0.25, 2.0))(x)
    mean, std = np.array([0.1, 0.2, 0.3], np.float32), np.array([0.5, 0.25, 2.0], np.float32)
    np.testing.assert_allclose(out.numpy(), (x.numpy() - mean[:, None, None]) / std[:, None, None], rtol=1e-6)
    batch = plugtorch.stack([x, x])
    np.testing.assert_array_equal(T.Normalize((0.1, 0.2, 0.3), (0.5, 0.25, 2.0))(batch)[1].numpy(), out.numpy())
    y = x.clone()
    assert T.Normalize((0.5,), (0.5,), inplace=True)(y) is y
    with pytest.raises(TypeError, match="Input tensor should be a float tensor"):
        T.Normalize((0.5,), (0.5,))(plugtorch.zeros(1, 2, 2, dtype=plugtorch.uint8))
    with pytest.raises(ValueError, match="std evaluated to zero"):
        T.Normalize((0.5,), (0.0,))(x)
    with pytest.raises(ValueError, match=r"Expected tensor to be a tensor image of size \(\.\.\., C, H, W\)"):
        T.Normalize((0.5,), (0.5,))(plugtorch.zeros(2, 2))
    with pytest.raises(TypeError, match="img should be Tensor Image"):
        T.Normalize((0.5,), (0.5,))(GREY)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("arr", [GREY, RGB], ids=["grey", "rgb"])
def test_random_crop_with_padding_agrees_across_kinds(mode, arr):
    """Same seed, same crop, for a PIL image, an array and a tensor; padding as numpy.pad's."""
    crops = {}
    for kind in ("pil", "numpy", "tensor"):
        plugtorch.manual_seed(3)
        crops[kind] = _pixels(T.RandomCrop((4, 6), padding=(2, 1), padding_mode=mode, fill=9)(_as(kind, arr)))
    np.testing.assert_array_equal(crops["pil"], crops["numpy"])
    np.testing.assert_array_equal(crops["tensor"], crops["numpy"])
    widths = [(1, 1), (2, 2)] + [(0, 0)] * (arr.ndim - 2)
    padded = (np.pad(arr, widths, mode="constant", constant_values=9) if mode == "constant"
              else np.pad(arr, widths, mode=mode))
    plugtorch.manual_seed(3)
    top, left, h, w = T.RandomCrop.get_params(padded, (4, 6))
    np.testing.assert_array_equal(crops["numpy"], padded[top:top + h, left:left + w])


def test_random_crop_draws_every_position_and_follows_the_seed():
    seen = set()
    plugtorch.manual_seed(0)
    for _ in range(200):
        seen.add(T.RandomCrop.get_params(GREY, (3, 3))[:2])
    assert seen == {(i, j) for i in range(3) for j in range(5)}
    plugtorch.manual_seed(7)
    a = [T.RandomCrop(3)(GREY) for _ in range(5)]
    plugtorch.manual_seed(7)
    b = [T.RandomCrop(3)(GREY) for _ in range(5)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_random_crop_pads_if_needed_and_refuses_too_small():
    out = T.RandomCrop((8, 9), pad_if_needed=True)(GREY)
    assert out.shape == (8, 9)
    with pytest.raises(ValueError, match=r"Required crop size \(8, 9\) is larger than input image size \(5, 7\)"):
        T.RandomCrop((8, 9))(GREY)


def test_random_horizontal_flip():
    for kind in ("pil", "numpy", "tensor"):
        img = _as(kind, RGB)
        np.testing.assert_array_equal(_pixels(T.RandomHorizontalFlip(p=1.0)(img)), RGB[:, ::-1])
        np.testing.assert_array_equal(_pixels(T.RandomHorizontalFlip(p=0.0)(img)), RGB)
    plugtorch.manual_seed(0)
    flips = sum(T.RandomHorizontalFlip()(GREY)[0, 0] != GREY[0, 0] for _ in range(400))
    assert 140 < flips < 260  # about half


def test_compose_lambda_and_reprs():
    tf = T.Compose([T.Lambda(lambda a: a[1:]), T.ToTensor(), T.Normalize((0.5,), (0.5,))])
    assert tf(GREY).shape == (1, 4, 7)
    assert repr(tf) == "Compose(\n    Lambda()\n    ToTensor()\n    Normalize(mean=(0.5,), std=(0.5,))\n)"
    with pytest.raises(TypeError, match="Argument lambd should be callable"):
        T.Lambda(3)


def test_batched_pipeline_equals_image_by_image():
    tf = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    pixels = RNG.integers(0, 256, (6, 28, 28), dtype=np.uint8)
    batched = T.batched(tf)(plugtorch.tensor(pixels))
    one_by_one = plugtorch.stack([tf(p) for p in pixels])
    np.testing.assert_array_equal(batched.numpy(), one_by_one.numpy())  # bit for bit
    assert T.batched(T.Compose([T.RandomCrop(28, padding=2), T.ToTensor()])) is None
    assert T.batched(T.Compose([T.ToTensor(), T.Lambda(lambda x: x)])) is None
