// cross_entropy and its input gradient, fused: log-softmax, pick, weigh and reduce without a
// host round-trip. Each formula is the NumPy kernel's (backends/numpy_backend/fused.py), in its
// order of operations; see plugtorch/core/ops/classification.py for what each term is.
//
// Layout: input C-contiguous (N, C, S) with S = d1 * d2 * ..., one row per (n, s): the C logits
// x[n * C * S + c * S + s]. Class-index targets are int64 (N, S), probability targets are
// input-shaped. Rows are walked grid-stride, one block per row, blockDim.x <= 256.
//   keep = 1 - label_smoothing, each = label_smoothing / C (rounded to T on the host),
//   smoothing = label_smoothing != 0, has_weight = a weight (C,) was given (else weight is
//   any T array, never read).
// A target outside [0, C) that is not ignore_index has no class to pick: its row's loss,
// target weight and gradient are nan (a GPU cannot raise; the front checks in debug mode).
// 'mean' divides on the device: ce_sum / ce_weighted_mean write the 0-d result (or the
// backward's scale) into a device array, read by the next kernel, never by the host.

#include "row_reduce.cuh"

__device__ __forceinline__ void set_nan(float& v) { v = __int_as_float(0x7fc00000); }
__device__ __forceinline__ void set_nan(double& v) { v = __longlong_as_double(0x7ff8000000000000LL); }

// The row's max and log of its sum of exp(x - max): logp_c = (x_c - m) - lse, as log_softmax.
template <class T>
__device__ void row_logsumexp(const T* xr, long long c, long long s, T* sh, T& m, T& lse) {
    T mx;
    set_neg_inf(mx);
    for (long long j = threadIdx.x; j < c; j += blockDim.x) mx = nan_max(mx, xr[j * s]);
    m = block_reduce(mx, sh, MaxOp());
    T e = T(-0.0);
    for (long long j = threadIdx.x; j < c; j += blockDim.x) e += fexp(xr[j * s] - m);
    lse = block_reduce(e, sh, SumOp());  // the sum itself; the caller takes the log if it needs it
}

// A class-index target's terms: its valid flag (1 or 0), weight (0 when ignored) and class.
template <class T>
__device__ __forceinline__ void target_terms(long long t, const T* weight, long long c, long long ignore_index,
                                             int has_weight, T& v, T& wt, long long& safe) {
    const bool valid = t != ignore_index;
    safe = valid ? t : 0;
    v = valid ? T(1) : T(0);
    if (safe < 0 || safe >= c) {
        set_nan(wt);
        return;
    }
    wt = has_weight ? weight[safe] * v : v;
}

template <class T>
__device__ void index_forward(const T* __restrict__ x, const long long* __restrict__ target, const T* weight,
                              T* __restrict__ loss, long long rows, long long c, long long s,
                              long long ignore_index, int has_weight, int smoothing, T keep, T each) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long n = r / s;
        const T* xr = x + n * c * s + (r - n * s);
        T m, lse;
        row_logsumexp(xr, c, s, sh, m, lse);
        lse = flog(lse);
        T lw = T(-0.0);
        if (smoothing) {  // the same for every thread: all reach the barriers
            for (long long j = threadIdx.x; j < c; j += blockDim.x) {
                const T logp = (xr[j * s] - m) - lse;
                lw += has_weight ? logp * weight[j] : logp;
            }
            lw = block_reduce(lw, sh, SumOp());
        }
        if (threadIdx.x == 0) {
            T v, wt;
            long long safe;
            target_terms(target[r], weight, c, ignore_index, has_weight, v, wt, safe);
            T out = wt;  // nan for a target out of range
            if (safe >= 0 && safe < c) {
                out = -(((xr[safe * s] - m) - lse) * wt);
                if (smoothing) out = out * keep - (lw * v) * each;
            }
            loss[r] = out;
        }
    }
}

template <class T>
__device__ void prob_forward(const T* __restrict__ x, const T* __restrict__ target, const T* weight,
                             T* __restrict__ loss, long long rows, long long c, long long s, int has_weight,
                             int smoothing, T keep, T each) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long n = r / s;
        const long long base = n * c * s + (r - n * s);
        const T* xr = x + base;
        const T* tr = target + base;
        T m, lse;
        row_logsumexp(xr, c, s, sh, m, lse);
        lse = flog(lse);
        T acc = T(-0.0);
        for (long long j = threadIdx.x; j < c; j += blockDim.x) {
            T tw = smoothing ? tr[j * s] * keep + each : tr[j * s];
            if (has_weight) tw = tw * weight[j];
            acc += ((xr[j * s] - m) - lse) * tw;
        }
        acc = block_reduce(acc, sh, SumOp());
        if (threadIdx.x == 0) loss[r] = -acc;
    }
}

