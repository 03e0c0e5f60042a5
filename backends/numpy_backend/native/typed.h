/* The loops of _kernels.c, written once over an element type: _kernels.c includes this file
 * twice, with T float and SUFFIX f, then T double and SUFFIX d. Strides are in elements. */

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

/* -- max_pool2d ------------------------------------------------------------------------------- */

/* One plane's windows: the running NumPy maximum over its offsets, row-major, a padding
 * position counting as -inf (the decomposition's np.maximum chain over the window view). */
static void FN(pool_fwd_plane)(const T *x, Py_ssize_t xh, Py_ssize_t xw, Py_ssize_t h, Py_ssize_t w,
                               T *y, Py_ssize_t yh, Py_ssize_t yw, Py_ssize_t oh, Py_ssize_t ow, const Geometry *g)
{
    if (IS_2X2(g) && xw == 1 && 2 * oh <= h && 2 * ow <= w) {  /* MaxPool2d(2), no window overhangs */
        for (Py_ssize_t oy = 0; oy < oh; oy++) {
            const T *r0 = x + 2 * oy * xh, *r1 = r0 + xh;
            T *out = y + oy * yh;
            for (Py_ssize_t ox = 0; ox < ow; ox++) {
                T m = NP_MAX(r0[2 * ox], r0[2 * ox + 1]);
                m = NP_MAX(m, r1[2 * ox]);
                out[ox * yw] = NP_MAX(m, r1[2 * ox + 1]);
            }
        }
        return;
    }
    for (Py_ssize_t oy = 0; oy < oh; oy++)
        for (Py_ssize_t ox = 0; ox < ow; ox++) {
            Py_ssize_t r0 = oy * g->sh - g->ph, c0 = ox * g->sw - g->pw;
            T m = 0;
            for (Py_ssize_t i = 0; i < g->kh; i++)
                for (Py_ssize_t j = 0; j < g->kw; j++) {
                    Py_ssize_t r = r0 + i * g->dh, c = c0 + j * g->dw;
                    T v = (r < 0 || r >= h || c < 0 || c >= w) ? (T)-INFINITY : x[r * xh + c * xw];
                    m = (i == 0 && j == 0) ? v : NP_MAX(m, v);
                }
            y[oy * yh + ox * yw] = m;
        }
}

/* One plane's gradient: each window's to its first element equal to the window's output
 * (row-major; a padding position, -inf, can take it and drop it), or to its last NaN where
 * the output is NaN (torch's kernels move the index to every NaN), as the NumPy kernel's
 * comparisons route it; the other positions get 0. Where windows overlap, a position's shares
 * are added offset by offset, the NumPy kernel's order. `first` (oh * ow) holds each window's
 * winning offset. */
static void FN(pool_bwd_plane)(const T *gy, Py_ssize_t gh, Py_ssize_t gw, const T *x, Py_ssize_t xh,
                               Py_ssize_t xw, Py_ssize_t h, Py_ssize_t w, const T *y, Py_ssize_t yh,
                               Py_ssize_t yw, Py_ssize_t oh, Py_ssize_t ow, T *dx, Py_ssize_t dh_,
                               Py_ssize_t dw_, const Geometry *g, Py_ssize_t *first)
{
    if (IS_2X2(g) && xw == 1 && dw_ == 1 && 2 * oh <= h && 2 * ow <= w) {  /* MaxPool2d(2), inside */
        int nan_plane = 0;
        for (Py_ssize_t oy = 0; oy < oh; oy++) {
            const T *r0 = x + 2 * oy * xh, *r1 = r0 + xh;
            T *d0 = dx + 2 * oy * dh_, *d1 = d0 + dh_;
            for (Py_ssize_t ox = 0; ox < ow; ox++) {
                T m = y[oy * yh + ox * yw], share = gy[oy * gh + ox * gw];
                /* bitwise, not &&: which element wins is data, and branches on it mispredict */
                int a = r0[2 * ox] == m, b = (r0[2 * ox + 1] == m) & !a;
                int c = (r1[2 * ox] == m) & !(a | b), d = (r1[2 * ox + 1] == m) & !(a | b | c);
                nan_plane |= m != m;
                d0[2 * ox] = a ? share : 0;
                d0[2 * ox + 1] = b ? share : 0;
                d1[2 * ox] = c ? share : 0;
                d1[2 * ox + 1] = d ? share : 0;
            }
            if (w > 2 * ow)  /* an odd width: the last column is in no window */
                d0[w - 1] = d1[w - 1] = 0;
        }
        /* A NaN maximum equals nothing above; its window's share goes to the window's last NaN,
         * as in torch (see `first` below). In a pass of its own, taken only by a plane with a
         * NaN window: handled inside the loop above, the NaN cases cost it 7-20 % of its speed
         * (float32 (64, 32, 14, 14) and (64, 16, 28, 28)); this way, 0-9 %. */
        for (Py_ssize_t oy = 0; nan_plane && oy < oh; oy++) {
            const T *r0 = x + 2 * oy * xh, *r1 = r0 + xh;
            T *d0 = dx + 2 * oy * dh_, *d1 = d0 + dh_;
            for (Py_ssize_t ox = 0; ox < ow; ox++) {
                T m = y[oy * yh + ox * yw];
                if (m == m)
                    continue;
                T *last = r1[2 * ox + 1] != r1[2 * ox + 1] ? d1 + 2 * ox + 1
                        : r1[2 * ox] != r1[2 * ox] ? d1 + 2 * ox
                        : r0[2 * ox + 1] != r0[2 * ox + 1] ? d0 + 2 * ox + 1
                        : r0[2 * ox] != r0[2 * ox] ? d0 + 2 * ox : NULL;
                if (last)
                    *last = gy[oy * gh + ox * gw];
            }
        }
        for (Py_ssize_t r = 2 * oh; r < h; r++)  /* an odd height: the last row likewise */
            for (Py_ssize_t c = 0; c < w; c++)
                dx[r * dh_ + c] = 0;
        return;
    }
    for (Py_ssize_t r = 0; r < h; r++)
        for (Py_ssize_t c = 0; c < w; c++)
            dx[r * dh_ + c * dw_] = 0;
    for (Py_ssize_t oy = 0; oy < oh; oy++)
        for (Py_ssize_t ox = 0; ox < ow; ox++) {
            Py_ssize_t r0 = oy * g->sh - g->ph, c0 = ox * g->sw - g->pw, found = -1;
            T m = y[oy * yh + ox * yw];
            int nan = m != m;
            for (Py_ssize_t i = 0; i < g->kh && (nan || found < 0); i++)
                for (Py_ssize_t j = 0; j < g->kw; j++) {
                    Py_ssize_t r = r0 + i * g->dh, c = c0 + j * g->dw;
                    T v = (r < 0 || r >= h || c < 0 || c >= w) ? (T)-INFINITY : x[r * xh + c * xw];
                    if (nan ? v != v : v == m) {
                        found = i * g->kw + j;
                        if (!nan)
                            break;
                    }
                }
            first[oy * ow + ox] = found;
        }
    int disjoint = DISJOINT(g);
    for (Py_ssize_t k = 0; k < (disjoint ? 1 : g->kh * g->kw); k++)
        for (Py_ssize_t oy = 0; oy < oh; oy++)
            for (Py_ssize_t ox = 0; ox < ow; ox++) {
                Py_ssize_t f = first[oy * ow + ox];
                if (f < 0 || (!disjoint && f != k))
                    continue;
                Py_ssize_t r = oy * g->sh - g->ph + (f / g->kw) * g->dh;
                Py_ssize_t c = ox * g->sw - g->pw + (f % g->kw) * g->dw;
                if (r < 0 || r >= h || c < 0 || c >= w)
                    continue;
                dx[r * dh_ + c * dw_] += gy[oy * gh + ox * gw];
            }
}

