// max_pool2d and its backward, as plugtorch's decomposition defines them (core/ops/pooling.py).
//
// Forward: each window's running maximum, NaN-propagating; positions in the padding or past
// the input (a ceil_mode window that overhangs) hold `lowest` (-inf, or an integer type's
// minimum), so they only win a window that has nothing larger.
// Backward, from (grad_output, input, output) as the op receives them, in two passes:
//   max_pool2d_first_max: per window, the first tap (row-major, padding included) whose value
//       equals the output, or where the output is NaN the last NaN tap (torch's kernels move
//       the index to every NaN), as tap index k*kw + j; -1 where none does;
//   max_pool2d_bwd: a gather, one thread per input element summing grad_output * (hit ? 1 : 0)
//       over the windows that cover it, in a fixed order (no atomics). The multiply, not a
//       select, is the decomposition's: an inf or NaN output gradient reaches every covered
//       element as NaN.
//
// Geometry arguments, in this order everywhere: planes (N*C), h, w (input), oh, ow (output),
// kh, kw, sh, sw (stride), ph, pw (padding), dh, dw (dilation).

__device__ __forceinline__ bool is_nan(float v) { return v != v; }
__device__ __forceinline__ bool is_nan(double v) { return v != v; }
__device__ __forceinline__ bool is_nan(int) { return false; }
__device__ __forceinline__ bool is_nan(long long) { return false; }

template <class T>
__device__ void max_pool2d_fwd(const T* __restrict__ x, T* __restrict__ y, T lowest, long long planes,
                               long long h, long long w, long long oh, long long ow, long long kh, long long kw,
                               long long sh, long long sw, long long ph, long long pw, long long dh,
                               long long dw) {
    const long long total = planes * oh * ow;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long ox = i % ow;
        const long long oy = (i / ow) % oh;
        const T* plane = x + (i / (ow * oh)) * h * w;
        T m = lowest;
        for (long long k = 0; k < kh; ++k) {
            const long long yy = oy * sh - ph + k * dh;
            for (long long j = 0; j < kw; ++j) {
                const long long xx = ox * sw - pw + j * dw;
                const T v = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? plane[yy * w + xx] : lowest;
                if (v > m || is_nan(v)) m = v;  // once m is NaN nothing replaces it but another NaN
            }
        }
        y[i] = m;
    }
}

template <class T>
__device__ void max_pool2d_first_max(const T* __restrict__ x, const T* __restrict__ y, int* __restrict__ first,
                                     T lowest, long long planes, long long h, long long w, long long oh,
                                     long long ow, long long kh, long long kw, long long sh, long long sw,
                                     long long ph, long long pw, long long dh, long long dw) {
    const long long total = planes * oh * ow;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long ox = i % ow;
        const long long oy = (i / ow) % oh;
        const T* plane = x + (i / (ow * oh)) * h * w;
        const T target = y[i];
        const bool nan = is_nan(target);
        int hit = -1;
        for (long long k = 0; k < kh && (nan || hit < 0); ++k) {
            const long long yy = oy * sh - ph + k * dh;
            for (long long j = 0; j < kw; ++j) {
                const long long xx = ox * sw - pw + j * dw;
                const T v = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? plane[yy * w + xx] : lowest;
                if (nan ? is_nan(v) : v == target) {
                    hit = (int)(k * kw + j);
                    if (!nan) break;
                }
            }
        }
        first[i] = hit;
    }
}

template <class T>
__device__ void max_pool2d_bwd(const T* __restrict__ grad_output, const int* __restrict__ first,
                               T* __restrict__ grad_input, long long planes, long long h, long long w,
                               long long oh, long long ow, long long kh, long long kw, long long sh, long long sw,
                               long long ph, long long pw, long long dh, long long dw) {
    const long long total = planes * h * w;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long xx = i % w;
        const long long yy = (i / w) % h;
        const long long base = (i / (w * h)) * oh * ow;
        T sum = T(0);
        // (yy, xx) is tap (k, j) of window (oy, ox) when yy + ph - k*dh == oy*sh (and likewise for x)
        for (long long k = 0; k < kh; ++k) {
            const long long ty = yy + ph - k * dh;
            if (ty < 0) break;  // larger k only lower it
            if (ty % sh != 0 || ty / sh >= oh) continue;
            for (long long j = 0; j < kw; ++j) {
                const long long tx = xx + pw - j * dw;
                if (tx < 0) break;
                if (tx % sw != 0 || tx / sw >= ow) continue;
                const long long o = base + (ty / sh) * ow + tx / sw;
                sum += grad_output[o] * T(first[o] == k * kw + j ? 1 : 0);
            }
        }
        grad_input[i] = sum;
    }
}

