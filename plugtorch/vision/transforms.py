"""``plugtorch.vision.transforms``: torchvision's image transforms, so a data pipeline ports by
changing its imports.

An image is a PIL image (when Pillow is installed), a NumPy array ``[H, W]`` or
``[H, W, C]``, or a tensor ``[..., C, H, W]``; each transform returns the kind it was
given, as torchvision's do (``ToTensor`` turns the first two into a float tensor). Random
transforms draw from plugtorch's default generator on the host, so ``plugtorch.manual_seed``
makes them reproducible, and each ``DataLoader`` worker draws its own stream.
"""
from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, SupportsInt, cast

import numpy as np

from ..core.dtypes import get_default_dtype, uint8
from ..core.ops.creation import rand, randint, tensor
from ..core.tensor import Tensor
from ..utils.data.sampler import host_device

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip", "Lambda"]


def _pil_image():
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def _is_pil(img) -> bool:
    Image = _pil_image()
    return Image is not None and isinstance(img, Image.Image)


def _check_kind(img, who: str) -> None:
    if not (isinstance(img, (Tensor, np.ndarray)) or _is_pil(img)):
        raise TypeError(f"{who}: img should be a PIL Image, a NumPy array or a Tensor. Got {type(img)}")


def _size(img) -> tuple[int, int]:
    """(height, width) of any image kind."""
    if _is_pil(img):
        w, h = img.size
        return h, w
    if isinstance(img, np.ndarray):
        return img.shape[0], img.shape[1]
    return img.shape[-2], img.shape[-1]


class Compose:
    """Apply ``transforms`` one after the other."""

    def __init__(self, transforms: Iterable[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class ToTensor:
    """A PIL image or NumPy array ``[H, W(, C)]`` as a tensor ``[C, H, W]`` on the host; uint8
    values are scaled to floats in [0, 1], other dtypes are kept as they are (as torchvision's)."""

    def __call__(self, pic: Any) -> Tensor:
        if _is_pil(pic):
            arr = np.asarray(pic)
            if arr.dtype == np.bool_:  # mode "1"
                arr = arr.astype(np.uint8) * 255
        elif isinstance(pic, np.ndarray):
            if pic.ndim not in (2, 3):
                raise ValueError(f"pic should be 2/3 dimensional. Got {pic.ndim} dimensions.")
            arr = pic
        else:
            raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
        if arr.ndim == 2:
            arr = arr[:, :, None]
        img = tensor(np.ascontiguousarray(arr.transpose(2, 0, 1)), device=host_device())
        return img.to(get_default_dtype()).div(255) if img.dtype is uint8 else img

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Normalize:
    """``(img - mean) / std`` per channel of a float tensor ``[..., C, H, W]``."""

    def __init__(self, mean: float | Sequence[float], std: float | Sequence[float],
                 inplace: bool = False) -> None:
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, img: Tensor) -> Tensor:
        if not isinstance(img, Tensor):
            raise TypeError(f"img should be Tensor Image. Got {type(img)}")
        if not img.is_floating_point():
            raise TypeError(f"Input tensor should be a float tensor. Got {img.dtype}.")
        if img.ndim < 3:
            raise ValueError("Expected tensor to be a tensor image of size (..., C, H, W). Got "
                             f"tensor.size() = {img.size()}.")
        # checked on the host from the given numbers: no device sync
        if (np.asarray(self.std, dtype=img.dtype.name) == 0).any():
            raise ValueError(f"std evaluated to zero after conversion to {img.dtype}, leading to "
                             "division by zero.")
        mean = tensor(self.mean, dtype=img.dtype, device=img.device)
        std = tensor(self.std, dtype=img.dtype, device=img.device)
        if mean.ndim == 1:
            mean = mean.view(-1, 1, 1)
        if std.ndim == 1:
            std = std.view(-1, 1, 1)
        if self.inplace:
            return img.sub_(mean).div_(std)
        return (img - mean) / std

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mean={self.mean}, std={self.std})"