/* -- adam_step_ ------------------------------------------------------------------------------- */

/* fused_optim.adam_step_'s ufuncs, element by element, each result rounded to T in the same
 * order; the constants arrive as the Python kernel computes them and are rounded to T once,
 * as its dt(...) calls do. The options are read into locals first: read through `k` inside the
 * loop, they could alias the stores, and the loop would not vectorise (AdamW's decoupled weight
 * decay ran at 3.7 ns an element, the plain loop at 0.5). What each option selects is then a
 * loop-invariant select the compiler if-converts; AMSGrad's extra store is a constant `amsgrad`
 * of the always-inlined loop, so each of its two copies has no branch (and a call out of the
 * VECTOR_CLONES kernel would run the baseline ISA's copy). */
static inline __attribute__((always_inline)) void FN(adam_loop)(T *restrict p, const T *restrict gr, T *restrict m,
                                                                T *restrict v, T *restrict vmax, Py_ssize_t n,
                                                                const AdamConsts *k, const int amsgrad)
{
    const T decay = (T)k->decay, wd = (T)k->weight_decay, wt = (T)k->weight, omw = (T)k->one_minus_weight;
    const T b2 = (T)k->beta2, omb2 = (T)k->one_minus_beta2, bias2 = (T)k->bias2, eps = (T)k->eps;
    const T step_size = (T)k->step_size;
    const int maximize = k->maximize, small = k->small_weight;
    const int decoupled = k->weight_decay != 0 && k->decoupled, coupled = k->weight_decay != 0 && !k->decoupled;
    for (Py_ssize_t i = 0; i < n; i++) {
        T g = maximize ? -gr[i] : gr[i];
        T pi = decoupled ? p[i] * decay : p[i];
        g = coupled ? g + pi * wd : g;
        T mi = small ? m[i] + (g - m[i]) * wt : ((m[i] - g) * omw) + g;
        T vi = v[i] * b2 + (g * omb2) * g;
        T second = vi;
        if (amsgrad) {
            second = NP_MAX(vmax[i], vi);
            vmax[i] = second;
        }
        p[i] = pi + (mi / (SQRT(second) / bias2 + eps)) * step_size;
        m[i] = mi;
        v[i] = vi;
    }
}

VECTOR_CLONES static void FN(adam)(T *restrict p, const T *restrict gr, T *restrict m, T *restrict v, T *restrict vmax,
                     Py_ssize_t n, const AdamConsts *k)
{
    if (vmax)
        FN(adam_loop)(p, gr, m, v, vmax, n, k, 1);
    else
        FN(adam_loop)(p, gr, m, v, NULL, n, k, 0);
}

/* -- relu ------------------------------------------------------------------------------------ */

/* max(x, 0) as torch's relu gives it: 0 where x < 0, else x (so nan stays nan and -0 stays -0).
 * A select, which vectorises. */
static void FN(relu)(const T *restrict x, T *restrict out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        T v = x[i];
        out[i] = v < 0 ? 0 : v;
    }
}

/* -- erf, gelu, gelu_backward ----------------------------------------------------------------- */

/* The error function, which NumPy has no ufunc for: libm's, a block at a time (_kernels.c). */
static void FN(erf)(const T *restrict x, T *restrict out, Py_ssize_t n)
{
    FN(erf_block)(x, out, n);
}

#define GELU_BLOCK 256 /* elements per stack buffer: the block functions run over whole buffers */

/* x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), or with `tanh_form` torch's approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): one pass where the decomposition makes five. */
VECTOR_CLONES static void FN(gelu)(const T *restrict x, T *restrict out, Py_ssize_t n, int tanh_form)
{
    T b[GELU_BLOCK];
    for (Py_ssize_t s = 0; s < n; s += GELU_BLOCK) {
        Py_ssize_t m = n - s < GELU_BLOCK ? n - s : GELU_BLOCK;
        const T *xs = x + s;
        if (tanh_form) {
            for (Py_ssize_t i = 0; i < m; i++)
                b[i] = (T)0.7978845608028654 * (xs[i] + (T)0.044715 * xs[i] * xs[i] * xs[i]);
            FN(tanh_block)(b, b, m);
        } else {
            for (Py_ssize_t i = 0; i < m; i++)
                b[i] = xs[i] * (T)0.7071067811865476;
            FN(erf_block)(b, b, m);
        }
        for (Py_ssize_t i = 0; i < m; i++)
            out[s + i] = (T)0.5 * xs[i] * ((T)1 + b[i]);
    }
}

/* grad * gelu'(x): Phi(x) + x phi(x), or the tanh form's derivative
 * 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
VECTOR_CLONES static void FN(gelu_bwd)(const T *restrict g, const T *restrict x, T *restrict out, Py_ssize_t n,
                                       int tanh_form)
{
    T b[GELU_BLOCK], e[GELU_BLOCK];
    for (Py_ssize_t s = 0; s < n; s += GELU_BLOCK) {
        Py_ssize_t m = n - s < GELU_BLOCK ? n - s : GELU_BLOCK;
        const T *xs = x + s, *gs = g + s;
        if (tanh_form) {
            for (Py_ssize_t i = 0; i < m; i++)
                b[i] = (T)0.7978845608028654 * (xs[i] + (T)0.044715 * xs[i] * xs[i] * xs[i]);
            FN(tanh_block)(b, b, m);
            for (Py_ssize_t i = 0; i < m; i++) {
                T v = xs[i], t = b[i];
                T dinner = ((T)0.134145 * v * v + (T)1) * (T)0.7978845608028654;
                out[s + i] = gs[i] * ((T)0.5 * (t + (T)1) + (T)0.5 * v * ((T)1 - t * t) * dinner);
            }
        } else {
            for (Py_ssize_t i = 0; i < m; i++) {
                b[i] = xs[i] * (T)0.7071067811865476;
                e[i] = xs[i] * xs[i] * (T)-0.5;
            }
            FN(erf_block)(b, b, m);
            FN(exp_block)(e, e, m);
            for (Py_ssize_t i = 0; i < m; i++)
                out[s + i] = gs[i] * ((T)0.5 * (b[i] + (T)1) + xs[i] * e[i] * (T)0.3989422804014327);
        }
    }
}

/* -- layer_norm -------------------------------------------------------------------------------- */

#ifndef PLUGTORCH_V8D
#define PLUGTORCH_V8D
/* eight doubles as one value of GCC's vector extension: a zmm, two ymm or four xmm registers by
 * the clone's ISA, the same bits on each (lane-wise arithmetic, no FMA contraction). The helpers
 * are always inlined into the clones, so GCC's note on passing 64-byte vectors by value is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
static inline __attribute__((always_inline)) v8d v8d_of_f(const float *p)
{
    v8f f;
    memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, v8d);
}
static inline __attribute__((always_inline)) v8d v8d_of_d(const double *p)
{
    v8d d;
    memcpy(&d, p, sizeof d);
    return d;
}
static inline __attribute__((always_inline)) double v8d_total(v8d v)
{
    double s = 0;
    for (int i = 0; i < 8; i++)
        s += v[i];
    return s;
}
#endif
#define LOAD8 CAT(v8d_of, SUFFIX)

/* One row's mean and 1 / sqrt(biased variance + eps), in double, the variance from the centred
 * values (two passes: no cancellation); eight partial sums, which the compiler keeps in a
 * vector register. */