// out = sum(values) / divisor: 'sum' (divisor 1), and 'mean' over N * S rows for probabilities
template <class T>
__device__ void sum_values(const T* __restrict__ values, long long n, T* __restrict__ out, T divisor) {
    __shared__ T sh[256];
    T acc = T(-0.0);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += values[i];
    acc = block_reduce(acc, sh, SumOp());
    if (threadIdx.x == 0) out[0] = acc / divisor;  // every block computes the same: any grid works
}

// out = sum(values) / (sum over rows of the targets' weights): 'mean' for class indices, the
// forward's loss (n = rows) or the backward's scale grad_output / total (n = 1). All targets
// ignored: 0 / 0 = nan, as torch.
template <class T>
__device__ void weighted_mean(const T* __restrict__ values, long long n, const long long* __restrict__ target,
                              const T* weight, T* __restrict__ out, long long rows, long long c,
                              long long ignore_index, int has_weight) {
    __shared__ T sh[256];
    T acc = T(-0.0);
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += values[i];
    acc = block_reduce(acc, sh, SumOp());
    T total = T(-0.0);
    for (long long r = threadIdx.x; r < rows; r += blockDim.x) {
        T v, wt;
        long long safe;
        target_terms(target[r], weight, c, ignore_index, has_weight, v, wt, safe);
        total += wt;
    }
    total = block_reduce(total, sh, SumOp());
    if (threadIdx.x == 0) out[0] = acc / total;
}

// dx = ((p - onehot) * wt * keep + uniform * (v * each)) * scale, uniform = p * C - 1 or
// p * sum(w) - w_c; without smoothing dx = (p - onehot) * wt * scale. scale[r * scale_stride]:
// grad_output per row ('none'), or one value ('sum'; 'mean' after weighted_mean); 0 for an
// ignored target's row.
template <class T>
__device__ void index_backward(const T* __restrict__ x, const long long* __restrict__ target, const T* weight,
                               const T* __restrict__ scale, long long scale_stride, T* __restrict__ dx,
                               long long rows, long long c, long long s, long long ignore_index, int has_weight,
                               int smoothing, T keep, T each, T classes) {
    __shared__ T sh[256];
    T wsum = T(-0.0);
    if (smoothing && has_weight) {  // weight.sum(), once per block
        for (long long j = threadIdx.x; j < c; j += blockDim.x) wsum += weight[j];
        wsum = block_reduce(wsum, sh, SumOp());
    }
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long n = r / s;
        const long long base = n * c * s + (r - n * s);
        const T* xr = x + base;
        T m, sum;
        row_logsumexp(xr, c, s, sh, m, sum);
        T v, wt;
        long long safe;
        target_terms(target[r], weight, c, ignore_index, has_weight, v, wt, safe);
        // an ignored target's row: 0 whatever the scale (mean over no targets: 1/0), as torch's
        const T sc = v != T(0) ? scale[r * scale_stride] : T(0);
        const T share = v * each;
        for (long long j = threadIdx.x; j < c; j += blockDim.x) {
            const T p = fexp(xr[j * s] - m) / sum;
            T d = (j == safe ? p - T(1) : p) * wt;
            if (smoothing) {
                const T uniform = has_weight ? p * wsum - weight[j] : p * classes - T(1);
                d = d * keep + uniform * share;
            }
            dx[base + j * s] = d * sc;
        }
    }
}

// dx = (p * sum_c tw_c - tw) * scale, tw = smoothed target times the class weights
template <class T>
__device__ void prob_backward(const T* __restrict__ x, const T* __restrict__ target, const T* weight,
                              const T* __restrict__ scale, long long scale_stride, T* __restrict__ dx,
                              long long rows, long long c, long long s, int has_weight, int smoothing, T keep,
                              T each) {
    __shared__ T sh[256];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long n = r / s;
        const long long base = n * c * s + (r - n * s);
        const T* xr = x + base;
        const T* tr = target + base;
        T m, sum;
        row_logsumexp(xr, c, s, sh, m, sum);
        T twsum = T(-0.0);
        for (long long j = threadIdx.x; j < c; j += blockDim.x) {
            T tw = smoothing ? tr[j * s] * keep + each : tr[j * s];
            twsum += has_weight ? tw * weight[j] : tw;
        }
        twsum = block_reduce(twsum, sh, SumOp());
        const T sc = scale[r * scale_stride];
        for (long long j = threadIdx.x; j < c; j += blockDim.x) {
            T tw = smoothing ? tr[j * s] * keep + each : tr[j * s];
            if (has_weight) tw = tw * weight[j];
            const T p = fexp(xr[j * s] - m) / sum;
            dx[base + j * s] = (p * twsum - tw) * sc;
        }
    }
}

