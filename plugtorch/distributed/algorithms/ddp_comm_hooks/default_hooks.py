"""The built-in DDP communication hooks (torch's ``default_hooks``).

Register one with ``ddp.register_comm_hook(process_group_or_None, hook)``. Each hook
averages a bucket across the ranks of ``process_group`` (the default group when
None) and returns a Future of the averaged bucket:

* :func:`allreduce_hook`: what DDP does without a hook;
* :func:`fp16_compress_hook`: the bucket travels as float16 — half the bytes
  (Horovod's ``Compression.fp16``);
* :func:`bf16_compress_hook`: the bucket travels as bfloat16 — half the bytes, the
  float32 exponent range.

Where torch casts the bucket to a float16/bfloat16 tensor, these ask the process group
to carry it in that format (``ProcessGroup.allreduce(..., wire_dtype=...)``, see
``plugtorch.distributed.wire``): plugtorch has no bfloat16 dtype, and NumPy's float16 cast
is ~25x slower on the tiny values of gradients. The numbers are torch's: each rank's
share is rounded to the 16-bit format, and every partial sum is rounded to it.
"""
from __future__ import annotations

from ....core.dtypes import float16
from ... import ReduceOp, _group

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper"]


def allreduce_hook(process_group, bucket):
    """Average the bucket with one all-reduce (DDP's own behaviour)."""
    group = _group(process_group)
    buffer = bucket.buffer()
    buffer.div_(group.size())
    return group.allreduce(buffer, ReduceOp.SUM).get_future().then(lambda fut: fut.value()[0])


def _compress_hook(wire_dtype, process_group, bucket):
    group = _group(process_group)
    buffer = bucket.buffer()
    # The share is divided before the rounding (torch divides after): one rounding instead
    # of two, and the same result whenever the world size is a power of two.
    work = group.allreduce(buffer / group.size(), ReduceOp.SUM, wire_dtype=wire_dtype)

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer
    return work.get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Average the bucket as float16 on the wire (half the bytes), back into the bucket."""
    return _compress_hook("float16", process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """Average the bucket as bfloat16 on the wire (half the bytes), back into the bucket."""
    return _compress_hook("bfloat16", process_group, bucket)


def fp16_compress_wrapper(hook):
    """Wrap ``hook`` so that it communicates the bucket as float16 and the result is cast back."""
    def fp16_hook(state, bucket):
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(float16))
        fut = hook(state, bucket)

        def decompress(fut):
            buffer.copy_(fut.value())
            return buffer
        return fut.then(decompress)
    return fp16_hook