static inline void FN(ln_stats)(const T *restrict x, Py_ssize_t n, double eps, double *mean, double *rstd)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s = 0;
    Py_ssize_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += (double)x[j + k];
    for (; j < n; j++)
        s += (double)x[j];
    for (int k = 0; k < 8; k++)
        s += acc[k];
    double m = s / (double)n;
    double sq[8] = {0, 0, 0, 0, 0, 0, 0, 0}, v = 0;
    for (j = 0; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) {
            double d = (double)x[j + k] - m;
            sq[k] += d * d;
        }
    for (; j < n; j++) {
        double d = (double)x[j] - m;
        v += d * d;
    }
    for (int k = 0; k < 8; k++)
        v += sq[k];
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)n + eps);
}

/* The shifted sums of float32 layer_norm and batch_norm (ln_moments, bn_moments): added to
 * s[0..3] (one vector lane each) and t[0..3] (the tail past whole vectors) over p[0..len), the
 * sums of d = p - x0 and d^2, and with gp those of gy = gp * w (or gp, w NULL) and gy * d. Always
 * inlined: a call out of a VECTOR_CLONES kernel would run the baseline ISA's copy. */
static inline __attribute__((always_inline)) void FN(shifted_sums)(const T *p, const T *gp, const T *w,
                                                                   Py_ssize_t len, double x0, v8d *s, double *t)
{
    Py_ssize_t whole = len - len % 8, k;
    if (gp) {
        for (k = 0; k < whole; k += 8) {
            v8d d = LOAD8(p + k) - x0, gy = w ? LOAD8(gp + k) * LOAD8(w + k) : LOAD8(gp + k);
            s[0] += d, s[1] += d * d, s[2] += gy, s[3] += gy * d;
        }
        for (; k < len; k++) {
            double d = (double)p[k] - x0, gy = w ? (double)gp[k] * (double)w[k] : (double)gp[k];
            t[0] += d, t[1] += d * d, t[2] += gy, t[3] += gy * d;
        }
    } else {
        for (k = 0; k < whole; k += 8) {
            v8d d = LOAD8(p + k) - x0;
            s[0] += d, s[1] += d * d;
        }
        for (; k < len; k++) {
            double d = (double)p[k] - x0;
            t[0] += d, t[1] += d * d;
        }
    }
}

/* From count elements' shifted sums: mean = x0 + sum(d) / count, the biased variance
 * (sum(d^2) - sum(d)^2 / count) / count, and with g sum(gy) and sum(gy * (x - mean)) =
 * sum(gy * d) - sum(d) / count * sum(gy). The subtractions lose (mean - x0)^2 / var times
 * double's rounding (unshifted it would be mean^2 / var, unbounded): the callers pick x0 to
 * bound that ratio. */
static inline __attribute__((always_inline)) void FN(shifted_moments)(const v8d *s, const double *t, double x0,
                                                                      double count, int with_g, double *mean,
                                                                      double *var, double *sg, double *sgx)
{
    double sd = v8d_total(s[0]) + t[0], shift = sd / count, centred = v8d_total(s[1]) + t[1] - sd * shift;
    *mean = x0 + shift;
    *var = (centred > 0 ? centred : 0) / count;
    if (with_g) {
        *sg = v8d_total(s[2]) + t[2];
        *sgx = v8d_total(s[3]) + t[3] - shift * *sg;
    }
}

/* A float32 row's mean and rstd, and with g its sums of gy = g * w (or g) and of gy * (x - mean),
 * in one pass where ln_stats and ln_bwd's sums take four; x0 the row's first element, which keeps
 * (mean - x0)^2 / var within n. */
static inline __attribute__((always_inline)) void FN(ln_moments)(const T *x, const T *g, const T *w, Py_ssize_t n,
                                                                 double eps, double *mean, double *rstd, double *sg,
                                                                 double *sgx)
{
    double x0 = n ? (double)x[0] : 0, t[4] = {0, 0, 0, 0}, var;
    v8d s[4] = {{0}, {0}, {0}, {0}};
    FN(shifted_sums)(x, g, w, n, x0, s, t);
    FN(shifted_moments)(s, t, x0, (double)n, g != NULL, mean, &var, sg, sgx);
    *rstd = 1.0 / sqrt(var + eps);
}

/* float32 rows go through ln_moments' one pass; float64 keeps ln_stats' two passes */
#define LN_ONE_PASS (sizeof(T) == sizeof(float))

/* rows [lo, hi) of (x - mean) * rstd * w + b (w, b may be NULL), each row of n elements; the
 * layer_norm kernels in wider vectors where the CPU has them (VECTOR_CLONES: the same bits) */
VECTOR_CLONES static void FN(ln_fwd)(const T *x, const T *w, const T *b, T *out, Py_ssize_t lo, Py_ssize_t hi,
                                     Py_ssize_t n, double eps)
{
    for (Py_ssize_t r = lo; r < hi; r++) {
        const T *xr = x + r * n;
        T *o = out + r * n;
        double m, rs;
        if (LN_ONE_PASS)
            FN(ln_moments)(xr, NULL, NULL, n, eps, &m, &rs, NULL, NULL);
        else
            FN(ln_stats)(xr, n, eps, &m, &rs);
        T tm = (T)m, tr = (T)rs;
        for (Py_ssize_t j = 0; j < n; j++) {
            T v = (xr[j] - tm) * tr;
            if (w)
                v *= w[j];
            if (b)
                v += b[j];
            o[j] = v;
        }
    }
}

/* one row's input gradient into o: with gy = g * w (or g), xc = x - mean,
 * rstd * gy - xc * (rstd^3 * mean(gy * xc)) - rstd * mean(gy); float32 takes the statistics and
 * both sums from ln_moments' one pass, float64 from ln_stats and two more loops, eight partial sums
 * each (a running sum is a chain of dependent adds, 1.4x the time). The row's mean and rstd go to
 * *mean and *rstd. Always inlined into the clones that call it. */
static inline __attribute__((always_inline)) void FN(ln_bwd_row)(const T *gr, const T *xr, const T *w, T *o,
                                                                 Py_ssize_t n, double eps, double *mean,
                                                                 double *rstd)
{
    double m, rs, a = 0, bsum = 0, a8[8] = {0, 0, 0, 0, 0, 0, 0, 0}, b8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Py_ssize_t j;
    if (LN_ONE_PASS)
        FN(ln_moments)(xr, gr, w, n, eps, &m, &rs, &a, &bsum);
    else {
        FN(ln_stats)(xr, n, eps, &m, &rs);
        Py_ssize_t whole = n - n % 8;
        j = 0;
        /* one loop per sum: GCC vectorises each (two sums in one loop stayed scalar) */
        if (w) {
            for (j = 0; j < whole; j += 8)
                for (int k = 0; k < 8; k++)
                    a8[k] += (double)gr[j + k] * (double)w[j + k];
            for (j = 0; j < whole; j += 8)
                for (int k = 0; k < 8; k++)
                    b8[k] += (double)gr[j + k] * (double)w[j + k] * ((double)xr[j + k] - m);
        } else {
            for (j = 0; j < whole; j += 8)
                for (int k = 0; k < 8; k++)
                    a8[k] += (double)gr[j + k];
            for (j = 0; j < whole; j += 8)
                for (int k = 0; k < 8; k++)
                    b8[k] += (double)gr[j + k] * ((double)xr[j + k] - m);
        }
        for (; j < n; j++) {
            double gy = w ? (double)gr[j] * (double)w[j] : (double)gr[j];
            a += gy;
            bsum += gy * ((double)xr[j] - m);
        }
        for (int k = 0; k < 8; k++)
            a += a8[k], bsum += b8[k];
    }
    T tr = (T)rs, tm = (T)m;
    T cb = (T)(bsum / (double)n * rs * rs * rs), cc = (T)(a / (double)n * rs);
    if (w)
        for (j = 0; j < n; j++)
            o[j] = gr[j] * w[j] * tr - (xr[j] - tm) * cb - cc;
    else
        for (j = 0; j < n; j++)
            o[j] = gr[j] * tr - (xr[j] - tm) * cb - cc;
    *mean = m, *rstd = rs;
}

