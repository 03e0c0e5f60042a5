"""The CPU executor of CUDA sources (plugtorch.testing.cuda_cpu) runs kernels as a GPU would."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from plugtorch.testing.cuda_cpu import ORDERS, CpuModule, compiler_missing, entry_points

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


# Each check below has a kernel that is wrong in one way: it passes under a single ascending
# order without bounds checks (what a lenient executor does, and a GPU may too), and fails here.

RACES = r"""
// thread t reads what thread t - 1 wrote to shared memory: the barrier between is missing
extern "C" __global__ void shift_no_barrier(const float* x, float* out) {
    __shared__ float sh[64];
    const int t = threadIdx.x;
    sh[t] = x[t];
    if (t > 0) out[t] = sh[t - 1];
}

extern "C" __global__ void shift(const float* x, float* out) {
    __shared__ float sh[64];
    const int t = threadIdx.x;
    sh[t] = x[t];
    __syncthreads();
    if (t > 0) out[t] = sh[t - 1];
}

// block b reads what block b - 1 wrote: blocks have no order on a GPU
extern "C" __global__ void chain_blocks(float* out) {
    if (threadIdx.x == 0) out[blockIdx.x + 1] = out[blockIdx.x] + 1.0f;
}

// sh[0] is read before any thread wrote it
extern "C" __global__ void uninitialised(float* out) {
    __shared__ float sh[64];
    if (threadIdx.x > 0) sh[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = sh[0];
}
"""


@pytest.fixture(scope="module")
def races():
    return CpuModule(code=RACES), CpuModule(code=RACES, orders=("ascending",))


@pytest.mark.parametrize("kernel, n_out, names", [
    ("shift_no_barrier", 64, r"out\[\d+\] is .* under the ascending order and .* under the descending order"),
    ("chain_blocks", 9, r"out\[\d+\] is .* under the ascending order and .* under the descending order"),
    ("uninitialised", 64, r"reads __shared__ memory that no thread of its block wrote"),
])
def test_a_result_that_depends_on_the_order_of_threads_is_a_race(races, kernel, n_out, names):
    checked, ascending_only = races
    x = np.arange(64, dtype=np.float32)
    grid = (8,) if kernel == "chain_blocks" else (1,)
    args = lambda: (np.zeros(n_out, np.float32),) if kernel != "shift_no_barrier" else (x, np.zeros(n_out, np.float32))
    ascending_only.get_function(kernel)(grid, (64,), args())  # one fixed order hides it
    with pytest.raises(RuntimeError, match=f"kernel {kernel} .*the result depends on the order") as info:
        checked.get_function(kernel)(grid, (64,), args())
    assert re.search(names, str(info.value)), info.value


def test_the_kernel_with_its_barrier_passes_in_every_order_and_writes_the_caller_s_array(races):
    x, out = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    races[0].get_function("shift")((1,), (64,), (x, out))
    np.testing.assert_array_equal(out, np.r_[0, x[:-1]])


def test_a_seeded_shuffle_is_an_order_of_its_own():
    module = CpuModule(code=r"""
extern "C" __global__ void rotate(float* out) {
    __shared__ float sh[32];
    const int t = threadIdx.x;
    sh[t] = (float)t;
    out[t] = sh[(t + 5) % 32];
}""", orders=("ascending", "shuffled:7"))
    with pytest.raises(RuntimeError, match="under the ascending order and .* under the shuffled:7 order"):
        module.get_function("rotate")((1,), (32,), (np.zeros(32, np.float32),))


BOUNDS = r"""
extern "C" __global__ void fill_shared(float* out) {
    __shared__ float sh[256];
    sh[threadIdx.x] = 1.0f;  // the block must have at most 256 threads
    __syncthreads();
    if (threadIdx.x == 0) out[0] = sh[0];
}

extern "C" __global__ void before_shared(float* out) {
    __shared__ float sh[32];
    const int t = threadIdx.x;
    sh[t] = 1.0f;
    __syncthreads();
    out[t] = sh[t - 1];  // t = 0 reads sh[-1]
}

extern "C" __global__ void before_shared_unsigned(float* out) {
    __shared__ float sh[32];
    sh[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = sh[threadIdx.x - 1];  // unsigned: 0 - 1 is 4294967295
}

extern "C" __global__ void copy_unchecked(const float* x, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i];  // no i < n
}

extern "C" __global__ void copy_previous(const float* x, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i - 1];  // i = 0 reads x[-1]
}

