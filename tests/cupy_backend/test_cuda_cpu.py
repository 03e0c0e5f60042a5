"""The CPU executor of CUDA sources (plugtorch.testing.cuda_cpu) runs kernels as a GPU would."""
from __future__ import annotations

import numpy as np
import pytest

from plugtorch.testing.cuda_cpu import CpuModule, compiler_missing, entry_points

pytestmark = pytest.mark.skipif(compiler_missing() is not None, reason=f"{compiler_missing()}")

SOURCE = r"""
// one partial sum per block: a shared-memory tree reduction with barriers
extern "C" __global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, long long n) {
    __shared__ float buf[256];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

extern "C" __global__ void count_positive(const double* x, unsigned long long* count, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        if (x[i] > 0) atomicAdd(count, 1ULL);
}

extern "C" __global__ void coords(int* out) {
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int b = blockIdx.y * gridDim.x + blockIdx.x;
    out[b * blockDim.x * blockDim.y * blockDim.z + t] = b * 1000 + t;
}
"""


@pytest.fixture(scope="module")
def module():
    return CpuModule(code=SOURCE)


def test_entry_points_are_the_extern_c_global_functions():
    assert entry_points(SOURCE) == ["block_sum", "count_positive", "coords"]


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000])
def test_a_shared_memory_reduction_with_barriers(module, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    blocks = (n + 255) // 256
    out = np.zeros(blocks, np.float32)
    module.get_function("block_sum")((blocks,), (256,), (x, out, np.int64(n)))
    expected = [x[i * 256:(i + 1) * 256].sum(dtype=np.float64) for i in range(blocks)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_atomics_and_grid_stride_loops(module):
    x = np.random.default_rng(0).standard_normal(3001)
    count = np.zeros(1, np.uint64)
    module.get_function("count_positive")((3,), (64,), (x, count, np.int64(x.size)))
    assert count[0] == (x > 0).sum()


def test_thread_and_block_coordinates_in_three_dimensions(module):
    out = np.full(2 * 3 * 4 * 2 * 2, -1, np.int32)
    module.get_function("coords")((2, 3), (4, 2, 2), (out,))
    expected = [b * 1000 + t for b in range(6) for t in range(16)]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("args, message", [
    (lambda x, o: (x, o, 10), "pass numpy.int64"),
    (lambda x, o: (x, o, np.int32(10)), "is a int64 parameter; got a int32"),
    (lambda x, o: (x.astype(np.float64), o, np.int64(10)), "points to float32; got an array of float64"),
    (lambda x, o: (x[::2], o, np.int64(5)), "not C-contiguous"),
    (lambda x, o: (x, o, ), "takes 3 arguments"),
], ids=["python-int", "wrong-int-width", "wrong-array-dtype", "strided", "count"])
def test_arguments_a_gpu_would_misread_are_refused(module, args, message):
    x, out = np.ones(10, np.float32), np.zeros(1, np.float32)
    with pytest.raises((TypeError, ValueError), match=None) as info:
        module.get_function("block_sum")((1,), (256,), args(x, out))
    assert message in str(info.value)


def test_read_only_arrays_only_go_to_const_pointers(module):
    x, out = np.ones(10, np.float32), np.zeros(1, np.float32)
    x.flags.writeable = False
    module.get_function("block_sum")((1,), (256,), (x, out, np.int64(10)))  # const float*: fine
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only array passed to a non-const"):
        module.get_function("block_sum")((1,), (256,), (x, out, np.int64(10)))


def test_invalid_launch_shapes_are_refused(module):
    x, out = np.ones(10, np.float32), np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="not a valid CUDA block"):
        module.get_function("block_sum")((1,), (2048,), (x, out, np.int64(10)))
    with pytest.raises(ValueError, match="empty dimension"):
        module.get_function("block_sum")((0,), (256,), (x, out, np.int64(10)))
    with pytest.raises(AttributeError, match="no kernel 'nope'"):
        module.get_function("nope")


def test_a_source_that_does_not_compile_says_why():
    with pytest.raises(RuntimeError, match="g\\+\\+ could not build"):
        CpuModule(code='extern "C" __global__ void broken(float* x) { x[0] = undefined_name; }')


def test_a_divergent_barrier_is_reported_not_hung():
    module = CpuModule(code=r'''
extern "C" __global__ void divergent(float* x) {
    if (threadIdx.x < 3) return;  // the others wait at a barrier the first three never reach
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}''')
    with pytest.raises(RuntimeError, match="3 of 8 threads returned while the others wait at __syncthreads"):
        module.get_function("divergent")((1,), (8,), (np.zeros(8, np.float32),))


def test_a_quoted_include_is_found_beside_the_source_and_its_change_rebuilds(tmp_path):
    (tmp_path / "k.cu").write_text('#include "value.cuh"\n'
                                   'extern "C" __global__ void put(float* x) { x[threadIdx.x] = VALUE; }\n')
    results = []
    for value in ("1.0f", "2.0f"):
        (tmp_path / "value.cuh").write_text(f"#define VALUE {value}\n")
        out = np.zeros(2, np.float32)
        CpuModule(path=tmp_path / "k.cu").get_function("put")((1,), (2,), (out,))
        results.append(out.tolist())
    assert results == [[1.0, 1.0], [2.0, 2.0]]  # the header is part of the cache key