/* rows [lo, hi) of the input gradient (ln_bwd_row) */
VECTOR_CLONES static void FN(ln_bwd)(const T *g, const T *x, const T *w, T *gx, Py_ssize_t lo, Py_ssize_t hi,
                                     Py_ssize_t n, double eps)
{
    for (Py_ssize_t r = lo; r < hi; r++) {
        double m, rs;
        FN(ln_bwd_row)(g + r * n, x + r * n, w, gx + r * n, n, eps, &m, &rs);
    }
}

/* rows [lo, hi) of all three gradients in one pass over g and x: the input's rows (ln_bwd_row), and
 * the rows' terms of the weight's, g * (x - mean) * rstd, and of the bias's, g, added in row order
 * into accw and accb (n doubles each; the weight's terms as ln_wgrad's). Four rows at a time add
 * their terms to each column's sums in registers: loading and storing the sums for every row took
 * as long as the rows' arithmetic. */
VECTOR_CLONES static void FN(ln_bwd_all)(const T *g, const T *x, const T *w, T *gx, double *accw, double *accb,
                                         Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n, double eps)
{
    Py_ssize_t r = lo;
    for (; r + 4 <= hi; r += 4) {
        const T *x0 = x + r * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
        const T *g0 = g + r * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
        double m[4], rs[4];
        for (int q = 0; q < 4; q++)
            FN(ln_bwd_row)(g0 + q * n, x0 + q * n, w, gx + (r + q) * n, n, eps, &m[q], &rs[q]);
        for (Py_ssize_t j = 0; j < n; j++) {
            double aw = accw[j], ab = accb[j];
            aw += (double)g0[j] * (((double)x0[j] - m[0]) * rs[0]), ab += (double)g0[j];
            aw += (double)g1[j] * (((double)x1[j] - m[1]) * rs[1]), ab += (double)g1[j];
            aw += (double)g2[j] * (((double)x2[j] - m[2]) * rs[2]), ab += (double)g2[j];
            aw += (double)g3[j] * (((double)x3[j] - m[3]) * rs[3]), ab += (double)g3[j];
            accw[j] = aw, accb[j] = ab;
        }
    }
    for (; r < hi; r++) {
        const T *xr = x + r * n, *gr = g + r * n;
        double m, rs;
        FN(ln_bwd_row)(gr, xr, w, gx + r * n, n, eps, &m, &rs);
        for (Py_ssize_t j = 0; j < n; j++) {
            accw[j] += (double)gr[j] * (((double)xr[j] - m) * rs);
            accb[j] += (double)gr[j];
        }
    }
}

/* the weight's gradient: sum over the rows of g * (x - mean) * rstd, into acc (n doubles) */
VECTOR_CLONES static void FN(ln_wgrad)(const T *g, const T *x, double *acc, Py_ssize_t rows, Py_ssize_t n, double eps)
{
    for (Py_ssize_t r = 0; r < rows; r++) {
        const T *xr = x + r * n, *gr = g + r * n;
        double m, rs;
        if (LN_ONE_PASS)
            FN(ln_moments)(xr, NULL, NULL, n, eps, &m, &rs, NULL, NULL);
        else
            FN(ln_stats)(xr, n, eps, &m, &rs);
        for (Py_ssize_t j = 0; j < n; j++)
            acc[j] += (double)gr[j] * (((double)xr[j] - m) * rs);
    }
}

/* -- batch_norm -------------------------------------------------------------------------------- */

/* Channel c of an (N, C, HW) C-contiguous array: its mean and biased variance, in double, the
 * variance from the centred values (as ln_stats, over the N planes of HW elements). */
static inline void FN(bn_stats)(const T *x, Py_ssize_t N, Py_ssize_t C, Py_ssize_t HW, Py_ssize_t c,
                                double *mean, double *var)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s = 0;
    for (Py_ssize_t n = 0; n < N; n++) {
        const T *p = x + (n * C + c) * HW;
        Py_ssize_t k = 0;
        for (; k + 8 <= HW; k += 8)
            for (int j = 0; j < 8; j++)
                acc[j] += (double)p[k + j];
        for (; k < HW; k++)
            s += (double)p[k];
    }
    for (int j = 0; j < 8; j++)
        s += acc[j];
    double count = (double)N * (double)HW, m = s / count;
    double sq[8] = {0, 0, 0, 0, 0, 0, 0, 0}, v = 0;
    for (Py_ssize_t n = 0; n < N; n++) {
        const T *p = x + (n * C + c) * HW;
        Py_ssize_t k = 0;
        for (; k + 8 <= HW; k += 8)
            for (int j = 0; j < 8; j++) {
                double d = (double)p[k + j] - m;
                sq[j] += d * d;
            }
        for (; k < HW; k++) {
            double d = (double)p[k] - m;
            v += d * d;
        }
    }
    for (int j = 0; j < 8; j++)
        v += sq[j];
    *mean = m;
    *var = v / count;
}


/* float32 channel c's mean and biased variance, and with g its sum of g and of g * (x - mean), in
 * one pass over x (and g) where bn_stats and bn_dot take four (shifted_sums over its N planes).
 * x0 is the mean of the first plane: (mean - x0)^2 / var is then at most N (Cauchy-Schwarz), so
 * the subtractions lose ~N * 2^-53 relative, far below float32's rounding. */
static inline __attribute__((always_inline)) void FN(bn_moments)(const T *x, const T *g, Py_ssize_t N, Py_ssize_t C,
                                                                 Py_ssize_t HW, Py_ssize_t c, double *mean,
                                                                 double *var, double *sg, double *sgx)
{
    double x0 = 0, t[4] = {0, 0, 0, 0};
    v8d s[4] = {{0}, {0}, {0}, {0}};
    if (N && HW) {  /* the shift: the first plane's mean, from the same sums shifted by 0 */
        FN(shifted_sums)(x + c * HW, NULL, NULL, HW, 0, s, t);
        x0 = (v8d_total(s[0]) + t[0]) / (double)HW;
        s[0] = s[1] = (v8d){0}, t[0] = t[1] = 0;
    }
    for (Py_ssize_t n = 0; n < N; n++)
        FN(shifted_sums)(x + (n * C + c) * HW, g ? g + (n * C + c) * HW : NULL, NULL, HW, x0, s, t);
    FN(shifted_moments)(s, t, x0, (double)N * (double)HW, g != NULL, mean, var, sg, sgx);
}

/* float32 goes through bn_moments' one pass; float64 keeps the two-pass statistics (bn_stats) and
 * bn_dot, whose subtraction-free sums it needs at its own precision */
#define BN_ONE_PASS (sizeof(T) == sizeof(float))

/* Channel c's sum of g (with x NULL) or of g * (x - m), in double, in eight partial sums (a
 * running sum is one chain of dependent adds, which GCC leaves scalar) */
