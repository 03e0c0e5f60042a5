// gelu and gelu_backward, exact (erf) or torch's tanh approximation, one grid-stride launch
// each where the op's decomposition makes five elementwise passes. The formulas are the NumPy
// backend's native kernels' (backends/numpy_backend/native/typed.h):
//   exact: 0.5 x (1 + erf(x / sqrt 2)); grad * (0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi))
//   tanh:  0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3));
//          grad * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))
// All arrays C-contiguous, of one dtype and n elements; tanh_form 0 or 1.

__device__ __forceinline__ float ferf(float v) { return erff(v); }
__device__ __forceinline__ double ferf(double v) { return erf(v); }
__device__ __forceinline__ float ftanh(float v) { return tanhf(v); }
__device__ __forceinline__ double ftanh(double v) { return tanh(v); }
__device__ __forceinline__ float fexp_(float v) { return expf(v); }
__device__ __forceinline__ double fexp_(double v) { return exp(v); }

template <class T>
__device__ __forceinline__ T tanh_inner(T v) {
    return T(0.7978845608028654) * (v + T(0.044715) * v * v * v);
}

template <class T>
__device__ void gelu_fwd(const T* __restrict__ x, T* __restrict__ out, long long n, int tanh_form) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const T v = x[i];
        const T b = tanh_form ? ftanh(tanh_inner(v)) : ferf(v * T(0.7071067811865476));
        out[i] = T(0.5) * v * (T(1) + b);
    }
}

template <class T>
__device__ void gelu_bwd(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ out, long long n,
                         int tanh_form) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const T v = x[i];
        T d;
        if (tanh_form) {
            const T t = ftanh(tanh_inner(v));
            const T dinner = (T(0.134145) * v * v + T(1)) * T(0.7978845608028654);
            d = T(0.5) * (t + T(1)) + T(0.5) * v * (T(1) - t * t) * dinner;
        } else {
            const T cdf = T(0.5) * (ferf(v * T(0.7071067811865476)) + T(1));
            d = cdf + v * fexp_(v * v * T(-0.5)) * T(0.3989422804014327);
        }
        out[i] = g[i] * d;
    }
}

extern "C" __global__ void gelu_f32(const float* x, float* out, long long n, int tanh_form) {
    gelu_fwd<float>(x, out, n, tanh_form);
}

extern "C" __global__ void gelu_f64(const double* x, double* out, long long n, int tanh_form) {
    gelu_fwd<double>(x, out, n, tanh_form);
}

extern "C" __global__ void gelu_backward_f32(const float* g, const float* x, float* out, long long n, int tanh_form) {
    gelu_bwd<float>(g, x, out, n, tanh_form);
}

extern "C" __global__ void gelu_backward_f64(const double* g, const double* x, double* out, long long n,
                                             int tanh_form) {
    gelu_bwd<double>(g, x, out, n, tanh_form);
}