def _pair(size, name: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        # any real number, a NumPy scalar too (int() refuses a complex one); typeshed's Number
        # declares no conversion to int
        n = int(cast(SupportsInt, size))
        return n, n
    size = tuple(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    if len(size) != 2:
        raise ValueError(f"Please provide only two dimensions (h, w) for {name}.")
    return int(size[0]), int(size[1])


def _padding(padding) -> tuple[int, int, int, int]:
    """torchvision's padding argument as (left, top, right, bottom)."""
    if isinstance(padding, numbers.Number):
        p = int(cast(SupportsInt, padding))  # as in _pair
        return p, p, p, p
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return padding[0], padding[0], padding[0], padding[0]
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding[0], padding[1], padding[2], padding[3]
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not a {len(padding)} "
                     "element tuple")


_NUMPY_MODES: dict[str, Literal["edge", "reflect", "symmetric"]] = {
    "edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}


def pad(img: Any, padding: int | Sequence[int], fill: float | Sequence[float] = 0,
        padding_mode: str = "constant") -> Any:
    """Pad an image on its four sides (``padding`` as torchvision's: int, (lr, tb) or (l, t, r, b))."""
    if padding_mode not in ("constant", *_NUMPY_MODES):
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    left, top, right, bottom = _padding(padding)
    if isinstance(img, Tensor):
        if padding_mode == "constant":
            from ..nn.functional import pad as _pad
            # a tensor image takes a number (as torchvision's); anything else goes on to F.pad as given
            return _pad(img, (left, right, top, bottom), value=fill)  # type: ignore[arg-type]
        for dim, lo, hi in ((-1, left, right), (-2, top, bottom)):
            # np.pad applied to the positions 0..n-1 gives the gather index of that mode
            index = np.pad(np.arange(img.shape[dim]), (lo, hi), mode=_NUMPY_MODES[padding_mode])
            img = img.index_select(dim, tensor(index, device=img.device))
        return img
    pil = _is_pil(img)
    arr = np.asarray(img)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (arr.ndim - 2)
    if padding_mode != "constant":
        out = np.pad(arr, widths, mode=_NUMPY_MODES[padding_mode])
    else:  # a per-channel fill tuple broadcasts over the last axis
        h, w = arr.shape[:2]
        out = np.empty((h + top + bottom, w + left + right) + arr.shape[2:], dtype=arr.dtype)
        out[...] = fill
        out[top:top + h, left:left + w] = arr
    return _pil_image().fromarray(out) if pil else out


def crop(img: Any, top: int, left: int, height: int, width: int) -> Any:
    if _is_pil(img):
        return img.crop((left, top, left + width, top + height))
    if isinstance(img, np.ndarray):
        return img[top:top + height, left:left + width]
    return img[..., top:top + height, left:left + width]


def hflip(img: Any) -> Any:
    if _is_pil(img):
        return img.transpose(_pil_image().Transpose.FLIP_LEFT_RIGHT)
    if isinstance(img, np.ndarray):
        return img[:, ::-1]
    return img.flip(-1)


def _draw(high: int) -> int:
    """A uniform int in [0, high), from the default generator on the host."""
    return int(randint(0, high, (1,), device=host_device()).item())


class RandomCrop:
    """Crop a random ``size`` window, after optional padding (torchvision's arguments)."""

    def __init__(self, size: int | Sequence[int], padding: int | Sequence[int] | None = None,
                 pad_if_needed: bool = False, fill: float | Sequence[float] = 0,
                 padding_mode: str = "constant") -> None:
        self.size = _pair(size, "size")
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode

    @staticmethod
    def get_params(img: Any, output_size: tuple[int, int]) -> tuple[int, int, int, int]:
        """(top, left, height, width) of a random crop of ``output_size``."""
        h, w = _size(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if h == th and w == tw:
            return 0, 0, h, w
        return _draw(h - th + 1), _draw(w - tw + 1), th, tw

    def __call__(self, img: Any) -> Any:
        _check_kind(img, "RandomCrop")
        if self.padding is not None:
            img = pad(img, self.padding, self.fill, self.padding_mode)
        h, w = _size(img)
        if self.pad_if_needed and w < self.size[1]:
            img = pad(img, [self.size[1] - w, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and h < self.size[0]:
            img = pad(img, [0, self.size[0] - h], self.fill, self.padding_mode)
        return crop(img, *self.get_params(img, self.size))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror the image left to right with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Any) -> Any:
        _check_kind(img, "RandomHorizontalFlip")
        if rand(1, device=host_device()).item() < self.p:
            return hflip(img)
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd: Callable[[Any], Any]) -> None:
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got {type(lambd).__name__!r}")
        self.lambd = lambd

    def __call__(self, img: Any) -> Any:
        return self.lambd(img)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def batched(transform: Callable[[Any], Any]) -> Callable[[Tensor], Tensor] | None:
    """``transform`` applied to a whole batch of uint8 pixel arrays ``[B, H, W]`` (a tensor) at
    once, giving exactly the stack of its per-image results; None when it cannot be (random or
    user-written steps). Datasets use it to batch ``Compose([ToTensor(), Normalize(...)])`` in
    one indexing op instead of one small tensor per image."""
    steps = transform.transforms if isinstance(transform, Compose) else [transform]
    if not steps or type(steps[0]) is not ToTensor:
        return None
    if any(type(s) is not Normalize for s in steps[1:]):
        return None

    def run(pixels: Tensor) -> Tensor:
        img = pixels.to(get_default_dtype()).div(255).unsqueeze(1)
        for step in steps[1:]:
            img = step(img)
        return img
    return run