extern "C" __global__ void max_pool2d_fwd_f32(const float* x, float* y, float lowest, long long planes, long long h,
                                              long long w, long long oh, long long ow, long long kh, long long kw,
                                              long long sh, long long sw, long long ph, long long pw, long long dh,
                                              long long dw) {
    max_pool2d_fwd(x, y, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_fwd_f64(const double* x, double* y, double lowest, long long planes,
                                              long long h, long long w, long long oh, long long ow, long long kh,
                                              long long kw, long long sh, long long sw, long long ph, long long pw,
                                              long long dh, long long dw) {
    max_pool2d_fwd(x, y, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_fwd_i32(const int* x, int* y, int lowest, long long planes, long long h,
                                              long long w, long long oh, long long ow, long long kh, long long kw,
                                              long long sh, long long sw, long long ph, long long pw, long long dh,
                                              long long dw) {
    max_pool2d_fwd(x, y, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_fwd_i64(const long long* x, long long* y, long long lowest, long long planes,
                                              long long h, long long w, long long oh, long long ow, long long kh,
                                              long long kw, long long sh, long long sw, long long ph, long long pw,
                                              long long dh, long long dw) {
    max_pool2d_fwd(x, y, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_first_max_f32(const float* x, const float* y, int* first, float lowest,
                                                    long long planes, long long h, long long w, long long oh,
                                                    long long ow, long long kh, long long kw, long long sh,
                                                    long long sw, long long ph, long long pw, long long dh,
                                                    long long dw) {
    max_pool2d_first_max(x, y, first, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_first_max_f64(const double* x, const double* y, int* first, double lowest,
                                                    long long planes, long long h, long long w, long long oh,
                                                    long long ow, long long kh, long long kw, long long sh,
                                                    long long sw, long long ph, long long pw, long long dh,
                                                    long long dw) {
    max_pool2d_first_max(x, y, first, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_first_max_i32(const int* x, const int* y, int* first, int lowest,
                                                    long long planes, long long h, long long w, long long oh,
                                                    long long ow, long long kh, long long kw, long long sh,
                                                    long long sw, long long ph, long long pw, long long dh,
                                                    long long dw) {
    max_pool2d_first_max(x, y, first, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_first_max_i64(const long long* x, const long long* y, int* first,
                                                    long long lowest, long long planes, long long h, long long w,
                                                    long long oh, long long ow, long long kh, long long kw,
                                                    long long sh, long long sw, long long ph, long long pw,
                                                    long long dh, long long dw) {
    max_pool2d_first_max(x, y, first, lowest, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_bwd_f32(const float* grad_output, const int* first, float* grad_input,
                                              long long planes, long long h, long long w, long long oh, long long ow,
                                              long long kh, long long kw, long long sh, long long sw, long long ph,
                                              long long pw, long long dh, long long dw) {
    max_pool2d_bwd(grad_output, first, grad_input, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_bwd_f64(const double* grad_output, const int* first, double* grad_input,
                                              long long planes, long long h, long long w, long long oh, long long ow,
                                              long long kh, long long kw, long long sh, long long sw, long long ph,
                                              long long pw, long long dh, long long dw) {
    max_pool2d_bwd(grad_output, first, grad_input, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void max_pool2d_bwd_i64(const long long* grad_output, const int* first, long long* grad_input,
                                              long long planes, long long h, long long w, long long oh, long long ow,
                                              long long kh, long long kw, long long sh, long long sw, long long ph,
                                              long long pw, long long dh, long long dw) {
    max_pool2d_bwd(grad_output, first, grad_input, planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}
