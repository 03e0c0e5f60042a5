// layer_norm, its input gradient (layer_norm_backward), its weight gradient
// (layer_norm_weight_grad) and all three gradients together (layer_norm_gradients), as the
// NumPy backend's kernels compute them
// (backends/numpy_backend/fused.py; core/ops/normalization.py for the formulas):
//   xhat = (x - mean) * rstd, rstd = 1 / sqrt(mean((x - mean)^2) + eps), the biased variance
//   from the centred values (two reductions over a row that stays in L1/L2: no cancellation
//   of E[x^2] - mean^2);
//   dx = gy * rstd - xc * (mean(gy * xc) * rstd^3) - mean(gy) * rstd, gy = grad * weight.
// The ops return one tensor each, and the rules recompute the statistics from the saved input,
// so the forward keeps no mean/rstd; the weight gradient's ln_row_stats writes them for its
// column pass (partial sums over chunks of rows, summed by the caller). layer_norm_gradients
// is two passes: the input gradient's, which writes the rows' statistics on the way
// (ln_gradients_rows), then one column pass for the weight and the bias (ln_gradients_cols).
//
// Layout: x, grad and out C-contiguous (rows, n), n the product of normalized_shape; weight
// and bias (n,) (has_weight / has_bias 0: any T array, never read). One block per row, rows
// walked grid-stride; blockDim.x <= 256 (row_reduce.cuh's shared array).

#include "row_reduce.cuh"

__device__ __forceinline__ float ln_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double ln_sqrt(double v) { return sqrt(v); }

// The row's mean and rstd; every thread of the block gets them (it holds barriers).
template <class T>
__device__ void row_stats(const T* xr, long long n, T eps, T* sh, T& mean, T& rstd) {
    T s = T(-0.0);
    for (long long j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
    mean = block_reduce(s, sh, SumOp()) / T(n);
    T v = T(-0.0);
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        const T c = xr[j] - mean;
        v += c * c;
    }
    rstd = T(1) / ln_sqrt(block_reduce(v, sh, SumOp()) / T(n) + eps);
}

template <class T>
__device__ void forward(const T* __restrict__ x, const T* weight, const T* bias, T* __restrict__ out,
                        long long rows, long long n, T eps, int has_weight, int has_bias) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * n;
        T mean, rstd;
        row_stats(xr, n, eps, sh, mean, rstd);
        for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            T y = (xr[j] - mean) * rstd;
            if (has_weight) y = y * weight[j];
            if (has_bias) y = y + bias[j];
            out[r * n + j] = y;
        }
    }
}

// mean_out / rstd_out: nullptr, or (rows,) arrays that get each row's statistics
template <class T>
__device__ void backward(const T* __restrict__ g, const T* __restrict__ x, const T* weight, T* __restrict__ dx,
                         long long rows, long long n, T eps, int has_weight, T* mean_out, T* rstd_out) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * n;
        const T* gr = g + r * n;
        T mean, rstd;
        row_stats(xr, n, eps, sh, mean, rstd);
        if (mean_out != nullptr && threadIdx.x == 0) {
            mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
        T sg = T(-0.0), sgx = T(-0.0);
        for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            const T gy = has_weight ? gr[j] * weight[j] : gr[j];
            sg += gy;
            sgx += gy * (xr[j] - mean);
        }
        const T mg = block_reduce(sg, sh, SumOp()) / T(n);
        const T b = block_reduce(sgx, sh, SumOp()) / T(n) * (rstd * rstd * rstd);
        for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            const T gy = has_weight ? gr[j] * weight[j] : gr[j];
            dx[r * n + j] = gy * rstd - (xr[j] - mean) * b - mg * rstd;
        }
    }
}

template <class T>
__device__ void stats(const T* __restrict__ x, T* __restrict__ mean, T* __restrict__ rstd, long long rows,
                      long long n, T eps) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        T m, s;
        row_stats(x + r * n, n, eps, sh, m, s);
        if (threadIdx.x == 0) {
            mean[r] = m;
            rstd[r] = s;
        }
    }
}