static inline double FN(bn_dot)(const T *g, const T *x, double m, Py_ssize_t N, Py_ssize_t C, Py_ssize_t HW,
                                Py_ssize_t c)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s = 0;
    Py_ssize_t whole = HW - HW % 8;
    for (Py_ssize_t n = 0; n < N; n++) {
        const T *gp = g + (n * C + c) * HW, *p = x ? x + (n * C + c) * HW : NULL;
        if (p) {
            for (Py_ssize_t k = 0; k < whole; k += 8)
                for (int j = 0; j < 8; j++)
                    acc[j] += (double)gp[k + j] * ((double)p[k + j] - m);
            for (Py_ssize_t k = whole; k < HW; k++)
                s += (double)gp[k] * ((double)p[k] - m);
        } else {
            for (Py_ssize_t k = 0; k < whole; k += 8)
                for (int j = 0; j < 8; j++)
                    acc[j] += (double)gp[k + j];
            for (Py_ssize_t k = whole; k < HW; k++)
                s += (double)gp[k];
        }
    }
    for (int j = 0; j < 8; j++)
        s += acc[j];
    return s;
}

/* channels [lo, hi): (x - mean) * rstd * w + b, from the batch's statistics (training; written to
 * mean_out and var_out) or the running ones; the batch_norm kernels in wider vectors where the
 * CPU has them (VECTOR_CLONES: the same bits) */
VECTOR_CLONES static void FN(bn_fwd)(const T *x, const T *w, const T *b, const T *rm, const T *rv, T *out,
                                     double *mean_out, double *var_out, Py_ssize_t N, Py_ssize_t C, Py_ssize_t HW,
                                     Py_ssize_t lo, Py_ssize_t hi, double eps, int training)
{
    for (Py_ssize_t c = lo; c < hi; c++) {
        double m, v;
        if (training) {
            if (BN_ONE_PASS)
                FN(bn_moments)(x, NULL, N, C, HW, c, &m, &v, NULL, NULL);
            else
                FN(bn_stats)(x, N, C, HW, c, &m, &v);
            mean_out[c] = m;
            var_out[c] = v;
        } else {
            m = (double)rm[c];
            v = (double)rv[c];
        }
        T scale = (T)(1.0 / sqrt(v + eps)), tm = (T)m;
        if (w)
            scale *= w[c];
        T shift = b ? b[c] : 0;
        for (Py_ssize_t n = 0; n < N; n++) {
            const T *p = x + (n * C + c) * HW;
            T *o = out + (n * C + c) * HW;
            for (Py_ssize_t k = 0; k < HW; k++)
                o[k] = (p[k] - tm) * scale + shift;
        }
    }
}

/* channels [lo, hi) of the input gradient: training, a (g - mean(g)) - xc * mean(g * xc) * a rstd^2
 * with a = rstd * w; evaluation, g * rstd * w with the running variance */
VECTOR_CLONES static void FN(bn_bwd)(const T *g, const T *x, const T *w, const T *rv, T *gx, Py_ssize_t N,
                                     Py_ssize_t C, Py_ssize_t HW, Py_ssize_t lo, Py_ssize_t hi, double eps,
                                     int training)
{
    for (Py_ssize_t c = lo; c < hi; c++) {
        double wc = w ? (double)w[c] : 1.0;
        if (!training) {
            T a = (T)(wc / sqrt((double)rv[c] + eps));
            for (Py_ssize_t n = 0; n < N; n++) {
                const T *gp = g + (n * C + c) * HW;
                T *o = gx + (n * C + c) * HW;
                for (Py_ssize_t k = 0; k < HW; k++)
                    o[k] = gp[k] * a;
            }
            continue;
        }
        double m, v, sg = 0, sgx = 0;
        if (BN_ONE_PASS)
            FN(bn_moments)(x, g, N, C, HW, c, &m, &v, &sg, &sgx);
        else {
            FN(bn_stats)(x, N, C, HW, c, &m, &v);
            sg = FN(bn_dot)(g, NULL, 0, N, C, HW, c), sgx = FN(bn_dot)(g, x, m, N, C, HW, c);
        }
        double count = (double)N * (double)HW, rs = 1.0 / sqrt(v + eps), a = rs * wc;
        T ta = (T)a, tm = (T)m, tmg = (T)(sg / count), tb = (T)(sgx / count * a * rs * rs);
        for (Py_ssize_t n = 0; n < N; n++) {
            const T *gp = g + (n * C + c) * HW, *p = x + (n * C + c) * HW;
            T *o = gx + (n * C + c) * HW;
            for (Py_ssize_t k = 0; k < HW; k++)
                o[k] = (gp[k] - tmg) * ta - (p[k] - tm) * tb;
        }
    }
}

/* channels [lo, hi) of the weight's gradient: sum of g * (x - mean) * rstd, with the batch's
 * statistics (training) or the running ones */
VECTOR_CLONES static void FN(bn_wgrad)(const T *g, const T *x, const T *rm, const T *rv, T *gw, Py_ssize_t N,
                                       Py_ssize_t C, Py_ssize_t HW, Py_ssize_t lo, Py_ssize_t hi, double eps,
                                       int training)
{
    for (Py_ssize_t c = lo; c < hi; c++) {
        double m, v, sg = 0, sgx = 0;
        if (training && BN_ONE_PASS) {
            FN(bn_moments)(x, g, N, C, HW, c, &m, &v, &sg, &sgx);
            gw[c] = (T)(sgx / sqrt(v + eps));
            continue;
        }
        if (training)
            FN(bn_stats)(x, N, C, HW, c, &m, &v);
        else {
            m = (double)rm[c];
            v = (double)rv[c];
        }
        gw[c] = (T)(FN(bn_dot)(g, x, m, N, C, HW, c) / sqrt(v + eps));
    }
}

/* -- threshold_backward ------------------------------------------------------------------------ */

/* 0 where x <= threshold, else grad, as torch's kernel: a NaN x passes grad on, and grad is 0
 * there even where it is inf or nan (the decomposition's multiply by the mask gives nan there).
 * A select, which vectorises. */
static void FN(threshold_bwd)(const T *restrict g, const T *restrict x, T threshold, T *restrict out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        T gi = g[i];  /* loaded unconditionally, so the select needs no branch (random signs mispredict) */
        out[i] = x[i] <= threshold ? 0 : gi;
    }
}

/* -- tanh_backward, sigmoid_backward ---------------------------------------------------------- */

/* grad * (1 - y * y) and grad * (1 - y) * y from the op's output y, each product rounded to T as
 * fused.py's passes round it (the build keeps the compiler from contracting them into an fma). */
static void FN(tanh_bwd)(const T *restrict g, const T *restrict y, T *restrict out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        T square = y[i] * y[i];
        out[i] = g[i] * (1 - square);
    }
}

static void FN(sigmoid_bwd)(const T *restrict g, const T *restrict y, T *restrict out, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        T scaled = g[i] * (1 - y[i]);
        out[i] = scaled * y[i];
    }
}

/* -- fold (col2im), two window dims ----------------------------------------------------------- */

/* One plane: the accumulator starts at zero and takes each kernel offset's patches in turn
 * (row-major offsets), fused.fold's order, so every position sums its terms alike. */
static void FN(fold_plane)(const T *cols, const Py_ssize_t *cs, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh,
                           Py_ssize_t kw, T *acc, Py_ssize_t ah, Py_ssize_t aw, Py_ssize_t h, Py_ssize_t w,
                           Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw)
{
    for (Py_ssize_t r = 0; r < h; r++)
        for (Py_ssize_t c = 0; c < w; c++)
            acc[r * ah + c * aw] = 0;
    for (Py_ssize_t i = 0; i < kh; i++)
        for (Py_ssize_t j = 0; j < kw; j++)
            for (Py_ssize_t oy = 0; oy < oh; oy++) {
                const T *src = cols + i * cs[2] + j * cs[3] + oy * cs[0];
                T *dst = acc + (oy * sh + i * dh) * ah + j * dw * aw;
                if (cs[1] == 1 && sw * aw == 1) {  /* both rows contiguous: a vector add */
                    for (Py_ssize_t ox = 0; ox < ow; ox++)
                        dst[ox] = dst[ox] + src[ox];
                } else {
                    for (Py_ssize_t ox = 0; ox < ow; ox++)
                        dst[ox * sw * aw] = dst[ox * sw * aw] + src[ox * cs[1]];
                }
            }
}