extern "C" __global__ void ce_index_forward_f32(const float* __restrict__ x, const long long* __restrict__ target,
                                                const float* weight, float* __restrict__ loss, long long rows,
                                                long long c, long long s, long long ignore_index, int has_weight,
                                                int smoothing, float keep, float each) {
    index_forward<float>(x, target, weight, loss, rows, c, s, ignore_index, has_weight, smoothing, keep, each);
}

extern "C" __global__ void ce_index_forward_f64(const double* __restrict__ x, const long long* __restrict__ target,
                                                const double* weight, double* __restrict__ loss, long long rows,
                                                long long c, long long s, long long ignore_index, int has_weight,
                                                int smoothing, double keep, double each) {
    index_forward<double>(x, target, weight, loss, rows, c, s, ignore_index, has_weight, smoothing, keep, each);
}

extern "C" __global__ void ce_prob_forward_f32(const float* __restrict__ x, const float* __restrict__ target,
                                               const float* weight, float* __restrict__ loss, long long rows,
                                               long long c, long long s, int has_weight, int smoothing, float keep,
                                               float each) {
    prob_forward<float>(x, target, weight, loss, rows, c, s, has_weight, smoothing, keep, each);
}

extern "C" __global__ void ce_prob_forward_f64(const double* __restrict__ x, const double* __restrict__ target,
                                               const double* weight, double* __restrict__ loss, long long rows,
                                               long long c, long long s, int has_weight, int smoothing,
                                               double keep, double each) {
    prob_forward<double>(x, target, weight, loss, rows, c, s, has_weight, smoothing, keep, each);
}

extern "C" __global__ void ce_sum_f32(const float* __restrict__ values, long long n, float* __restrict__ out,
                                      float divisor) {
    sum_values<float>(values, n, out, divisor);
}

extern "C" __global__ void ce_sum_f64(const double* __restrict__ values, long long n, double* __restrict__ out,
                                      double divisor) {
    sum_values<double>(values, n, out, divisor);
}

extern "C" __global__ void ce_weighted_mean_f32(const float* __restrict__ values, long long n,
                                                const long long* __restrict__ target, const float* weight,
                                                float* __restrict__ out, long long rows, long long c,
                                                long long ignore_index, int has_weight) {
    weighted_mean<float>(values, n, target, weight, out, rows, c, ignore_index, has_weight);
}

extern "C" __global__ void ce_weighted_mean_f64(const double* __restrict__ values, long long n,
                                                const long long* __restrict__ target, const double* weight,
                                                double* __restrict__ out, long long rows, long long c,
                                                long long ignore_index, int has_weight) {
    weighted_mean<double>(values, n, target, weight, out, rows, c, ignore_index, has_weight);
}

extern "C" __global__ void ce_index_backward_f32(const float* __restrict__ x, const long long* __restrict__ target,
                                                 const float* weight, const float* __restrict__ scale,
                                                 long long scale_stride, float* __restrict__ dx, long long rows,
                                                 long long c, long long s, long long ignore_index, int has_weight,
                                                 int smoothing, float keep, float each, float classes) {
    index_backward<float>(x, target, weight, scale, scale_stride, dx, rows, c, s, ignore_index, has_weight,
                          smoothing, keep, each, classes);
}

extern "C" __global__ void ce_index_backward_f64(const double* __restrict__ x,
                                                 const long long* __restrict__ target, const double* weight,
                                                 const double* __restrict__ scale, long long scale_stride,
                                                 double* __restrict__ dx, long long rows, long long c, long long s,
                                                 long long ignore_index, int has_weight, int smoothing, double keep,
                                                 double each, double classes) {
    index_backward<double>(x, target, weight, scale, scale_stride, dx, rows, c, s, ignore_index, has_weight,
                           smoothing, keep, each, classes);
}

extern "C" __global__ void ce_prob_backward_f32(const float* __restrict__ x, const float* __restrict__ target,
                                                const float* weight, const float* __restrict__ scale,
                                                long long scale_stride, float* __restrict__ dx, long long rows,
                                                long long c, long long s, int has_weight, int smoothing,
                                                float keep, float each) {
    prob_backward<float>(x, target, weight, scale, scale_stride, dx, rows, c, s, has_weight, smoothing, keep, each);
}

extern "C" __global__ void ce_prob_backward_f64(const double* __restrict__ x, const double* __restrict__ target,
                                                const double* weight, const double* __restrict__ scale,
                                                long long scale_stride, double* __restrict__ dx, long long rows,
                                                long long c, long long s, int has_weight, int smoothing,
                                                double keep, double each) {
    prob_backward<double>(x, target, weight, scale, scale_stride, dx, rows, c, s, has_weight, smoothing, keep,
                          each);
}