extern "C" __global__ void scale_in_place(const float* x, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
"""


def _aligned(n):
    """n zero float32s at a 16-byte boundary, as CUDA allocates (so the padding cases are exact)."""
    raw = np.zeros(n + 4, np.float32)
    skip = (-raw.ctypes.data % 16) // 4
    return raw[skip:skip + n]


@pytest.fixture(scope="module")
def bounds():
    return CpuModule(code=BOUNDS), CpuModule(code=BOUNDS, orders=("ascending",))


def test_an_index_past_a_shared_array_names_the_array_the_index_and_the_thread(bounds):
    out = np.zeros(1, np.float32)
    bounds[0].get_function("fill_shared")((1,), (256,), (out,))
    assert out[0] == 1.0
    with pytest.raises(RuntimeError, match=re.escape(
            "kernel fill_shared <<<(1, 1, 1), (512, 1, 1)>>>: thread (256,0,0) of block (0,0,0) accessed element 256 "
            "of __shared__ sh (float32[256]), past its end: the block has 512 threads, more than sh holds; launch at "
            "most 256 threads per block")):
        bounds[0].get_function("fill_shared")((1,), (512,), (out,))


def test_an_index_before_a_shared_array_is_found_in_the_run_that_places_it_against_its_lower_guard(bounds):
    checked, ascending_only = bounds
    ascending_only.get_function("before_shared")((1,), (32,), (np.zeros(32, np.float32),))
    with pytest.raises(RuntimeError, match=re.escape(
            "thread (0,0,0) of block (0,0,0) accessed element -1 of __shared__ sh (float32[32]), before its start")):
        checked.get_function("before_shared")((1,), (32,), (np.zeros(32, np.float32),))
    with pytest.raises(RuntimeError, match="element 4294967295 of __shared__ sh .*the index -1, computed in unsigned "
                                           "arithmetic, wrapped around"):
        checked.get_function("before_shared_unsigned")((1,), (32,), (np.zeros(32, np.float32),))


@pytest.mark.parametrize("kernel, n, message", [
    ("copy_unchecked", 300, "thread (44,0,0) of block (2,0,0) accessed x[300], past the end of the array passed as "
                            "argument 0 (x: float32, 300 elements)"),
    ("copy_previous", 300, "thread (0,0,0) of block (0,0,0) accessed x[-1], before the start of the array passed as "
                           "argument 0 (x: float32, 300 elements)"),
    # 10 floats end 8 bytes short of a 16-byte boundary: the write lands in the alignment padding
    ("copy_unchecked", 10, "a thread wrote out[10], past the end of the array passed as argument 1 (out: float32, "
                           "10 elements), within the alignment padding"),
])
def test_an_index_outside_an_array_argument_names_the_argument_the_index_and_the_thread(bounds, kernel, n, message):
    checked, _ = bounds
    x, out = _aligned(n), _aligned(n)
    block = 128 if n > 128 else 12
    with pytest.raises(RuntimeError, match=re.escape(message)):
        checked.get_function(kernel)(((n + block - 1) // block,), (block,), (x, out, np.int32(n)))
    assert not out.any()  # a failed launch leaves the caller's arrays as they were


def test_arguments_that_share_memory_keep_sharing_it(bounds):
    x = np.arange(10, dtype=np.float32)
    bounds[0].get_function("scale_in_place")((1,), (16,), (x, x, np.int32(10)))
    np.testing.assert_array_equal(x, 2 * np.arange(10))
    # out[i] = 2 * x[i] with x two elements further into the same memory: thread i reads what
    # thread i + 2 writes, a race the copies see only because they overlap as the arrays do
    y = np.arange(12, dtype=np.float32)
    with pytest.raises(RuntimeError, match="the result depends on the order"):
        bounds[0].get_function("scale_in_place")((1,), (16,), (y[2:], y[:10], np.int32(10)))
    np.testing.assert_array_equal(y, np.arange(12))


def test_threads_waiting_at_different_barriers_are_a_divergent_barrier():
    module = CpuModule(code=r'''
extern "C" __global__ void two_barriers(float* x) {
    if (threadIdx.x % 2) {
        x[threadIdx.x] = 1.0f;
        __syncthreads();
    } else {
        x[threadIdx.x] = 2.0f;
        __syncthreads();
    }
}''')
    with pytest.raises(RuntimeError, match=r"kernel two_barriers .*: block \(0,0,0\): thread \(0,0,0\) waits at "
                                           r"__syncthreads\(\) at source.cu:8 and thread \(1,0,0\) at the one at "
                                           r"source.cu:5 \(a divergent barrier"):
        module.get_function("two_barriers")((1,), (8,), (np.zeros(8, np.float32),))


def test_a_block_larger_than_the_launch_bounds_is_refused():
    module = CpuModule(code=r'''
#define THREADS 128
extern "C" __global__ __launch_bounds__(THREADS, 2) void bounded(float* x) { x[threadIdx.x] = 1.0f; }''')
    kernel = module.get_function("bounded")
    assert kernel.max_threads == 128
    x = np.zeros(256, np.float32)
    kernel((2,), (128,), (x,))
    with pytest.raises(ValueError, match=re.escape("kernel bounded declares __launch_bounds__(128) and block "
                                                   "(256, 1, 1) has 256 threads: a GPU refuses this launch")):
        kernel((1,), (256,), (x,))


def test_a_project_kernel_launched_with_more_threads_than_its_shared_arrays_hold_fails(cpu_load):
    x = np.random.default_rng(0).standard_normal(2 * 300)
    y = np.empty_like(x)
    softmax = cpu_load("softmax").get_function("softmax_f64")
    softmax((2,), (256,), (x, y, np.int64(2), np.int64(300), np.int64(1)))
    e = np.exp(x.reshape(2, 300) - x.reshape(2, 300).max(1, keepdims=True))
    np.testing.assert_allclose(y.reshape(2, 300), e / e.sum(1, keepdims=True), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"kernel softmax_f64 .*accessed element 256 of __shared__ sh "
                                           r"\(float64\[256\]\), past its end: .*launch at most 256 threads per block"):
        softmax((2,), (512,), (x, y, np.int64(2), np.int64(300), np.int64(1)))


def test_the_project_kernels_run_in_every_order(cpu_load):
    if os.environ.get("PLUGTORCH_CUDA_CPU_ORDERS"):
        pytest.skip("PLUGTORCH_CUDA_CPU_ORDERS chooses the orders in this run")
    assert cpu_load("softmax").orders == ORDERS == ("ascending", "descending", "shuffled:1")


def test_a_crash_in_a_kernel_is_an_error_naming_the_thread():
    module = CpuModule(code=r'''
__device__ int deep(int n) { volatile char pad[4096]; pad[0] = (char)n; return n ? deep(n - 1) + pad[0] : 0; }
extern "C" __global__ void recurse(int* out, int n) { out[threadIdx.x] = deep(n); }
extern "C" __global__ void divide(int* out, int d) { out[threadIdx.x] = 7 / d; }''')
    out = np.zeros(4, np.int32)
    with pytest.raises(RuntimeError, match=re.escape("thread (0,0,0) of block (0,0,0) overflowed its 256 KiB stack")):
        module.get_function("recurse")((1,), (4,), (out, np.int32(1000)))
    with pytest.raises(RuntimeError, match=re.escape("thread (0,0,0) of block (0,0,0) divided an integer by zero")):
        module.get_function("divide")((1,), (4,), (out, np.int32(0)))
    module.get_function("divide")((1,), (4,), (out, np.int32(2)))
    assert out.tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("declaration, why", [
    ("extern __shared__ float dyn[];", "dynamic shared memory (extern __shared__) is not provided"),
    ("__shared__ float a[4], b[4];", "write one array per declaration"),
])
def test_a_shared_declaration_that_cannot_be_checked_is_refused(declaration, why):
    with pytest.raises(ValueError, match=re.escape(f"source.cu:3: cuda_cpu cannot bounds-check this __shared__ "
                                                   f"declaration: {why}")):
        CpuModule(code=f'extern "C" __global__ void k(float* x) {{\n    x[0] = 0;\n    {declaration}\n}}\n')


def test_orders_are_checked():
    with pytest.raises(ValueError, match="'ascending', 'descending' or 'shuffled:<seed>'"):
        CpuModule(code=SOURCE, orders=("random",))
