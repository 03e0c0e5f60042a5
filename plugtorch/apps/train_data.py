"""The training images as ``train`` feeds them: normalised once, not once per batch.

``MNIST.get_batch`` gives each batch as uint8 pixels cast to float and divided by 255;
normalising each such batch would be four passes over every batch, each epoch (a fifth of an
MLP epoch, where PyTorch's MNIST loops normalise the whole set once and gather rows from it).
:func:`prepared` does the same ops once over the whole set and hands ``train`` a
``TensorDataset`` of the results, so that a batch is a gather. The values are the ones the
per-batch path (:func:`normalize`) computes, bit for bit: the same elementwise ops, in the
same order, in float32.

The copy costs 4 bytes a pixel where the dataset holds 1 (188 MiB for MNIST's training set,
and the process of the README's CNN run grows from 317 to 506 MiB), and under ``mpirun`` every
rank holds one. So it is made only while the copies of all ranks together fit
:data:`LIMIT_BYTES`: one process or two for MNIST; more ranks normalise each batch.
"""
from __future__ import annotations

import plugtorch
from plugtorch.datasets import MNIST
from plugtorch.utils.data import Subset, TensorDataset
from plugtorch.utils.data.dataset import _index_tensor

LIMIT_BYTES = 512 << 20  # for the copies of all ranks together (they may share a machine)
_CHUNK_ROWS = 8192       # images normalised at a time, so the temporaries stay small


def normalize(images, mean: float, std: float):
    """float images in [0, 1] as ``train`` feeds them to a model (the one place it is written)."""
    return (images - mean) / std


def _in_memory(dataset):
    """(an MNIST-like dataset, the row indices of ``dataset`` in it or None) where ``dataset``
    is one, or a Subset of one, that get_batch reads straight from memory; else None."""
    base, rows = (dataset.dataset, dataset.indices) if isinstance(dataset, Subset) else (dataset, None)
    if not isinstance(base, MNIST) or base.transform is not None or base.target_transform is not None:
        return None
    return base, rows


def _float_bytes(dataset, found) -> int:
    base, _ = found
    per_image = 4 * base.data[0].numel()
    return len(dataset) * per_image


def _normalized(found, mean: float, std: float) -> TensorDataset:
    base, rows = found
    images, targets = base.data, base.targets
    if rows is not None:
        idx = _index_tensor(list(rows), like=images)
        images, targets = images[idx], targets[idx]
    out = plugtorch.empty((images.shape[0], 1) + tuple(images.shape[1:]), dtype=plugtorch.float32,
                          device=images.backend)
    for start in range(0, images.shape[0], _CHUNK_ROWS):
        chunk = base.scaled(images[start:start + _CHUNK_ROWS])
        out[start:start + _CHUNK_ROWS] = normalize(chunk, mean, std)
    return TensorDataset(out, targets)


def prepared(train, test, mean: float, std: float, ranks: int = 1):
    """(train, test, whether they are normalised already): TensorDatasets of normalised images
    where both sets are in-memory MNIST-like sets whose float copies, one per rank, fit
    LIMIT_BYTES together; else the sets as given, which ``train`` normalises per batch."""
    found = [_in_memory(train), _in_memory(test)]
    if found[0] is None or found[1] is None:
        return train, test, False
    if ranks * (_float_bytes(train, found[0]) + _float_bytes(test, found[1])) > LIMIT_BYTES:
        return train, test, False
    return _normalized(found[0], mean, std), _normalized(found[1], mean, std), True
