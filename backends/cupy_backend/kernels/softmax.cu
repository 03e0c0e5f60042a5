// softmax and log_softmax along one dim: one block per row, the row's max and sum of
// exponentials reduced in shared memory, then one more pass that writes the row.
//
// The input is C-contiguous and seen as (outer, cols, inner), the softmax dim in the middle:
// row r = (o, i) holds x[o * cols * inner + j * inner + i] for j < cols, so a dim that is not
// the last needs no transposed copy (its rows are read with stride inner). Rows are walked
// grid-stride (any grid works); blockDim.x is at most 256 (the shared arrays' size).
// As the NumPy kernels: softmax = exp(x - max) / sum, log_softmax = (x - max) - log(sum);
// a nan anywhere in a row makes the row nan (the max propagates it), and a row of -inf is nan.

#include "row_reduce.cuh"

template <class T, bool LOG>
__device__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, long long cols,
                             long long inner) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long o = r / inner;
        const long long base = o * cols * inner + (r - o * inner);
        T m;
        set_neg_inf(m);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) m = nan_max(m, x[base + j * inner]);
        m = block_reduce(m, sh, MaxOp());
        T s = T(-0.0);  // the additive identity, -0 included
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) s += fexp(x[base + j * inner] - m);
        s = block_reduce(s, sh, SumOp());
        if constexpr (LOG) {
            const T l = flog(s);
            for (long long j = threadIdx.x; j < cols; j += blockDim.x)
                y[base + j * inner] = (x[base + j * inner] - m) - l;
        } else {
            for (long long j = threadIdx.x; j < cols; j += blockDim.x)
                y[base + j * inner] = fexp(x[base + j * inner] - m) / s;
        }
    }
}

extern "C" __global__ void softmax_f32(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                       long long cols, long long inner) {
    softmax_rows<float, false>(x, y, rows, cols, inner);
}

extern "C" __global__ void softmax_f64(const double* __restrict__ x, double* __restrict__ y, long long rows,
                                       long long cols, long long inner) {
    softmax_rows<double, false>(x, y, rows, cols, inner);
}

extern "C" __global__ void log_softmax_f32(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                           long long cols, long long inner) {
    softmax_rows<float, true>(x, y, rows, cols, inner);
}

extern "C" __global__ void log_softmax_f64(const double* __restrict__ x, double* __restrict__ y, long long rows,
                                           long long cols, long long inner) {
    softmax_rows<double, true>(x, y, rows, cols, inner);
}