/* -- im2col ------------------------------------------------------------------------------------ */

/* The patches of images [n0, n0 + nb) as rows (channel, kernel row, kernel column) of columns
 * (image, output row, output column), zero where a window reaches into the padding: the
 * layout conv.py's _im2col copies out of the window view, built without the padded copy.
 * per_image: each image's (rows, output row, output column) block whole, one after another
 * ((NB, C*KH*KW, OH*OW), what a product per image reads) instead of (C*KH*KW, NB*OH*OW).
 * Only the columns of images n0 + [b_lo, b_hi) are written (a share of the work). */
static void FN(im2col)(const T *x, const Py_ssize_t *xs, Py_ssize_t c, Py_ssize_t h, Py_ssize_t w, Py_ssize_t n0,
                       Py_ssize_t nb, T *cols, Py_ssize_t oh, Py_ssize_t ow, const Geometry *g, Py_ssize_t b_lo,
                       Py_ssize_t b_hi, int per_image)
{
    Py_ssize_t per = oh * ow, rows = c * g->kh * g->kw;
    Py_ssize_t row_step = per_image ? per : nb * per, image_step = per_image ? rows * per : per;
    for (Py_ssize_t ch = 0; ch < c; ch++)
        for (Py_ssize_t i = 0; i < g->kh; i++)
            for (Py_ssize_t j = 0; j < g->kw; j++) {
                T *const first_row = cols + ((ch * g->kh + i) * g->kw + j) * row_step;
                /* the output columns whose input column lies inside, [lo, hi): the same for
                 * every row of this kernel offset */
                Py_ssize_t c0 = j * g->dw - g->pw, lo = 0, hi = ow;
                while (lo < ow && c0 + lo * g->sw < 0)
                    lo++;
                while (hi > lo && c0 + (hi - 1) * g->sw >= w)
                    hi--;
                int dense = g->sw == 1 && xs[3] == 1;
                /* stride 1 with input rows ow apart (a "same" convolution's): output (oy, ox)
                 * reads the input at a fixed offset from oy * ow + ox, so a window's valid rows
                 * are one span of the plane, copied at once; the few positions that reach
                 * into the padding (rows outside, columns past the edges) are zeroed after */
                Py_ssize_t r0 = i * g->dh - g->ph, oy_lo = r0 < 0 ? -r0 : 0, oy_hi = h - r0;
                if (oy_hi > oh)
                    oy_hi = oh;
                int span = dense && g->sh == 1 && xs[2] == ow && lo < hi && oy_lo < oy_hi;
                for (Py_ssize_t b = b_lo; b < b_hi; b++) {
                    T *row = first_row + b * image_step;
                    const T *plane = x + (n0 + b) * xs[0] + ch * xs[1];
                    if (span) {
                        const T *src = plane + (oy_lo + r0) * ow + c0;
                        Py_ssize_t first = oy_lo * ow + lo, last = (oy_hi - 1) * ow + hi;
                        for (Py_ssize_t e = 0; e < first; e++)
                            row[e] = 0;
                        memcpy(row + first, src + (first - oy_lo * ow), (size_t)(last - first) * sizeof(T));
                        for (Py_ssize_t oy = oy_lo; oy < oy_hi - 1; oy++)
                            for (Py_ssize_t e = oy * ow + hi; e < (oy + 1) * ow + lo; e++)
                                row[e] = 0;
                        for (Py_ssize_t e = last; e < oh * ow; e++)
                            row[e] = 0;
                        continue;
                    }
                    for (Py_ssize_t oy = 0; oy < oh; oy++, row += ow) {
                        Py_ssize_t r = oy * g->sh - g->ph + i * g->dh;
                        if (r < 0 || r >= h) {
                            for (Py_ssize_t ox = 0; ox < ow; ox++)
                                row[ox] = 0;
                            continue;
                        }
                        const T *src = plane + r * xs[2] + c0 * xs[3];
                        for (Py_ssize_t ox = 0; ox < lo; ox++)
                            row[ox] = 0;
                        if (dense)  /* a plain loop: rows are a few dozen elements, short for memcpy */
                            for (Py_ssize_t ox = lo; ox < hi; ox++)
                                row[ox] = src[ox];
                        else
                            for (Py_ssize_t ox = lo; ox < hi; ox++)
                                row[ox] = src[ox * g->sw * xs[3]];
                        for (Py_ssize_t ox = hi; ox < ow; ox++)
                            row[ox] = 0;
                    }
                }
            }
}

/* -- softmax over rows: softmax, scaled_dot_product_attention ------------------------------------ */

/* The entries of row r that take part: all n, or with `causal` the first 1 + (r mod L) (query i of
 * an (L, n) matrix sees keys 0..i, top-left aligned), at most n. */
#define VISIBLE(r) (causal ? ((r) % L + 1 < n ? (r) % L + 1 : n) : n)
/* a causal row's visible entries rounded up to whole SM_LANES blocks (at most n): the loops then
 * run whole vectors, where a scalar tail of up to 15 entries cost as much as the vectors */
#define PADDED(vis) ((vis) + SM_LANES - 1 - ((vis) + SM_LANES - 1) % SM_LANES < n \
                     ? (vis) + SM_LANES - 1 - ((vis) + SM_LANES - 1) % SM_LANES : n)

/* Row reductions in SM_LANES independent partial results, so that the compiler keeps them in
 * vector registers (a single running max or double sum is one long dependency chain). The tree
 * that ends each one combines lane l with lane l + 8, then l + 4, l + 2 and l + 1, on vectors of
 * four lanes (16 bytes of floats, 32 of doubles: registers in the AVX2 and AVX-512 clones). As
 * scalar steps on the array of lanes it went through the stack, and its latency, paid once a row,
 * was most of a short row's time. A tree of vectors the width of all 16 lanes stayed in memory
 * wherever that width passes the clone's registers (128 bytes of double sums: everywhere), and
 * long rows lost a fifth. The order of the steps, and so every bit, is the scalar tree's. */
#define SM_LANES 16
#if !defined(SM_TREES_)
#define SM_TREES_
typedef float sm_f4 __attribute__((vector_size(16)));
typedef double sm_d4 __attribute__((vector_size(32)));
typedef int32_t sm_i4 __attribute__((vector_size(16)));
typedef int64_t sm_l4 __attribute__((vector_size(32)));

#define SM_ADD(a, b) ((a) + (b))
/* lane by lane, b where b > a, else a (the scalar `b > a ? b : a`: a where either is NaN) */
#define SM_LARGER_F4(a, b) ((sm_f4)(((sm_i4)(b) & ((b) > (a))) | ((sm_i4)(a) & ~((b) > (a)))))
#define SM_LARGER_D4(a, b) ((sm_d4)(((sm_l4)(b) & ((b) > (a))) | ((sm_l4)(a) & ~((b) > (a)))))

/* name(lane): the tree over 16 lanes, as pieces (vectors) of four lanes: piece i combined with
 * piece i + half down to one piece, then within it lane l with lane l + 2 and l + 1 by shuffles */
