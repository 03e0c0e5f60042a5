// Shared by the kernels that reduce a row within one block (softmax.cu, cross_entropy.cu):
// exp/log per precision, -inf, a nan-keeping max, and a shared-memory block reduction.
// Included by path ("row_reduce.cuh"): nvcc finds it beside the including file, NVRTC and the
// CPU build through the kernel directory on their include path (modules.nvrtc_options).
#pragma once

__device__ __forceinline__ float fexp(float v) { return expf(v); }
__device__ __forceinline__ double fexp(double v) { return exp(v); }
__device__ __forceinline__ float flog(float v) { return logf(v); }
__device__ __forceinline__ double flog(double v) { return log(v); }
__device__ __forceinline__ void set_neg_inf(float& v) { v = -__int_as_float(0x7f800000); }
__device__ __forceinline__ void set_neg_inf(double& v) { v = -__longlong_as_double(0x7ff0000000000000LL); }

// max that keeps a nan from either side, as numpy.maximum / ndarray.max
template <class T> __device__ __forceinline__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

struct MaxOp {
    template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_max(a, b); }
};
struct SumOp {
    template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

// Every thread's v combined over the block (blockDim.x <= 256); every thread gets the result.
// Called by all threads of the block: it holds barriers.
template <class T, class Op> __device__ T block_reduce(T v, T* sh, Op op) {
    const unsigned int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned int s = 128; s > 0; s >>= 1) {
        if (t < s && t + s < blockDim.x) sh[t] = op(sh[t], sh[t + s]);
        __syncthreads();
    }
    const T r = sh[0];
    __syncthreads();  // all have read sh[0] before the next reduction writes sh
    return r;
}
