"""Variable-length sequences for the recurrent layers: ``PackedSequence`` and its helpers, as torch's.

A packed sequence holds, time step after time step, the rows of the sequences still running at
that step: sorted by decreasing length, step ``t`` has ``batch_sizes[t]`` rows, the first of the
batch. ``sorted_indices`` maps that order to the caller's batch (``None`` when it already was
sorted). Everything here is built from differentiable tensor ops, so gradients flow through
packing and padding.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import plugtorch

from ...core.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence(NamedTuple):
    """``data`` (sum of lengths, *), ``batch_sizes`` (int64, on the CPU) and the sort permutations."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data`` (and the index tensors, to its device) moved or cast as ``Tensor.to``;
        ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        idx = [None if i is None else i.to(data.device) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, idx[0], idx[1])

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=plugtorch.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=plugtorch.float32)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    output = plugtorch.empty_like(permutation)
    output[permutation] = plugtorch.arange(permutation.numel(), device=permutation.device)
    return output


def _lengths_list(lengths: Any) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise ValueError(f"pack_padded_sequence: lengths must be a 1-D tensor, got shape {list(lengths.shape)}")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack ``input`` (T, B, *) or (B, T, *) whose sequence ``b`` is ``lengths[b]`` long."""
    lens = _lengths_list(lengths)
    bdim = 0 if batch_first else 1
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: input must have at least 2 dimensions (time and batch), got "
                         f"shape {list(input.shape)}")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                "requirement if you do not need ONNX exportability.")
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])  # stable, as torch's sort on the CPU
        sorted_indices = plugtorch.tensor(order, dtype=plugtorch.int64, device=input.device)
        lens = [lens[i] for i in order]
        if len(order) == input.shape[bdim]:
            input = input.index_select(bdim, sorted_indices)
    if len(lens) != input.shape[bdim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
                           f"(batch_size={input.shape[bdim]})")
    if lens and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    steps = input.shape[1 - bdim]
    if lens and lens[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a length of {lens[0]} is longer than the input's "
                           f"{steps} time steps (input shape {list(input.shape)}, batch_first={batch_first})")
    x = input.transpose(0, 1) if batch_first else input
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0] if lens else 0)]
    data = plugtorch.cat([x[t, :bs] for t, bs in enumerate(batch_sizes)], 0)
    return PackedSequence(data, plugtorch.tensor(batch_sizes, dtype=plugtorch.int64), sorted_indices,
                          invert_permutation(sorted_indices))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of ``pack_padded_sequence``: (padded tensor, lengths in the caller's order)."""
    data = sequence.data
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    batch = sizes[0]
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    feat = tuple(data.shape[1:])
    rows, offset = [], 0
    for t in range(steps):
        bs = sizes[t] if t < len(sizes) else 0
        piece = data[offset:offset + bs]
        offset += bs
        if bs < batch:
            pad = plugtorch.full((batch - bs, *feat), padding_value, dtype=data.dtype, device=data.device)
            piece = plugtorch.cat([piece, pad], 0)
        rows.append(piece)
    padded = plugtorch.stack(rows, 0)
    lengths = [sum(1 for bs in sizes if bs > b) for b in range(batch)]
    length_t = plugtorch.tensor(lengths, dtype=plugtorch.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        length_t = length_t[sequence.unsorted_indices.to("cpu")]
    return (padded.transpose(0, 1) if batch_first else padded), length_t


def pad_sequence(sequences: Tensor | Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padding each."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    seqs = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in seqs)
    trailing = tuple(seqs[0].shape[1:])
    padded = []
    for i, s in enumerate(seqs):
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: sequence {i} has shape {list(s.shape)} but sequence 0 has "
                               f"{list(seqs[0].shape)}; all sequences must agree after their first dimension")
        if s.shape[0] < longest:
            pad = plugtorch.full((longest - s.shape[0], *trailing), padding_value, dtype=s.dtype, device=s.device)
            s = plugtorch.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return plugtorch.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """The list of sequences ``pad_sequence`` padded (right padding)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[b, :n] for b, n in enumerate(_lengths_list(lengths))]


def pack_sequence(sequences: Iterable[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shapes (L_i, *)."""
    seqs = list(sequences)
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] for s in seqs], enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences ``pack_sequence`` packed, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
