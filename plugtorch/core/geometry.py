"""Window and batch arithmetic shared by the core's decompositions and backends' kernels.

A convolution or pooling kernel that stands in for an op's decomposition computes the same
output shape, and a kernel that must give the decomposition's values bit for bit splits the
batch and orders its products as the decomposition does. These functions are that arithmetic,
in one place, so both sides ask the same question and get the same answer. They are part of
the backend contract (:mod:`plugtorch.backend_api` re-exports them).
"""
from __future__ import annotations

__all__ = ["CHUNK_BYTES", "batch_chunks", "weight_grad_product", "window_count"]

# Patches per chunk of a convolution's backward, under the NumPy backend's 32 MB mmap threshold.
# Read at call time, so a test can shrink it to split a small batch.
CHUNK_BYTES = 16 << 20


def window_count(size: int, kernel_size: int, stride: int, padding: int, dilation: int,
                 ceil_mode: bool = False) -> int:
    """How many windows fit along one spatial dim: the output size of a convolution or a pool.

    ``floor((size + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1``, as torch
    computes it; with ``ceil_mode`` the division rounds up, except that the last window must
    start inside the input or its left padding (torch's rule). A result of 0 or less means
    the window does not fit; callers raise torch's error for it.
    """
    span = size + 2 * padding - dilation * (kernel_size - 1) - 1
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + padding:
            out -= 1
        return out
    return span // stride + 1


def batch_chunks(n: int, bytes_per_image: int) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges over a batch of ``n`` images, each about ``CHUNK_BYTES`` of
    temporaries at ``bytes_per_image`` each (at least one image a chunk).

    A convolution's backward takes the batch in these chunks to bound its patch matrices; a
    kernel that sums over the batch in the same chunks, in order, sums alike. An empty batch is
    one empty chunk, ``[(0, 0)]``, so a loop over the chunks runs once.
    """
    step = max(1, CHUNK_BYTES // max(1, bytes_per_image))
    return [(a, min(n, a + step)) for a in range(0, n, step)] or [(0, 0)]


def weight_grad_product(out_channels: int, patch_rows: int, images: int, per_image: int) -> str:
    """How a convolution's weight gradient runs its product (per group), one of:

    - ``"per_image"``: each image's (patches @ grad^T) alone, summed over the batch. With a small
      weight (O/G x C/G*prod(k) of at most 1024) and a long product, OpenBLAS runs the one
      product at a fraction of its speed: MNIST's first convolution (1->16, 3x3, batch 64, a
      9 x 50176 x 16 product) takes 650 us as one product and 270 us as 64, on one thread
      or two. With short images (under 64 columns) or a short product it loses;
    - ``"rows_first"``: (patches @ grad^T)^T, the patch rows as the product's rows, when they
      outnumber the output channels: conv2d 16->32, 3x3, batch 64 (a 32 x 12544 x 144
      product) 1.73 -> 1.14 ms on one thread, 1.20 -> 0.69 on two;
    - ``"grad_first"``: grad @ patches^T.

    ``"rows_first"`` and ``"grad_first"`` sum alike (OpenBLAS gives the same bits for both);
    ``"per_image"`` sums each image's terms first. The decomposition and the NumPy backend's
    native kernel both ask this function, so the two stay bit for bit.
    """
    if out_channels * patch_rows <= 1024 and per_image >= 64 and images * per_image >= 8192:
        return "per_image"
    return "rows_first" if patch_rows > out_channels else "grad_first"
