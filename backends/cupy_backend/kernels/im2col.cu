// Patches for conv2d as one GEMM with the weight, and their adjoint, as Chainer did without cuDNN.
//
// Two layouts of the same patches of an (N, C, H, W) input, each chosen so that its GEMM
// reads and writes plain contiguous matrices (no transpose copies around cuBLAS):
//   im2col: (N, C, kh, kw, OH, OW) -- per image and group a (C/G*kh*kw, OH*OW) matrix; the
//           weight's (O/G, C/G*kh*kw) times it is that image's (O/G, OH*OW) output, already NCHW.
//           The forward and the input gradient use it.
//   im2row: (G, N, OH, OW, C/G, kh, kw) -- per group an (N*OH*OW, C/G*kh*kw) matrix; the output
//           gradient's (O/G, N*OH*OW) times it is the weight gradient (O/G, C/G*kh*kw).
// Positions in the zero padding read 0. col2im is the adjoint of im2col written as a gather:
// one thread per input element sums the entries that copied it, in a fixed order (no atomics,
// the same result on every run).
//
// Geometry arguments, in this order everywhere: n, c, h, w (input), oh, ow (output positions;
// windows past them are not used), kh, kw, sh, sw (stride), ph, pw (padding), dh, dw (dilation).

template <class T>
__device__ void im2col(const T* __restrict__ x, T* __restrict__ col, long long n, long long c, long long h,
                       long long w, long long oh, long long ow, long long kh, long long kw, long long sh,
                       long long sw, long long ph, long long pw, long long dh, long long dw) {
    const long long total = n * c * kh * kw * oh * ow;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        long long r = i;
        const long long ox = r % ow; r /= ow;
        const long long oy = r % oh; r /= oh;
        const long long j = r % kw; r /= kw;
        const long long k = r % kh; r /= kh;  // r: the (image, channel) plane
        const long long y = oy * sh - ph + k * dh;
        const long long xx = ox * sw - pw + j * dw;
        col[i] = (y >= 0 && y < h && xx >= 0 && xx < w) ? x[(r * h + y) * w + xx] : T(0);
    }
}

template <class T>
__device__ void im2row(const T* __restrict__ x, T* __restrict__ row, long long groups, long long n, long long c,
                       long long h, long long w, long long oh, long long ow, long long kh, long long kw,
                       long long sh, long long sw, long long ph, long long pw, long long dh, long long dw) {
    const long long cg = c / groups;
    const long long total = n * c * kh * kw * oh * ow;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        long long r = i;
        const long long j = r % kw; r /= kw;
        const long long k = r % kh; r /= kh;
        const long long ci = r % cg; r /= cg;
        const long long ox = r % ow; r /= ow;
        const long long oy = r % oh; r /= oh;
        const long long ni = r % n;
        const long long channel = (r / n) * cg + ci;
        const long long y = oy * sh - ph + k * dh;
        const long long xx = ox * sw - pw + j * dw;
        row[i] = (y >= 0 && y < h && xx >= 0 && xx < w) ? x[((ni * c + channel) * h + y) * w + xx] : T(0);
    }
}

template <class T>
__device__ void col2im(const T* __restrict__ col, T* __restrict__ x, long long n, long long c, long long h,
                       long long w, long long oh, long long ow, long long kh, long long kw, long long sh,
                       long long sw, long long ph, long long pw, long long dh, long long dw) {
    const long long total = n * c * h * w;
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long xx = i % w;
        const long long y = (i / w) % h;
        const long long plane = i / (w * h);
        T sum = T(0);
        // (y, xx) is tap (k, j) of window (oy, ox) when y + ph - k*dh == oy*sh (and likewise for x)
        for (long long k = 0; k < kh; ++k) {
            const long long ty = y + ph - k * dh;
            if (ty < 0) break;  // larger k only lower it
            if (ty % sh != 0 || ty / sh >= oh) continue;
            const long long oy = ty / sh;
            for (long long j = 0; j < kw; ++j) {
                const long long tx = xx + pw - j * dw;
                if (tx < 0) break;
                if (tx % sw != 0 || tx / sw >= ow) continue;
                sum += col[(((plane * kh + k) * kw + j) * oh + oy) * ow + tx / sw];
            }
        }
        x[i] = sum;
    }
}

extern "C" __global__ void im2col_f32(const float* x, float* col, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    im2col(x, col, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void im2col_f64(const double* x, double* col, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    im2col(x, col, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void im2col_i64(const long long* x, long long* col, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    im2col(x, col, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void im2row_f32(const float* x, float* row, long long groups, long long n, long long c,
                                      long long h, long long w, long long oh, long long ow, long long kh,
                                      long long kw, long long sh, long long sw, long long ph, long long pw,
                                      long long dh, long long dw) {
    im2row(x, row, groups, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void im2row_f64(const double* x, double* row, long long groups, long long n, long long c,
                                      long long h, long long w, long long oh, long long ow, long long kh,
                                      long long kw, long long sh, long long sw, long long ph, long long pw,
                                      long long dh, long long dw) {
    im2row(x, row, groups, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void im2row_i64(const long long* x, long long* row, long long groups, long long n,
                                      long long c, long long h, long long w, long long oh, long long ow,
                                      long long kh, long long kw, long long sh, long long sw, long long ph,
                                      long long pw, long long dh, long long dw) {
    im2row(x, row, groups, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void col2im_f32(const float* col, float* x, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    col2im(col, x, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void col2im_f64(const double* col, double* x, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    col2im(col, x, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void col2im_i64(const long long* col, long long* x, long long n, long long c, long long h,
                                      long long w, long long oh, long long ow, long long kh, long long kw,
                                      long long sh, long long sw, long long ph, long long pw, long long dh,
                                      long long dw) {
    col2im(col, x, n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw);
}