// partial[c, j] = sum over the rows of chunk c (rows c * chunk .. c * chunk + chunk - 1) of
// g[r, j] * (x[r, j] - mean[r]) * rstd[r]; the caller sums partial over c. One thread per
// (chunk, column), columns innermost, so a warp reads consecutive columns of a row (coalesced)
// and a tall input (many rows, few columns) still fills the GPU with chunks; grid-stride.
// partial_b: nullptr, or the same layout, which gets the chunk's sum of g (the bias gradient's).
template <class T>
__device__ void weight_grad(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ mean,
                            const T* __restrict__ rstd, T* __restrict__ partial, T* __restrict__ partial_b,
                            long long rows, long long n, long long chunk) {
    const long long chunks = (rows + chunk - 1) / chunk, step = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < chunks * n; e += step) {
        const long long c = e / n, j = e - c * n;
        const long long end = (c + 1) * chunk < rows ? (c + 1) * chunk : rows;
        T acc = T(-0.0), acc_b = T(-0.0);
        for (long long r = c * chunk; r < end; ++r) {
            const T gr = g[r * n + j];
            acc += gr * ((x[r * n + j] - mean[r]) * rstd[r]);
            acc_b += gr;
        }
        partial[e] = acc;
        if (partial_b != nullptr) partial_b[e] = acc_b;
    }
}

extern "C" __global__ void ln_forward_f32(const float* x, const float* weight, const float* bias, float* out, long long rows,
                                       long long n, float eps, int has_weight, int has_bias) {
    forward<float>(x, weight, bias, out, rows, n, eps, has_weight, has_bias);
}

extern "C" __global__ void ln_backward_f32(const float* g, const float* x, const float* weight, float* dx, long long rows,
                                        long long n, float eps, int has_weight) {
    backward<float>(g, x, weight, dx, rows, n, eps, has_weight, nullptr, nullptr);
}

extern "C" __global__ void ln_row_stats_f32(const float* x, float* mean, float* rstd, long long rows, long long n, float eps) {
    stats<float>(x, mean, rstd, rows, n, eps);
}

extern "C" __global__ void ln_weight_grad_f32(const float* g, const float* x, const float* mean, const float* rstd,
                                           float* partial, long long rows, long long n, long long chunk) {
    weight_grad<float>(g, x, mean, rstd, partial, nullptr, rows, n, chunk);
}

extern "C" __global__ void ln_gradients_rows_f32(const float* g, const float* x, const float* weight, float* dx, float* mean,
                                              float* rstd, long long rows, long long n, float eps) {
    backward<float>(g, x, weight, dx, rows, n, eps, 1, mean, rstd);
}

extern "C" __global__ void ln_gradients_cols_f32(const float* g, const float* x, const float* mean, const float* rstd,
                                              float* partial_w, float* partial_b, long long rows, long long n,
                                              long long chunk) {
    weight_grad<float>(g, x, mean, rstd, partial_w, partial_b, rows, n, chunk);
}

extern "C" __global__ void ln_forward_f64(const double* x, const double* weight, const double* bias, double* out, long long rows,
                                       long long n, double eps, int has_weight, int has_bias) {
    forward<double>(x, weight, bias, out, rows, n, eps, has_weight, has_bias);
}

extern "C" __global__ void ln_backward_f64(const double* g, const double* x, const double* weight, double* dx, long long rows,
                                        long long n, double eps, int has_weight) {
    backward<double>(g, x, weight, dx, rows, n, eps, has_weight, nullptr, nullptr);
}

extern "C" __global__ void ln_row_stats_f64(const double* x, double* mean, double* rstd, long long rows, long long n, double eps) {
    stats<double>(x, mean, rstd, rows, n, eps);
}

extern "C" __global__ void ln_weight_grad_f64(const double* g, const double* x, const double* mean, const double* rstd,
                                           double* partial, long long rows, long long n, long long chunk) {
    weight_grad<double>(g, x, mean, rstd, partial, nullptr, rows, n, chunk);
}

extern "C" __global__ void ln_gradients_rows_f64(const double* g, const double* x, const double* weight, double* dx, double* mean,
                                              double* rstd, long long rows, long long n, double eps) {
    backward<double>(g, x, weight, dx, rows, n, eps, 1, mean, rstd);
}

extern "C" __global__ void ln_gradients_cols_f64(const double* g, const double* x, const double* mean, const double* rstd,
                                              double* partial_w, double* partial_b, long long rows, long long n,
                                              long long chunk) {
    weight_grad<double>(g, x, mean, rstd, partial_w, partial_b, rows, n, chunk);
}
