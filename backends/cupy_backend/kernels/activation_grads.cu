// The activations' gradients, one launch each where their decompositions take three
// (core/ops/activation.py); each runs as the NumPy backend's native kernel does
// (backends/numpy_backend/native/typed.h), so the two agree bit for bit:
//   threshold_bwd: 0 where input <= threshold, else grad, as torch's kernel and the op's select (a
//       NaN input passes grad on; +0 also where grad is negative, inf or nan);
//   tanh_bwd: grad * (1 - y * y), and sigmoid_bwd: grad * (1 - y) * y, from the op's output y,
//       each product rounded to T (rounding.cuh: no FMA contraction).
// Grid-stride over n elements; all arrays C-contiguous, of one dtype and n elements.

#include "rounding.cuh"

template <class T>
__device__ void threshold_bwd(const T* __restrict__ g, const T* __restrict__ x, T threshold, T* __restrict__ out,
                              long long n) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = x[i] <= threshold ? T(0) : g[i];
}

template <class T>
__device__ void tanh_bwd(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ out, long long n) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = mul_rn(g[i], sub_rn(T(1), mul_rn(y[i], y[i])));
}

template <class T>
__device__ void sigmoid_bwd(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ out, long long n) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = mul_rn(mul_rn(g[i], sub_rn(T(1), y[i])), y[i]);
}

extern "C" __global__ void threshold_backward_f32(const float* g, const float* x, float threshold, float* out,
                                                  long long n) {
    threshold_bwd<float>(g, x, threshold, out, n);
}

extern "C" __global__ void threshold_backward_f64(const double* g, const double* x, double threshold, double* out,
                                                  long long n) {
    threshold_bwd<double>(g, x, threshold, out, n);
}

extern "C" __global__ void tanh_backward_f32(const float* g, const float* y, float* out, long long n) {
    tanh_bwd<float>(g, y, out, n);
}

extern "C" __global__ void tanh_backward_f64(const double* g, const double* y, double* out, long long n) {
    tanh_bwd<double>(g, y, out, n);
}

extern "C" __global__ void sigmoid_backward_f32(const float* g, const float* y, float* out, long long n) {
    sigmoid_bwd<float>(g, y, out, n);
}

extern "C" __global__ void sigmoid_backward_f64(const double* g, const double* y, double* out, long long n) {
    sigmoid_bwd<double>(g, y, out, n);
}