#define SM_TREE(name, T, piece, combine)                                                              \
    static inline T name(const T *lane)                                                               \
    {                                                                                                 \
        piece p[SM_LANES / 4];                                                                        \
        memcpy(p, lane, sizeof p);                                                                    \
        for (int half = SM_LANES / 8; half; half /= 2)                                                \
            for (int i = 0; i < half; i++)                                                            \
                p[i] = combine(p[i], p[i + half]);                                                    \
        p[0] = combine(p[0], __builtin_shufflevector(p[0], p[0], 2, 3, 0, 1));                        \
        p[0] = combine(p[0], __builtin_shufflevector(p[0], p[0], 1, 0, 3, 2));                        \
        return p[0][0];                                                                               \
    }
SM_TREE(sm_sum_f, float, sm_f4, SM_ADD)
SM_TREE(sm_sum_d, double, sm_d4, SM_ADD)
SM_TREE(sm_max_f, float, sm_f4, SM_LARGER_F4)
SM_TREE(sm_max_d, double, sm_d4, SM_LARGER_D4)
#endif

/* the largest of x[0..n) * scale, NaN ignored (the softmax looks for NaN itself) */
static inline T FN(scaled_max)(const T *x, Py_ssize_t n, T scale)
{
    T lane[SM_LANES];
    for (int l = 0; l < SM_LANES; l++)
        lane[l] = (T)-INFINITY;
    Py_ssize_t j = 0;
    for (; j + SM_LANES <= n; j += SM_LANES)
        for (int l = 0; l < SM_LANES; l++) {
            T v = x[j + l] * scale;
            lane[l] = v > lane[l] ? v : lane[l];
        }
    T m = (T)-INFINITY;
    for (; j < n; j++) {
        T v = x[j] * scale;
        m = v > m ? v : m;
    }
    T top = FN(sm_max)(lane);
    return top > m ? top : m;
}

/* x[0..n) * scale - m into out, returning their sum in T: NaN exactly where one of them is (none
 * is above 0, so no inf - inf) */
static inline T FN(shifted)(const T *x, T *out, Py_ssize_t n, T scale, T m)
{
    T lane[SM_LANES] = {0};
    Py_ssize_t j = 0;
    for (; j + SM_LANES <= n; j += SM_LANES)
        for (int l = 0; l < SM_LANES; l++) {
            out[j + l] = x[j + l] * scale - m;
            lane[l] += out[j + l];
        }
    T s = 0;
    for (; j < n; j++) {
        out[j] = x[j] * scale - m;
        s += out[j];
    }
    return s + FN(sm_sum)(lane);
}

/* the sum of a[0..n) in double */
static inline double FN(row_sum)(const T *a, Py_ssize_t n)
{
    double lane[SM_LANES] = {0};
    Py_ssize_t j = 0;
    for (; j + SM_LANES <= n; j += SM_LANES)
        for (int l = 0; l < SM_LANES; l++)
            lane[l] += (double)a[j + l];
    double s = 0;
    for (; j < n; j++)
        s += (double)a[j];
    return s + sm_sum_d(lane);
}

/* the sum of a[0..n) * b[0..n) in double, each product rounded to T */
static inline double FN(row_dot)(const T *a, const T *b, Py_ssize_t n)
{
    double lane[SM_LANES] = {0};
    Py_ssize_t j = 0;
    for (; j + SM_LANES <= n; j += SM_LANES)
        for (int l = 0; l < SM_LANES; l++)
            lane[l] += (double)(a[j + l] * b[j + l]);
    double s = 0;
    for (; j < n; j++)
        s += (double)(a[j] * b[j]);
    return s + sm_sum_d(lane);
}

/* rows [lo, hi) of (rows, n) x into out (in place allowed): softmax(x * scale) over each row's
 * visible entries, 0 past them; a row whose maximum is -inf (every key masked) gives zeros with
 * dead_zero (torch's attention), else NaN (its softmax), and a row holding a NaN gives NaN
 * throughout, as torch's. The exponentials are summed in
 * double and each multiplied by the sum's reciprocal rounded to T (as torch's kernel scales them).
 * SM_GROUP rows go through each step together: a short row's steps are chains of dependent
 * instructions (maximum, shift, exp, sum, divide), and the rows' chains, side by side, overlap
 * (an attention head's 64 causal rows of at most 64 keys: 4.6 -> 4.2 us). Each row's arithmetic is
 * as alone. */
#define SM_GROUP 4
VECTOR_CLONES static void FN(softmax_rows)(const T *x, T *out, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n,
                                           Py_ssize_t L, int causal, T scale, int dead_zero)
{
    for (Py_ssize_t r0 = lo; r0 < hi; r0 += SM_GROUP) {
        int rows = hi - r0 < SM_GROUP ? (int)(hi - r0) : SM_GROUP;
        T m[SM_GROUP], check[SM_GROUP];
        Py_ssize_t vis[SM_GROUP], w[SM_GROUP];
        int filled[SM_GROUP]; /* rows of NaN or zeros throughout: nothing to exponentiate or scale */
        for (int g = 0; g < rows; g++) {
            vis[g] = VISIBLE(r0 + g), w[g] = PADDED(vis[g]);
            m[g] = FN(scaled_max)(x + (r0 + g) * n, vis[g], scale);
        }
        for (int g = 0; g < rows; g++)
            check[g] = m[g] == (T)-INFINITY ? 0
                       : FN(shifted)(x + (r0 + g) * n, out + (r0 + g) * n, vis[g], scale, m[g]);
        for (int g = 0; g < rows; g++) {
            const T *row = x + (r0 + g) * n;
            T *o = out + (r0 + g) * n;
            filled[g] = check[g] != check[g] || m[g] == (T)-INFINITY;
            if (filled[g]) { /* a NaN: NaN; every entry -inf: dead_zero ? 0 : NaN */
                int nan = !dead_zero; /* (a conditional `fill = NAN` in this loop came out 0 for doubles at -O3) */
                for (Py_ssize_t j = 0; j < vis[g]; j++)
                    nan |= row[j] != row[j];
                for (Py_ssize_t j = 0; j < n; j++)  /* the whole row, as torch's softmax of the masked row */
                    o[j] = nan ? (T)NAN : 0;
            } else {
                for (Py_ssize_t j = vis[g]; j < w[g]; j++)  /* exp(-inf) = 0 */
                    o[j] = (T)-INFINITY;
                EXP_BLOCK(o, w[g]);
            }
        }
        for (int g = 0; g < rows; g++) {
            if (filled[g])
                continue;
            T *o = out + (r0 + g) * n;
            T inv = (T)(1.0 / FN(row_sum)(o, w[g])); /* a multiply a key: a divide costs ten */
            for (Py_ssize_t j = 0; j < w[g]; j++)
                o[j] = o[j] * inv;
            if (w[g] < n)
                memset(o + w[g], 0, (size_t)(n - w[g]) * sizeof(T));
        }
    }
}

/* rows [lo, hi) of softmax's input gradient from its output y and the output's gradient g, times
 * scale: (y * (g - sum(g * y))) * scale, the sum in double; with causal only over the visible
 * entries (padded as the forward's: y is 0 there), 0 past them. out may be g. */
