// scaled_dot_product_attention's forward as flash attention does it: one block per
// (batch-head, tile of QTILE queries), one thread per query, the keys and values streamed
// through shared memory KTILE rows at a time and the softmax computed online (a running max m,
// normaliser l and weighted sum acc, rescaled by exp(m_old - m_new) when the max grows), so the
// (L, S) weights never exist in memory. The op's semantics (core/ops/attention.py): scores
// (q . k_j) * scale, then -inf above the diagonal when causal (query i sees keys 0..i,
// top-left aligned), then + mask (a float additive mask; a bool one reaches here as 0 / -inf);
// weights softmax over the keys, times dropout[i, j] (0 or 1 / (1 - p)) after normalising;
// a row with no visible key gives zeros, as the NumPy kernel and torch's CPU kernel.
//
// Layout, all C-contiguous: q (B, L, E), k (B, S, E), v (B, S, Ev), mask and dropout (B, L, S)
// (has_mask / has_dropout 0: any T array, never read), out (B, L, Ev); B the flattened batch
// dims. E and Ev at most EMAX (the caller runs larger heads another way). blockDim.x must be
// QTILE; blocks walk the B * ceil(L / QTILE) tiles grid-stride.

#define QTILE 64
#define KTILE 16
#define EMAX 128

__device__ __forceinline__ float fexp(float v) { return expf(v); }
__device__ __forceinline__ double fexp(double v) { return exp(v); }
__device__ __forceinline__ void set_neg_inf(float& v) { v = -__int_as_float(0x7f800000); }
__device__ __forceinline__ void set_neg_inf(double& v) { v = -__longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ void set_nan(float& v) { v = __int_as_float(0x7fc00000); }
__device__ __forceinline__ void set_nan(double& v) { v = __longlong_as_double(0x7ff8000000000000LL); }

template <class T>
__device__ void flash_forward(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                              const T* mask, const T* dropout, T* __restrict__ out, long long batch, long long L,
                              long long S, long long E, long long Ev, T scale, int causal, int has_mask,
                              int has_dropout) {
    __shared__ T ks[KTILE * EMAX];
    __shared__ T vs[KTILE * EMAX];
    const long long tiles = (L + QTILE - 1) / QTILE;
    for (long long blk = blockIdx.x; blk < batch * tiles; blk += gridDim.x) {
        const long long b = blk / tiles, q0 = (blk - b * tiles) * QTILE;
        const long long i = q0 + threadIdx.x;
        const bool live = i < L;  // a thread past L still loads tiles and meets the barriers
        T qi[EMAX], acc[EMAX];
        T neg_inf, m, l = T(0);
        set_neg_inf(neg_inf);
        m = neg_inf;
        bool nan_row = false;
        for (long long e = 0; e < E; ++e) qi[e] = live ? q[(b * L + i) * E + e] : T(0);
        for (long long e = 0; e < Ev; ++e) acc[e] = T(0);
        // causal: the tile's last query sees keys up to it; later keys are masked for all
        const long long end = causal ? (q0 + QTILE < S ? q0 + QTILE : S) : S;
        for (long long j0 = 0; j0 < end; j0 += KTILE) {
            const long long nk = end - j0 < KTILE ? end - j0 : KTILE;
            for (long long x = threadIdx.x; x < nk * E; x += blockDim.x)
                ks[x] = k[(b * S + j0) * E + x];  // rows j0.. of k: nk * E consecutive values
            for (long long x = threadIdx.x; x < nk * Ev; x += blockDim.x) vs[x] = v[(b * S + j0) * Ev + x];
            __syncthreads();
            for (long long jj = 0; live && jj < nk; ++jj) {
                const long long j = j0 + jj;
                if (causal && j > i) break;
                T s = T(0);
                for (long long e = 0; e < E; ++e) s += qi[e] * ks[jj * E + e];
                s = s * scale;
                if (has_mask) s = s + mask[(b * L + i) * S + j];
                if (s != s) {  // a nan score: the row's result is nan, as softmax's
                    nan_row = true;
                    continue;
                }
                if (s == neg_inf) continue;  // masked out: weight 0
                const T m_new = s > m ? s : m;
                const T corr = fexp(m - m_new), p = fexp(s - m_new);
                const T pd = has_dropout ? p * dropout[(b * L + i) * S + j] : p;
                l = l * corr + p;
                for (long long e = 0; e < Ev; ++e) acc[e] = acc[e] * corr + pd * vs[jj * Ev + e];
                m = m_new;
            }
            __syncthreads();  // all have read the tile before the next one overwrites it
        }
        if (live) {
            T nan;
            set_nan(nan);
            for (long long e = 0; e < Ev; ++e)
                out[(b * L + i) * Ev + e] = nan_row ? nan : l > T(0) ? acc[e] / l : T(0);
        }
    }
}

extern "C" __global__ __launch_bounds__(QTILE) void sdpa_forward_f32(
    const float* q, const float* k, const float* v, const float* mask, const float* dropout, float* out,
    long long batch, long long L, long long S, long long E, long long Ev, float scale, int causal, int has_mask,
    int has_dropout) {
    flash_forward<float>(q, k, v, mask, dropout, out, batch, L, S, E, Ev, scale, causal, has_mask, has_dropout);
}

extern "C" __global__ __launch_bounds__(QTILE) void sdpa_forward_f64(
    const double* q, const double* k, const double* v, const double* mask, const double* dropout, double* out,
    long long batch, long long L, long long S, long long E, long long Ev, double scale, int causal, int has_mask,
    int has_dropout) {
    flash_forward<double>(q, k, v, mask, dropout, out, batch, L, S, E, Ev, scale, causal, has_mask, has_dropout);
}
