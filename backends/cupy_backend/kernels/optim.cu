// The optimizer updates, one launch per parameter, in place: Adam/AdamW (adam_step_) and SGD
// with momentum (sgd_step_). Each element goes through the NumPy kernel's operations in its
// order (backends/numpy_backend/fused_optim.py), with every scalar rounded to T on the host as
// it rounds them, so the two agree bit for bit (rounding.cuh: no FMA contraction). Division
// and sqrt are IEEE-rounded by default (no fast math).
// Grid-stride over n elements; all arrays C-contiguous, of one dtype and n elements.

#include "rounding.cuh"

__device__ __forceinline__ float sqrt_(float v) { return sqrtf(v); }
__device__ __forceinline__ double sqrt_(double v) { return sqrt(v); }

// numpy.maximum: a nan on either side wins
template <class T> __device__ __forceinline__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

// wd_mode: 0 no weight decay, 1 L2 (grad + param * wd), 2 decoupled (param * decay, AdamW).
// lerp_small: exp_avg += (grad - exp_avg) * c1 (|1 - beta1| < 0.5), else
// exp_avg = (exp_avg - grad) * c1 + grad, torch's two lerp formulas. amsgrad: max_exp_avg_sq
// is kept (else it is any array of the dtype, never touched).
// param += (exp_avg / (sqrt(second) / bc2_sqrt + eps)) * neg_step_size
template <class T>
__device__ void adam(T* param, const T* __restrict__ grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                     long long n, int maximize, int wd_mode, T wd, T decay, int lerp_small, T c1, T beta2,
                     T one_minus_beta2, int amsgrad, T bc2_sqrt, T eps, T neg_step_size) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        T g = grad[i];
        if (maximize) g = -g;
        T p = param[i];
        if (wd_mode == 2) p = mul_rn(p, decay);
        else if (wd_mode == 1) g = add_rn(g, mul_rn(p, wd));
        T m = exp_avg[i];
        m = lerp_small ? add_rn(m, mul_rn(sub_rn(g, m), c1)) : add_rn(mul_rn(sub_rn(m, g), c1), g);
        const T v = add_rn(mul_rn(exp_avg_sq[i], beta2), mul_rn(mul_rn(g, one_minus_beta2), g));
        T second = v;
        if (amsgrad) {
            second = nan_max(max_exp_avg_sq[i], v);
            max_exp_avg_sq[i] = second;
        }
        const T denom = add_rn(sqrt_(second) / bc2_sqrt, eps);
        param[i] = add_rn(p, mul_rn(m / denom, neg_step_size));
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
    }
}

// d = grad (negated with maximize) (+ param * wd); with a buffer: buf = d on the first step,
// else buf * momentum + d * keep (keep = 1 - dampening); d = d + buf * momentum (nesterov) or
// buf; param += d * neg_lr. has_buffer 0: momentum_buffer is any array of the dtype, untouched.
template <class T>
__device__ void sgd(T* param, const T* __restrict__ grad, T* momentum_buffer, long long n, int maximize,
                    int has_wd, T wd, int has_buffer, int first_step, T momentum, T keep, int nesterov,
                    T neg_lr) {
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        T d = grad[i];
        if (maximize) d = -d;
        const T p = param[i];
        if (has_wd) d = add_rn(d, mul_rn(p, wd));
        if (has_buffer) {
            const T b = first_step ? d : add_rn(mul_rn(momentum_buffer[i], momentum), mul_rn(d, keep));
            momentum_buffer[i] = b;
            d = nesterov ? add_rn(d, mul_rn(b, momentum)) : b;
        }
        param[i] = add_rn(p, mul_rn(d, neg_lr));
    }
}

extern "C" __global__ void adam_step_f32(float* param, const float* __restrict__ grad, float* exp_avg,
                                         float* exp_avg_sq, float* max_exp_avg_sq, long long n, int maximize,
                                         int wd_mode, float wd, float decay, int lerp_small, float c1, float beta2,
                                         float one_minus_beta2, int amsgrad, float bc2_sqrt, float eps,
                                         float neg_step_size) {
    adam<float>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, maximize, wd_mode, wd, decay, lerp_small, c1,
                beta2, one_minus_beta2, amsgrad, bc2_sqrt, eps, neg_step_size);
}

extern "C" __global__ void adam_step_f64(double* param, const double* __restrict__ grad, double* exp_avg,
                                         double* exp_avg_sq, double* max_exp_avg_sq, long long n, int maximize,
                                         int wd_mode, double wd, double decay, int lerp_small, double c1,
                                         double beta2, double one_minus_beta2, int amsgrad, double bc2_sqrt,
                                         double eps, double neg_step_size) {
    adam<double>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, maximize, wd_mode, wd, decay, lerp_small, c1,
                 beta2, one_minus_beta2, amsgrad, bc2_sqrt, eps, neg_step_size);
}

extern "C" __global__ void sgd_step_f32(float* param, const float* __restrict__ grad, float* momentum_buffer,
                                        long long n, int maximize, int has_wd, float wd, int has_buffer,
                                        int first_step, float momentum, float keep, int nesterov, float neg_lr) {
    sgd<float>(param, grad, momentum_buffer, n, maximize, has_wd, wd, has_buffer, first_step, momentum, keep,
               nesterov, neg_lr);
}

extern "C" __global__ void sgd_step_f64(double* param, const double* __restrict__ grad, double* momentum_buffer,
                                        long long n, int maximize, int has_wd, double wd, int has_buffer,
                                        int first_step, double momentum, double keep, int nesterov,
                                        double neg_lr) {
    sgd<double>(param, grad, momentum_buffer, n, maximize, has_wd, wd, has_buffer, first_step, momentum, keep,
                nesterov, neg_lr);
}