VECTOR_CLONES static void FN(softmax_bwd_rows)(const T *g, const T *y, T *out, Py_ssize_t lo, Py_ssize_t hi,
                                               Py_ssize_t n, Py_ssize_t L, int causal, T scale)
{
    for (Py_ssize_t r = lo; r < hi; r++) {
        const T *gr = g + r * n, *yr = y + r * n;
        T *o = out + r * n;
        Py_ssize_t w = PADDED(VISIBLE(r));
        T dot = (T)FN(row_dot)(gr, yr, w);
        for (Py_ssize_t j = 0; j < w; j++)
            o[j] = (yr[j] * (gr[j] - dot)) * scale;
        if (w < n)
            memset(o + w, 0, (size_t)(n - w) * sizeof(T));
    }
}

/* rows [lo, hi) of (rows, n) x into out (not in place): log_softmax over each row, (x - max) -
 * log(sum exp(x - max)), the sum in double. A row holding a NaN or +inf, or every entry -inf,
 * gives NaN throughout, as torch's. The exponentials pass through out, then each entry's shift
 * is computed again from x (as the first time), so no scratch row is needed. */
VECTOR_CLONES static void FN(log_softmax_rows)(const T *x, T *out, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n)
{
    for (Py_ssize_t r = lo; r < hi; r++) {
        const T *row = x + r * n;
        T *o = out + r * n;
        T m = FN(scaled_max)(row, n, 1);
        T check = FN(shifted)(row, o, n, 1, m); /* NaN for a NaN, +inf - +inf or -inf - -inf */
        if (check != check) {
            for (Py_ssize_t j = 0; j < n; j++)
                o[j] = (T)NAN;
            continue;
        }
        EXP_BLOCK(o, n);
        T log_sum = (T)log(FN(row_sum)(o, n));
        for (Py_ssize_t j = 0; j < n; j++)
            o[j] = (row[j] - m) - log_sum;
    }
}

/* rows [lo, hi) of log_softmax's input gradient from its output y and the output's gradient g:
 * g - exp(y) * sum(g), the sum in double; exp over any y (EXP_ANY: y need not be a log-softmax's,
 * and a NaN stays NaN). out may not be g or y. */
VECTOR_CLONES static void FN(log_softmax_bwd_rows)(const T *g, const T *y, T *out, Py_ssize_t lo, Py_ssize_t hi,
                                                   Py_ssize_t n)
{
    for (Py_ssize_t r = lo; r < hi; r++) {
        const T *gr = g + r * n;
        T *o = out + r * n;
        T sum = (T)FN(row_sum)(gr, n);
        EXP_ANY(y + r * n, o, n);
        for (Py_ssize_t j = 0; j < n; j++)
            o[j] = gr[j] - o[j] * sum;
    }
}

#undef VISIBLE
#undef PADDED
#undef SM_LANES
#undef SM_GROUP

/* -- cross_entropy over (N, C) rows with class-index targets ---------------------------------- */

/* Row i of x (C entries, element stride xs1) shifted by its maximum into buf (contiguous, in
 * place allowed), then buf's exponentials, their sum in double returned: the softmax rows'
 * vectorised max, shift, exp and sum (a scalar expf an entry took 10 ns of a 2000-class row's
 * 11). *shift_t gets the target's shifted logit before the exp. NaN where the row holds a NaN
 * or +inf, or every entry is -inf (torch's log_softmax gives NaN there too). */
static inline double FN(ce_row)(const T *row, Py_ssize_t xs1, Py_ssize_t c, long long target, T *buf,
                                T *shift_t)
{
    if (c < 16) {
        /* Narrow rows (an MNIST head's 10 classes): one scalar pass, as the vector helpers' fixed
         * cost per row outweighed their lanes there (128 rows of 10: 8.0 against 10.3 us; at 32
         * classes the helpers took half the time). A NaN or +inf entry, or all -inf, makes the
         * shifts and so the sum NaN, as above. */
        T m = row[0];
        for (Py_ssize_t j = 1; j < c; j++)
            m = NP_MAX(m, row[j * xs1]);
        double s = 0;
        for (Py_ssize_t j = 0; j < c; j++) {
            T v = row[j * xs1] - m;
            if (j == target)
                *shift_t = v;
            buf[j] = EXP(v);
            s += buf[j];
        }
        return s;
    }
    if (xs1 != 1) {
        for (Py_ssize_t j = 0; j < c; j++)
            buf[j] = row[j * xs1];
        row = buf;
    }
    T m = FN(scaled_max)(row, c, 1);
    T check = m == (T)-INFINITY ? (T)NAN : FN(shifted)(row, buf, c, 1, m);
    if (check != check)
        return NAN;
    if (target >= 0 && target < c)
        *shift_t = buf[target];
    EXP_BLOCK(buf, c);
    return FN(row_sum)(buf, c);
}

/* Rows [lo, hi) of the loss: each row's log-softmax at its target, loss[i] = -(x[t] - max -
 * log(sum exp(x - max))), 0 for an ignored target; buf holds C entries. Returns the number of
 * targets not ignored, or -1 - i for the first row i whose target is out of range. */
VECTOR_CLONES static Py_ssize_t FN(ce_fwd)(const T *x, Py_ssize_t xs0, Py_ssize_t xs1, Py_ssize_t lo,
                                           Py_ssize_t hi, Py_ssize_t c, const long long *t, Py_ssize_t ts,
                                           long long ignore, T *loss, T *buf)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        long long target = t[i * ts];
        if (target == ignore) {
            loss[i] = 0;
            continue;
        }
        if (target < 0 || target >= c)
            return -1 - i;
        T shift_t = 0;
        double s = FN(ce_row)(x + i * xs0, xs1, c, target, buf, &shift_t);
        loss[i] = s != s ? (T)NAN : (T)(-((double)shift_t - log(s)));
        count++;
    }
    return count;
}

/* Rows [lo, hi) of the gradient: (softmax(x) - onehot(t)) * k per row, k scale[i] (reduction
 * 'none', per_row) or `k` (sum: scale[0]; mean: scale[0] / the count of targets not ignored); an
 * ignored target's row 0, whatever k (mean over no targets: 1/0, an inf upstream), as torch's
 * masked gradient. dx (N, C) C-contiguous, holding each row's exponentials until they are scaled by
 * the reciprocal of their sum, in double. A row whose softmax is NaN is NaN throughout, ignored or
 * not (0 * NaN, as torch's). Returns 0, or -1 - i for the first row i whose target is out of range. */
VECTOR_CLONES static Py_ssize_t FN(ce_bwd)(const T *x, Py_ssize_t xs0, Py_ssize_t xs1, Py_ssize_t lo,
                                           Py_ssize_t hi, Py_ssize_t c, const long long *t, Py_ssize_t ts,
                                           long long ignore, const T *scale, Py_ssize_t per_row, T k, T *dx)
{
    for (Py_ssize_t i = lo; i < hi; i++) {
        T *out = dx + i * c;
        long long target = t[i * ts];
        int kept = target != ignore;
        T ki = per_row ? scale[i] : k, shift_t = 0;
        if (kept && (target < 0 || target >= c))
            return -1 - i;
        double s = FN(ce_row)(x + i * xs0, xs1, c, target, out, &shift_t);
        if (s != s) {
            for (Py_ssize_t j = 0; j < c; j++)
                out[j] = (T)NAN;
            continue;
        }
        if (!kept) { /* 0 whatever the scale (mean over no targets: 1/0), as torch's masked gradient */
            for (Py_ssize_t j = 0; j < c; j++)
                out[j] = 0;
            continue;
        }
        double inv = 1.0 / s;  /* each probability rounded once, from double, as a divide by s would */
        T p_t = (T)(out[target] * inv);
        for (Py_ssize_t j = 0; j < c; j++)
            out[j] = (T)(out[j] * inv) * ki;
        out[target] = (p_t - 1) * ki;
    }
    return 0;
}


#undef FN
#undef CAT
#undef CAT_
