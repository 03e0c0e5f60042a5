// softmax and log_softmax along one dim: one block per row, the row's max and sum of
// exponentials reduced in shared memory, then one more pass that writes the row.
//
// The input is C-contiguous and seen as (outer, cols, inner), the softmax dim in the middle:
// row r = (o, i) holds x[o * cols * inner + j * inner + i] for j < cols, so a dim that is not
// the last needs no transposed copy (its rows are read with stride inner). Rows are walked
// grid-stride (any grid works); blockDim.x is at most 256 (the shared arrays' size).
// As the NumPy kernels: softmax = exp(x - max) / sum, log_softmax = (x - max) - log(sum);
// a nan anywhere in a row makes the row nan (the max propagates it), and a row of -inf is nan.

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
