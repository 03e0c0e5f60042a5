/* The NumPy backend's matrix product for the shapes OpenBLAS runs slowly: few rows (or few
 * columns, transposed by the caller) and a moderate inner dimension, float32 and float64.
 *
 * NumPy's OpenBLAS (0.3.29) reaches about 40 % of an AVX-512 core's FMA peak on products such as
 * (20 x 256) @ (256 x 1024), an LSTM step's recurrent product, or a small convolution's
 * (16 x 144) @ (144 x 1024) per image: its kernels are tuned for large square blocks and pay
 * their packing and edge handling on every call. Here one register-blocked micro-kernel computes
 * an 8 x 32 block of C (float32; 8 x 16 for float64) from A's rows packed eight at a time and a
 * panel of B's rows packed (32 columns, 256 rows: it stays in L1 while every row block of A passes
 * over it); up to 48 rows, A's rows are packed in blocks sized to the rows (row_group) and B is
 * read in place. Edges are masked, so no element of C is written twice and none past the matrix.
 *
 * Beside it, a convolution's weight gradient computed straight from the image
 * (conv2d_weight_grad, below the product), which forms no patch matrix.
 *
 * Each C[i, j] is the same chain of fused multiply-adds over k = 0, 1, ..., K-1, whatever the
 * shape, the batch, the operands' strides or the element's place in a block: the result depends
 * only on A's row and B's column, so the kernel is deterministic and a product computed in
 * pieces (a convolution image by image, a matrix row by row) gives the same bits as in one call.
 * It may differ from BLAS in the last bits (OpenBLAS's AVX-512 kernel sums short products in the
 * same order, longer ones in blocks).
 *
 * The AVX-512 code is compiled with GCC's target attribute and chosen at run time
 * (__builtin_cpu_supports); elsewhere (another CPU, another compiler, another architecture) the
 * module still builds and `isa()` returns "", and the Python side (gemm.py) calls NumPy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "threadpool.h" /* the pool's interface only: _kernels has the pool */
#include "gemm_api.h"  /* what _gemm publishes to the other modules */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(GEMM_PORTABLE) /* -DGEMM_PORTABLE: the fallback */
#define GEMM_X86 1
#include <immintrin.h>
#endif

/* The block sizes, chosen among 4 x 4, 8 x 2, 12 x 2 and 16 x 1 vectors and KC 128 or 256 by timing
 * the models' products (docs/native_gemm.md); -D overrides them for such comparisons. */
#ifndef MR
#define MR 8 /* rows of C per micro-kernel call */
#endif
#ifndef NV
#define NV 2 /* vectors of C's columns per micro-kernel call: 32 float32, 16 float64 */
#endif
#ifndef KC
#define KC 256 /* inner-dimension block: one packed B panel (KC x NV vectors, 32 KiB) stays in L1 */
#endif
#ifndef NC
#define NC 1024 /* columns of B packed at a time (a multiple of NV * W): KC x NC is 1 MiB of float32, in L2 */
#endif
#ifndef C_CACHED
#define C_CACHED (256 * 1024) /* bytes of C up to which it stays in cache while B's panels pass once */
#endif
#ifndef DIRECT
#define DIRECT 48 /* up to this many rows (4 x MAX_ROWS), B is read in place: packing (20 x 256) @      \
                     * (256 x 1024)'s B cost a third of the product, more than reading it once a row panel */
#endif

typedef struct {
    char kind;                 /* 'f' or 'd' */
    Py_ssize_t b1, b2, m, n, k; /* two batch dims, then the matrix dims */
    const char *a, *b;
    char *c;
    Py_ssize_t as[4], bs[4], cs[4]; /* element strides: batch1, batch2, rows, columns */
} Gemm;

typedef struct { /* a 2-d convolution, groups 1, as one product per image: W (O x K) @ patches (K x P) */
    const char *x, *w;
    char *y;                                         /* (N, O, OH * OW), rows adjacent */
    Py_ssize_t n, c, h, wd, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    Py_ssize_t xs[4], ws[2], ys[3];                  /* element strides: x (N, C, H, W), w (O, K), y */
} Conv;

typedef struct { /* a 2-d convolution's weight gradient, groups 1 (conv2d_weight_grad) */
    const char *x, *g;
    char *out;                                    /* (O, C * kh * kw), rows out_row elements apart */
    Py_ssize_t n, c, h, wd, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, out_row;
    Py_ssize_t xs[4], gs[4];                      /* element strides of x (N, C, H, W), grad (N, O, OH, OW) */
} WGrad;

#ifdef GEMM_X86
/* aligned scratch from malloc: the pointer to free is kept just before the aligned block */
static void *scratch(size_t bytes)
{
    char *raw = PyMem_RawMalloc(bytes + 64 + sizeof(void *));
    if (raw == NULL)
        return NULL;
    char *p = (char *)(((uintptr_t)(raw + sizeof(void *)) + 63) & ~(uintptr_t)63);
    ((void **)p)[-1] = raw;
    return p;
}

static void scratch_free(void *p)
{
    if (p != NULL)
        PyMem_RawFree(((void **)p)[-1]);
}

/* Rows of A per packed panel (and of C per micro-kernel call) for a product of m rows: MR, except
 * up to DIRECT rows, where B is read in place by each panel (matrix_) and fewer, fuller panels
 * read it fewer times (an LSTM step's 20 rows: 2 x 10, not 8 + 8 + 4): one to four panels of equal
 * size, rounded up to even, at most MAX_ROWS (12 rows x 2 vectors of accumulators, B's 2 vectors
 * and a broadcast fill 27 of the 32 registers). */
#define MAX_ROWS 12
static int row_group(Py_ssize_t m)
{
    if (m > DIRECT || m > 4 * MAX_ROWS) /* (a -DDIRECT past four panels keeps MR rows) */
        return MR;
    Py_ssize_t panels = (m + MAX_ROWS - 1) / MAX_ROWS, rows = (m + panels - 1) / panels;
    return (int)((rows + 1) & ~(Py_ssize_t)1);
}

#define AVX512 __attribute__((target("avx512f,fma")))
#define INLINE static inline __attribute__((always_inline))

/* out[r][c] = in[c][r] for a 16 x 16 float tile (rows `si` and `so` elements apart; unaligned
 * stores, which cost nothing more where out is aligned, as the packing's is):
 * unpack pairs, then 4-element blocks, then 128-bit lanes twice */
INLINE AVX512 void transpose16(const float *in, Py_ssize_t si, float *out, Py_ssize_t so)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(in + i * si);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    for (int i = 0; i < 16; i++)
        _mm512_storeu_ps(out + i * so, r[i]);
}

/* the same for an 8 x 8 double tile, element by element (float64 products transpose rarely) */
INLINE AVX512 void transpose8(const double *in, Py_ssize_t si, double *out, Py_ssize_t so)
{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            out[j * so + i] = in[i * si + j];
}

/* the even lanes of lo:hi (a stride-2 row of inputs, 2W of them, as W outputs) */
INLINE AVX512 __m512 even16(__m512 lo, __m512 hi)
{
    return _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi);
}

INLINE AVX512 __m512d even8(__m512d lo, __m512d hi)
{
    return _mm512_permutex2var_pd(lo, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi);
}

/* Whether a convolution reads its patches in place (conv_image_in_place_): unit column stride,
 * the image's columns adjacent and each output row whole vectors of w lanes */
static int conv_in_place(const Conv *cv, Py_ssize_t w)
{
    return cv->sw == 1 && cv->xs[3] == 1 && cv->ow % w == 0;
}

/* each patch row's offset in an image (its channel, kernel row and column) and its kernel tap */
static void conv_rows(const Conv *cv, Py_ssize_t *koff, int *ktap)
{
    Py_ssize_t taps = cv->kh * cv->kw;
    for (Py_ssize_t kk = 0; kk < cv->c * taps; kk++) {
        Py_ssize_t ci = kk / taps, tap = kk % taps, i = tap / cv->kw, j = tap % cv->kw;
        koff[kk] = ci * cv->xs[1] + i * cv->dh * cv->xs[2] + j * cv->dw;
        ktap[kk] = (int)tap;
    }
}

/* Whether a product of elements of `item` bytes reads A in place (matrix_): at most SMALL_COLS
 * columns (two micro-kernel panels: A's entries each serve few multiply-adds, so packing them costs
 * as much as the product), A's rows apart (a broadcast row is packed) and C in cache */
#define SMALL_COLS(item) (2 * NV * (Py_ssize_t)(64 / (item)))
static int gemm_small(const Gemm *g, size_t item)
{
    return g->n <= SMALL_COLS(item) && g->as[2] != 0 && g->m * g->n * (Py_ssize_t)item <= C_CACHED;
}

/* One kernel per element type: T the element, V its 512-bit vector, W lanes, M the mask type.
 *  pack_a: rows [i0, i0 + 4) of A (zero past M) as K groups of 4, k-major.
 *  pack_b: rows [k0, k0 + kc) of B as a dense kc x n block (for B whose columns are strided).
 *  micro:  C[0:mr, 0:4W] (+)= A panel @ B rows, columns masked by m0..m3.
 * `first`: C is written, not accumulated (the first inner block); later blocks continue each
 * element's chain from the value stored, which is the same float the register held. */
#define GEMM_KERNEL(S, T, V, W, M, SET1, FMADD, ZERO, MLOAD, MSTORE, LOAD, STORE, FULL, TILE, EVEN)            \
    static void pack_a_##S(const T *a, Py_ssize_t sm, Py_ssize_t sk, Py_ssize_t rows, Py_ssize_t k, int g,      \
                           T *out)                                                                              \
    {                                                                                                           \
        for (Py_ssize_t p = 0; p < rows; p += g) {                                                              \
            T *o = out + p * k;                                                                                 \
            Py_ssize_t live = rows - p < g ? rows - p : g;                                                      \
            for (Py_ssize_t kk = 0; kk < k; kk++)                                                               \
                for (Py_ssize_t r = 0; r < g; r++)                                                              \
                    o[kk * g + r] = r < live ? a[(p + r) * sm + kk * sk] : (T)0;                                \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    static M lanes_##S(Py_ssize_t live) /* the first `live` lanes of a vector (0..W) */                         \
    {                                                                                                           \
        return live <= 0 ? (M)0 : live >= W ? (M)FULL : (M)((1u << live) - 1);                                 \
    }                                                                                                           \
                                                                                                                \
    /* B[0:kc, 0:nr] as kc rows of NV * W (zero past nr): one panel, then read from L1 by every row     \
     * panel of A (KC * NV * W elements: 32 KiB). Prefetching the next panel's rows meanwhile made the    \
     * products slower (it evicts this panel). */                                                          \
    INLINE AVX512 void pack_b_##S(const T *b, Py_ssize_t sk, Py_ssize_t sn, Py_ssize_t kc, const M *mask,       \
                                  T *out)                                                                       \
    {                                                                                                           \
        if (sn == 1) {                                                                                          \
            for (Py_ssize_t kk = 0; kk < kc; kk++)                                                              \
                for (int v = 0; v < NV; v++)                                                                    \
                    STORE(out + kk * NV * W + v * W, MLOAD(mask[v], b + kk * sk + v * W));                      \
            return;                                                                                             \
        }                                                                                                       \
        Py_ssize_t nr = 0;                                                                                      \
        for (int v = 0; v < NV; v++)                                                                            \
            nr += __builtin_popcount((unsigned)mask[v]);                                                        \
        if (nr < NV * W)                                                                                        \
            memset(out, 0, sizeof(T) * (size_t)(kc * NV * W));                                                  \
        /* strided columns (a transposed B), W rows at a time: short runs of each column, written to W      \
         * rows of the panel that stay in cache; whole W x W tiles of a B^T transposed in registers */         \
        for (Py_ssize_t k0 = 0; k0 < kc; k0 += W) {                                                             \
            Py_ssize_t ke = k0 + W < kc ? k0 + W : kc, j = 0;                                                   \
            if (sk == 1 && ke - k0 == W)                                                                        \
                for (; j + W <= nr; j += W)                                                                     \
                    TILE(b + k0 + j * sn, sn, out + k0 * NV * W + j, NV * W);                                   \
            for (; j < nr; j++)                                                                                 \
                for (Py_ssize_t kk = k0; kk < ke; kk++)                                                         \
                    out[kk * NV * W + j] = b[kk * sk + j * sn];                                                 \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* A convolution's patches read from the image in place (conv_image_in_place_): patch row kk of the         \
     * panel's vector v is the image at xv[v] + koff[kk] under the mask vmask[v * taps + ktap[kk]] */           \
    typedef struct {                                                                                            \
        const T *xv[NV];                                                                                        \
        const Py_ssize_t *koff;                                                                                 \
        const int *ktap;                                                                                        \
        const M *vmask;                                                                                         \
        Py_ssize_t taps;                                                                                        \
    } patches_##S;                                                                                              \
                                                                                                                \
    /* rows (the panel's live rows rounded up to even) is a constant at each call: the inlined kernel keeps     \
     * that many rows of accumulators. A's panel holds g rows a k (row_group), or, where as is not 0 (a         \
     * constant 0 at the packed calls), A is read in place: its rows as apart, its k ak apart. B's rows         \
     * are a packed panel (direct 0), rows bk apart (1) or a convolution's patches (2, pt). */                  \
    INLINE AVX512 void micro_##S(Py_ssize_t kc, const T *ap, int g, const T *bp, Py_ssize_t bk, T *c,           \
                                 Py_ssize_t cm, int mr, const M *mask, int first, int direct, const int rows,   \
                                 Py_ssize_t as, Py_ssize_t ak, const patches_##S *pt)                           \
    {                                                                                                           \
        V acc[MAX_ROWS][NV];                                                                                    \
        for (int r = 0; r < rows; r++)                                                                          \
            for (int v = 0; v < NV; v++)                                                                        \
                acc[r][v] = first ? ZERO() : MLOAD(mask[v], c + (r < mr ? r : 0) * cm + v * W);                 \
        for (Py_ssize_t kk = 0; kk < kc; kk++) {                                                                \
            V b[NV];                                                                                            \
            for (int v = 0; v < NV; v++)                                                                        \
                b[v] = direct == 2 ? MLOAD(pt->vmask[v * pt->taps + pt->ktap[kk]], pt->xv[v] + pt->koff[kk])    \
                       : direct ? MLOAD(mask[v], bp + v * W) : LOAD(bp + v * W);                                \
            for (int r = 0; r < rows; r++) {                                                                    \
                V a = SET1(as ? ap[(r < mr ? r : 0) * as] : ap[r]); /* (a row past mr: not stored) */           \
                for (int v = 0; v < NV; v++)                                                                    \
                    acc[r][v] = FMADD(a, b[v], acc[r][v]);                                                      \
            }                                                                                                   \
            ap += as ? ak : g;                                                                                  \
            if (direct != 2)                                                                                    \
                bp += direct ? bk : NV * W;                                                                     \
        }                                                                                                       \
        for (int r = 0; r < rows; r++)                                                                          \
            if (r < mr)                                                                                         \
                for (int v = 0; v < NV; v++)                                                                    \
                    MSTORE(c + r * cm + v * W, mask[v], acc[r][v]);                                             \
    }                                                                                                           \
                                                                                                                \
    /* micro_ with its accumulator rows fixed: the panel's mr live rows rounded up to even (at most g) */       \
    INLINE AVX512 void panel_##S(Py_ssize_t kc, const T *ap, int g, const T *bp, Py_ssize_t bk, T *c,           \
                                 Py_ssize_t cm, int mr, const M *mask, int first, int direct, Py_ssize_t as,    \
                                 Py_ssize_t ak, const patches_##S *pt)                                          \
    {                                                                                                           \
        switch ((mr + 1) & ~1) {                                                                                \
        case 2: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 2, as, ak, pt); break;             \
        case 4: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 4, as, ak, pt); break;             \
        case 6: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 6, as, ak, pt); break;             \
        case 8: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 8, as, ak, pt); break;             \
        case 10: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 10, as, ak, pt); break;           \
        default: micro_##S(kc, ap, g, bp, bk, c, cm, mr, mask, first, direct, 12, as, ak, pt); break;           \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* B[0:kc, 0:nc] as consecutive panels (pack_b's layout), B's rows read whole where they are adjacent */ \
    INLINE AVX512 void pack_block_##S(const T *b, Py_ssize_t sk, Py_ssize_t sn, Py_ssize_t kc, Py_ssize_t nc,   \
                                      T *out)                                                                   \
    {                                                                                                           \
        if (sn != 1) {                                                                                          \
            for (Py_ssize_t j0 = 0; j0 < nc; j0 += NV * W) {                                                    \
                M mask[NV];                                                                                     \
                for (int v = 0; v < NV; v++)                                                                    \
                    mask[v] = lanes_##S(nc - j0 - v * W);                                                       \
                pack_b_##S(b + j0 * sn, sk, sn, kc, mask, out + j0 * kc);                                       \
            }                                                                                                   \
            return;                                                                                             \
        }                                                                                                       \
        for (Py_ssize_t kk = 0; kk < kc; kk++)                                                                  \
            for (Py_ssize_t j0 = 0; j0 < nc; j0 += W) {                                                         \
                Py_ssize_t p = j0 / (NV * W), v = j0 % (NV * W);                                                \
                STORE(out + p * kc * NV * W + kk * NV * W + v, MLOAD(lanes_##S(nc - j0), b + kk * sk + j0));    \
            }                                                                                                   \
        Py_ssize_t tail = nc % (NV * W); /* the last panel's vectors past nc: zero */                          \
        if (tail)                                                                                               \
            for (Py_ssize_t kk = 0; kk < kc; kk++)                                                              \
                for (Py_ssize_t v = (tail + W - 1) / W * W; v < NV * W; v += W)                                 \
                    STORE(out + (nc / (NV * W)) * kc * NV * W + kk * NV * W + v, ZERO());                       \
    }                                                                                                           \
                                                                                                                \
    /* C (m x n, rows cm apart, columns adjacent) += A @ B's packed block of kc rows and nc columns: each    \
     * row panel of A (in L1) sweeps the block's panels (from L2), writing C's rows in order. For a C too  \
     * large for the cache: columns outer (one packed panel in L1 for every row panel) wrote C a short    \
     * row segment per page and ran 3x slower than NumPy on 28 images' (144 x 16) @ (16 x 1024). */       \
    INLINE AVX512 void block_##S(Py_ssize_t m, Py_ssize_t k, Py_ssize_t k0, Py_ssize_t kc, Py_ssize_t nc,       \
                                 const T *ap, int g, const T *bblock, T *c, Py_ssize_t cm)                      \
    {                                                                                                           \
        for (Py_ssize_t i0 = 0; i0 < m; i0 += g)                                                                \
            for (Py_ssize_t j0 = 0; j0 < nc; j0 += NV * W) {                                                    \
                M mask[NV];                                                                                     \
                for (int v = 0; v < NV; v++)                                                                    \
                    mask[v] = lanes_##S(nc - j0 - v * W);                                                       \
                panel_##S(kc, ap + i0 * k + k0 * g, g, bblock + j0 * kc, NV * W, c + i0 * cm + j0, cm,          \
                          m - i0 < g ? (int)(m - i0) : g, mask, k0 == 0, 0, 0, 0, NULL);                        \
            }                                                                                                   \
    }                                                                                                           \
                                                                                                                \
    /* panel_ on matrix_'s A from row i0, inner index k0: packed (as 0; g rows a k) or read in place (rows      \
     * as apart, k ak apart). Each branch calls panel_ with A's reading fixed, so the packed micro-kernels      \
     * compile as they would alone. */                                                                          \
    INLINE AVX512 void a_panel_##S(Py_ssize_t kc, const T *a, Py_ssize_t i0, Py_ssize_t k, Py_ssize_t k0,       \
                                   int g, Py_ssize_t as, Py_ssize_t ak, const T *bp, Py_ssize_t bk, T *c,       \
                                   Py_ssize_t cm, int mr, const M *mask, int direct)                            \
    {                                                                                                           \
        if (as)                                                                                                 \
            panel_##S(kc, a + i0 * as + k0 * ak, g, bp, bk, c, cm, mr, mask, k0 == 0, direct, as, ak, NULL);    \
        else                                                                                                    \
            panel_##S(kc, a + i0 * k + k0 * g, g, bp, bk, c, cm, mr, mask, k0 == 0, direct, 0, 0, NULL);        \
    }                                                                                                           \
                                                                                                                \
    /* C (m x n, rows cm apart, columns adjacent) = A @ B, A packed by pack_a (all rows, all k; g a panel),     \
     * or, where as is not 0 (gemm_small: at most SMALL_COLS columns, C in cache), read in place with its       \
     * rows as apart and its k ak apart: packing A cost as much as the product on attention's per-head          \
     * (64 x 64) @ (64 x 32). The chains are the same either way, so are the bits. */                           \
    AVX512 static void matrix_##S(Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const T *a, int g, Py_ssize_t as,   \
                                  Py_ssize_t ak, const T *b, Py_ssize_t bk, Py_ssize_t bn, T *c, Py_ssize_t cm, \
                                  T *bbuf)                                                                      \
    {                                                                                                           \
        for (Py_ssize_t k0 = 0; k0 < k; k0 += KC) {                                                             \
            Py_ssize_t kc = k - k0 < KC ? k - k0 : KC;                                                          \
            if (bn == 1 && (m <= DIRECT || as)) { /* few row panels, or A in place: B's rows read in place */   \
                for (Py_ssize_t j0 = 0; j0 < n; j0 += NV * W) {                                                 \
                    M mask[NV];                                                                                 \
                    for (int v = 0; v < NV; v++)                                                                \
                        mask[v] = lanes_##S(n - j0 - v * W);                                                    \
                    for (Py_ssize_t i0 = 0; i0 < m; i0 += g)                                                    \
                        a_panel_##S(kc, a, i0, k, k0, g, as, ak, b + k0 * bk + j0, bk, c + i0 * cm + j0, cm,    \
                                    m - i0 < g ? (int)(m - i0) : g, mask, 1);                                   \
                }                                                                                               \
                continue;                                                                                       \
            }                                                                                                   \
            if (m * n * (Py_ssize_t)sizeof(T) <= C_CACHED) { /* C stays in cache: columns outer */              \
                for (Py_ssize_t j0 = 0; j0 < n; j0 += NV * W) {                                                 \
                    M mask[NV];                                                                                 \
                    for (int v = 0; v < NV; v++)                                                                \
                        mask[v] = lanes_##S(n - j0 - v * W);                                                    \
                    pack_b_##S(b + k0 * bk + j0 * bn, bk, bn, kc, mask, bbuf);                                  \
                    for (Py_ssize_t i0 = 0; i0 < m; i0 += g)                                                    \
                        a_panel_##S(kc, a, i0, k, k0, g, as, ak, bbuf, NV * W, c + i0 * cm + j0, cm,            \
                                    m - i0 < g ? (int)(m - i0) : g, mask, 0);                                   \
                }                                                                                               \
                continue;                                                                                       \
            }                                                                                                   \
            for (Py_ssize_t n0 = 0; n0 < n; n0 += NC) { /* (A packed: gemm_small keeps C in cache) */           \
                Py_ssize_t nc = n - n0 < NC ? n - n0 : NC;                                                      \
                pack_block_##S(b + k0 * bk + n0 * bn, bk, bn, kc, nc, bbuf);                                    \
                block_##S(m, k, k0, kc, nc, a, g, bbuf, c + n0, cm);                                            \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* the patch matrix's rows [k0, k0 + kc) and columns [j0, j0 + nr) of one image, as pack_b lays out  \
     * B: the im2col copy made panel by panel in L1 instead of whole in memory. A row's columns are      \
     * output positions; along an output row with unit strides they are adjacent inputs, loaded W at a   \
     * time with the padding masked off. */                                                                \
    INLINE AVX512 void pack_conv_##S(const Conv *cv, const T *x, Py_ssize_t k0, Py_ssize_t kc, Py_ssize_t j0,   \
                                     Py_ssize_t nr, T *out)                                                     \
    {                                                                                                           \
        Py_ssize_t taps = cv->kh * cv->kw;                                                                      \
        int rows = cv->sw == 1 && cv->xs[3] == 1, halves = cv->sw == 2 && cv->xs[3] == 1;                       \
        /* the row's (channel, kernel row, kernel column) and the panel's first output position, divided    \
         * once: five integer divisions a row took longer than the row's copy */                                \
        Py_ssize_t ci = k0 / taps, i = (k0 % taps) / cv->kw, jj = k0 % cv->kw;                                  \
        Py_ssize_t y0 = j0 / cv->ow, xo0 = j0 % cv->ow;                                                         \
        for (Py_ssize_t kk = 0; kk < kc; kk++) {                                                                \
            if (kk > 0 && ++jj == cv->kw && (jj = 0, ++i == cv->kh))                                            \
                i = 0, ci++;                                                                                    \
            const T *plane = x + ci * cv->xs[1];                                                                \
            T *o = out + kk * NV * W;                                                                           \
            Py_ssize_t y = y0, xo = xo0, jn = 0;                                                                \
            while (jn < nr) {                                                                                   \
                Py_ssize_t run = cv->ow - xo < nr - jn ? cv->ow - xo : nr - jn;                                 \
                Py_ssize_t iy = y * cv->sh - cv->ph + i * cv->dh, ix = xo * cv->sw - cv->pw + jj * cv->dw;     \
                if (iy < 0 || iy >= cv->h) {                                                                    \
                    for (Py_ssize_t t = 0; t < run; t++)                                                        \
                        o[jn + t] = 0;                                                                          \
                } else if (rows && ix >= 0 && ix + run <= cv->wd) { /* no padding in the run */               \
                    const T *src = plane + iy * cv->xs[2] + ix;                                                 \
                    Py_ssize_t t = 0;                                                                           \
                    for (; t + W <= run; t += W)                                                                \
                        MSTORE(o + jn + t, (M)FULL, MLOAD((M)FULL, src + t));                                   \
                    if (t < run)                                                                                \
                        MSTORE(o + jn + t, lanes_##S(run - t), MLOAD(lanes_##S(run - t), src + t));             \
                } else if (rows) {                                                                              \
                    const T *src = plane + iy * cv->xs[2];                                                      \
                    for (Py_ssize_t t = 0; t < run; t += W) {                                                   \
                        Py_ssize_t lo = -(ix + t), hi = cv->wd - (ix + t), len = run - t < W ? run - t : W;     \
                        M m = lanes_##S(hi < len ? hi : len) & ~lanes_##S(lo);                                  \
                        V v = MLOAD(m, src + ix + t);                                                           \
                        MSTORE(o + jn + t, lanes_##S(len), v);                                                  \
                    }                                                                                           \
                } else if (halves) { /* stride 2: 2W inputs loaded, the even ones kept */                     \
                    const T *src = plane + iy * cv->xs[2];                                                      \
                    for (Py_ssize_t t = 0; t < run; t += W) {                                                   \
                        Py_ssize_t base = ix + 2 * t, len = run - t < W ? run - t : W;                          \
                        Py_ssize_t top = cv->wd - base < 2 * len ? cv->wd - base : 2 * len;                     \
                        M ml = lanes_##S(top) & ~lanes_##S(-base), mh = lanes_##S(top - W) & ~lanes_##S(-base - W); \
                        V v = EVEN(MLOAD(ml, src + base), MLOAD(mh, src + base + W));                           \
                        MSTORE(o + jn + t, lanes_##S(len), v);                                                  \
                    }                                                                                           \
                } else {                                                                                        \
                    const T *src = plane + iy * cv->xs[2];                                                      \
                    for (Py_ssize_t t = 0; t < run; t++, ix += cv->sw)                                          \
                        o[jn + t] = ix >= 0 && ix < cv->wd ? src[ix * cv->xs[3]] : (T)0;                        \
                }                                                                                               \
                jn += run, xo = 0, y++;                                                                         \
            }                                                                                                   \
            for (; jn < NV * W; jn++)                                                                           \
                o[jn] = 0;                                                                                      \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* One image as conv_image_ computes it, the patches read from the image in place (conv_in_place:           \
     * unit column stride, each output row whole vectors, so each vector of a panel is W adjacent               \
     * outputs of one row). Patch row kk of a vector is the image at koff[kk] (the row's channel, kernel        \
     * row and column; conv_rows) past the vector's own start, under the vector's mask for the row's            \
     * kernel tap (ktap[kk]; the padding's columns off, no lanes for a kernel row above or below the            \
     * image; vmask is scratch for NV * taps of them): micro_'s B read 2. The values are the packed             \
     * panel's and each output is the same chain, so the bits are pack_conv_'s; the packing had taken           \
     * about a third of the time. */                                                                            \
    AVX512 static void conv_image_in_place_##S(const Conv *cv, const T *ap, const T *x, T *c,                   \
                                               const Py_ssize_t *koff, const int *ktap, M *vmask)               \
    {                                                                                                           \
        Py_ssize_t m = cv->o, k = cv->c * cv->kh * cv->kw, n = cv->oh * cv->ow, taps = cv->kh * cv->kw;         \
        for (Py_ssize_t j0 = 0; j0 < n; j0 += NV * W) {                                                         \
            M mask[NV];                                                                                         \
            patches_##S pt = {.vmask = vmask, .taps = taps};                                                    \
            for (int v = 0; v < NV; v++) {                                                                      \
                Py_ssize_t j = j0 + v * W, y = j / cv->ow, x0 = j % cv->ow;                                     \
                mask[v] = lanes_##S(n - j);                                                                     \
                pt.xv[v] = j < n ? x + (y * cv->sh - cv->ph) * cv->xs[2] + (x0 - cv->pw) : x;                   \
                for (Py_ssize_t i = 0; i < cv->kh; i++) {                                                       \
                    Py_ssize_t iy = y * cv->sh - cv->ph + i * cv->dh;                                           \
                    for (Py_ssize_t jj = 0; jj < cv->kw; jj++) {                                                \
                        Py_ssize_t ix = x0 - cv->pw + jj * cv->dw;                                              \
                        vmask[v * taps + i * cv->kw + jj] = j >= n || iy < 0 || iy >= cv->h                     \
                            ? (M)0 : (M)(lanes_##S(cv->wd - ix) & ~lanes_##S(-ix));                             \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
            for (Py_ssize_t k0 = 0; k0 < k; k0 += KC) {                                                         \
                Py_ssize_t kc = k - k0 < KC ? k - k0 : KC;                                                      \
                pt.koff = koff + k0, pt.ktap = ktap + k0;                                                       \
                for (Py_ssize_t i0 = 0; i0 < m; i0 += MR)                                                       \
                    panel_##S(kc, ap + i0 * k + k0 * MR, MR, NULL, 0, c + i0 * cv->ys[1] + j0, cv->ys[1],       \
                              m - i0 < MR ? (int)(m - i0) : MR, mask, k0 == 0, 2, 0, 0, &pt);                   \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* one image: its output (O x P, a few hundred KiB at most) stays in cache, so columns outer, each    \
     * panel of patches packed once for every row panel of the weight */                                  \
    AVX512 static void conv_image_##S(const Conv *cv, const T *ap, const T *x, T *c, T *bbuf)                  \
    {                                                                                                           \
        Py_ssize_t m = cv->o, k = cv->c * cv->kh * cv->kw, n = cv->oh * cv->ow;                                 \
        for (Py_ssize_t k0 = 0; k0 < k; k0 += KC) {                                                             \
            Py_ssize_t kc = k - k0 < KC ? k - k0 : KC;                                                          \
            for (Py_ssize_t j0 = 0; j0 < n; j0 += NV * W) {                                                     \
                M mask[NV];                                                                                     \
                for (int v = 0; v < NV; v++)                                                                    \
                    mask[v] = lanes_##S(n - j0 - v * W);                                                        \
                pack_conv_##S(cv, x, k0, kc, j0, n - j0 < NV * W ? n - j0 : NV * W, bbuf);                      \
                for (Py_ssize_t i0 = 0; i0 < m; i0 += MR)                                                       \
                    panel_##S(kc, ap + i0 * k + k0 * MR, MR, bbuf, NV * W, c + i0 * cv->ys[1] + j0, cv->ys[1],  \
                              m - i0 < MR ? (int)(m - i0) : MR, mask, k0 == 0, 0, 0, 0, NULL);                  \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
                                                                                                                \
    /* images [lo, hi) of the convolution, A packed by the caller (shared, read only): their patches            \
     * read in place where conv_in_place allows, else packed panel by panel */                                  \
    static int conv_##S(const Conv *cv, const T *ap, Py_ssize_t lo, Py_ssize_t hi)                              \
    {                                                                                                           \
        if (conv_in_place(cv, W)) {                                                                             \
            Py_ssize_t k = cv->c * cv->kh * cv->kw, taps = cv->kh * cv->kw;                                     \
            Py_ssize_t *koff = scratch((size_t)k * sizeof(Py_ssize_t));                                         \
            int *ktap = scratch((size_t)k * sizeof(int));                                                       \
            M *vmask = scratch((size_t)(NV * taps) * sizeof(M));                                                \
            if (koff == NULL || ktap == NULL || vmask == NULL) {                                                \
                scratch_free(koff), scratch_free(ktap), scratch_free(vmask);                                    \
                return -1;                                                                                      \
            }                                                                                                   \
            conv_rows(cv, koff, ktap);                                                                          \
            for (Py_ssize_t i = lo; i < hi; i++)                                                                \
                conv_image_in_place_##S(cv, ap, (const T *)cv->x + i * cv->xs[0], (T *)cv->y + i * cv->ys[0],   \
                                        koff, ktap, vmask);                                                     \
            scratch_free(koff), scratch_free(ktap), scratch_free(vmask);                                        \
            return 0;                                                                                           \
        }                                                                                                       \
        T *bbuf = scratch((size_t)(KC * NV * W) * sizeof(T));                                                   \
        if (bbuf == NULL)                                                                                       \
            return -1;                                                                                          \
        for (Py_ssize_t i = lo; i < hi; i++)                                                                    \
            conv_image_##S(cv, ap, (const T *)cv->x + i * cv->xs[0], (T *)cv->y + i * cv->ys[0], bbuf);         \
        scratch_free(bbuf);                                                                                     \
        return 0;                                                                                               \
    }                                                                                                           \
                                                                                                                \
    /* tasks [t0, t1) of the product: task t is batch item t / (chunks * rows), then its rows' chunk and        \
     * its columns' chunk (`rows` near-equal runs of whole row groups, `chunks` of whole panels of NV * W       \
     * columns); a job packs A's rows of its tasks only */                                                      \
    static int run_##S(const Gemm *g, Py_ssize_t chunks, Py_ssize_t rows, Py_ssize_t t0, Py_ssize_t t1)         \
    {                                                                                                           \
        int rg = row_group(g->m), small = gemm_small(g, sizeof(T)); /* small: A read in place, not packed */    \
        Py_ssize_t groups = (g->m + rg - 1) / rg, panels = (g->n + NV * W - 1) / (NV * W);                      \
        Py_ssize_t mp = (groups + rows - 1) / rows * rg; /* a task's rows at most: the A this job packs */      \
        T *ap = small ? NULL : scratch((size_t)(mp * g->k) * sizeof(T));                                        \
        T *bbuf = scratch((size_t)(KC * NC) * sizeof(T));                                                       \
        if ((ap == NULL && !small) || bbuf == NULL) {                                                           \
            scratch_free(ap), scratch_free(bbuf);                                                               \
            return -1;                                                                                          \
        }                                                                                                       \
        const T *a = (const T *)g->a, *b = (const T *)g->b;                                                     \
        T *c = (T *)g->c;                                                                                       \
        const T *packed = NULL; /* A's batch item packed last: a broadcast A is packed once */                  \
        for (Py_ssize_t t = t0; t < t1; t++) {                                                                  \
            Py_ssize_t item = t / (chunks * rows), rpart = t % (chunks * rows) / chunks, part = t % chunks;     \
            Py_ssize_t i = item / g->b2, j = item % g->b2;                                                      \
            Py_ssize_t j0 = panels * part / chunks * NV * W, j1 = panels * (part + 1) / chunks * NV * W;        \
            Py_ssize_t r0 = groups * rpart / rows * rg, r1 = groups * (rpart + 1) / rows * rg;                  \
            j1 = j1 > g->n ? g->n : j1, r1 = r1 > g->m ? g->m : r1;                                             \
            if (j1 <= j0 || r1 <= r0)                                                                           \
                continue;                                                                                       \
            const T *ai = a + i * g->as[0] + j * g->as[1] + r0 * g->as[2];                                      \
            const T *bi = b + i * g->bs[0] + j * g->bs[1] + j0 * g->bs[3];                                      \
            T *ci = c + i * g->cs[0] + j * g->cs[1] + r0 * g->cs[2] + j0;                                       \
            if (small) {                                                                                        \
                matrix_##S(r1 - r0, j1 - j0, g->k, ai, rg, g->as[2], g->as[3], bi, g->bs[2], g->bs[3], ci,      \
                           g->cs[2], bbuf);                                                                     \
                continue;                                                                                       \
            }                                                                                                   \
            if (ai != packed)                                                                                   \
                pack_a_##S(ai, g->as[2], g->as[3], r1 - r0, g->k, rg, ap), packed = ai;                         \
            matrix_##S(r1 - r0, j1 - j0, g->k, ap, rg, 0, 0, bi, g->bs[2], g->bs[3], ci, g->cs[2], bbuf);       \
        }                                                                                                       \
        scratch_free(ap), scratch_free(bbuf);                                                                   \
        return 0;                                                                                               \
    }

GEMM_KERNEL(f, float, __m512, 16, __mmask16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_setzero_ps, _mm512_maskz_loadu_ps,
            _mm512_mask_storeu_ps, _mm512_load_ps, _mm512_store_ps, 0xFFFF, transpose16, even16)
GEMM_KERNEL(d, double, __m512d, 8, __mmask8, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_setzero_pd, _mm512_maskz_loadu_pd,
            _mm512_mask_storeu_pd, _mm512_load_pd, _mm512_store_pd, 0xFF, transpose8, even8)

/* dst (n x m, rows ds elements apart) = src^T (m x n, rows ss apart; both with columns adjacent):
 * whole W x W tiles through TILE, the edges element by element. NumPy's copy of a transposed view
 * runs about 1.4 ns an element on one thread (its inner loop strided); tiles take a tenth of that. */
#define TRANSPOSE(S, T, W, TILE)                                                                                \
    static AVX512 void transpose_##S(const T *src, Py_ssize_t m, Py_ssize_t n, Py_ssize_t ss, T *dst,          \
                                     Py_ssize_t ds)                                                             \
    {                                                                                                           \
        Py_ssize_t mw = m - m % W, nw = n - n % W;                                                              \
        for (Py_ssize_t i = 0; i < mw; i += W)                                                                  \
            for (Py_ssize_t j = 0; j < nw; j += W)                                                              \
                TILE(src + i * ss + j, ss, dst + j * ds + i, ds);                                               \
        for (Py_ssize_t i = 0; i < m; i++)                                                                      \
            for (Py_ssize_t j = i < mw ? nw : 0; j < n; j++)                                                    \
                dst[j * ds + i] = src[i * ss + j];                                                              \
    }

TRANSPOSE(f, float, 16, transpose16)
TRANSPOSE(d, double, 8, transpose8)

/* -- splitting over the pool ------------------------------------------------------------------ */

/* Products and convolutions split over the native kernels' pool (as many jobs as BLAS is told to
 * use threads, where `pool` is there; one otherwise): a product by its batch items, or where there
 * are fewer items than jobs (or items that do not share out evenly) also by runs of its column
 * panels; a convolution by its images. Since an element's value depends only on its row of A and
 * column of B, the bits do not depend on the split. A job gets at least MIN_JOB_MACS multiply-adds
 * (a handoff to the pool costs a few microseconds). */
#ifndef MIN_JOB_MACS
#define MIN_JOB_MACS (1 << 19)
#endif

/* jobs for `work` units, at least `per_job` each (one below two jobs' worth), at most the pool's width */
static int jobs_for(const PoolAPI *pool, double work, double per_job)
{
    int width = pool != NULL ? pool->width() : 1;
    double by_work = work / per_job;
    return by_work < 2 || width < 2 ? 1 : (int)(by_work < width ? by_work : width);
}

typedef struct {
    const Gemm *g;
    Py_ssize_t chunks, rows, tasks;
    int jobs, failed;
} GemmJobs;

static void gemm_job(int i, void *arg)
{
    GemmJobs *w = arg;
    Py_ssize_t t0 = w->tasks * i / w->jobs, t1 = w->tasks * (i + 1) / w->jobs;
    if ((w->g->kind == 'f' ? run_f(w->g, w->chunks, w->rows, t0, t1) : run_d(w->g, w->chunks, w->rows, t0, t1))
        < 0)
        __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
}

/* Where items do not share out, a product splits by runs of its column panels, each job packing all
 * of A's rows; one with more rows than columns (a transformer's (1024 x 128) @ (128 x 384), on the
 * kernel as given) splits by runs of its rows instead, each job packing its own rows and B whole,
 * the smaller of the two: packing A twice had made it lose to OpenBLAS on two threads. */
static int gemm_split(const Gemm *g, const PoolAPI *pool)
{
    Py_ssize_t items = g->b1 * g->b2, lanes = g->kind == 'f' ? 16 : 8;
    Py_ssize_t panels = (g->n + NV * lanes - 1) / (NV * lanes), rg = row_group(g->m), groups = (g->m + rg - 1) / rg;
    int jobs = jobs_for(pool, (double)items * (double)g->m * (double)g->n * (double)g->k, MIN_JOB_MACS);
    Py_ssize_t chunks = 1, rows = 1;
    if (jobs > 1 && items % jobs != 0 && items < 8 * jobs) {
        if (g->m > g->n && g->m > DIRECT && !gemm_small(g, g->kind == 'f' ? 4 : 8))
            rows = Py_MIN(groups, jobs); /* items x jobs tasks: each job as many */
        else
            chunks = Py_MIN(panels, (8 * jobs + items - 1) / items);
    }
    GemmJobs w = {g, chunks, rows, items * chunks * rows, (int)Py_MIN(jobs, items * chunks * rows), 0};
    kernels_pool_run(pool, w.jobs, gemm_job, &w);
    return w.failed ? -1 : 0;
}

/* A transpose (transpose_f/_d) split over the pool by whole tiles of src's rows: each job writes
 * its own columns of dst. Copies, so any split gives the same array; a job gets at least
 * MIN_JOB_ENTRIES (one thread moved 22 minGPT step's outputs back from transposed products in
 * 1.9 ms of a 29 ms step on two threads). */
#ifndef MIN_JOB_ENTRIES
#define MIN_JOB_ENTRIES (1 << 16)
#endif

typedef struct {
    char kind;
    const char *src;
    char *dst;
    Py_ssize_t m, n, ss, ds, tiles;
    int jobs;
} Transpose;

static void transpose_job(int i, void *arg)
{
    const Transpose *t = arg;
    Py_ssize_t w = t->kind == 'f' ? 16 : 8, size = t->kind == 'f' ? 4 : 8;
    Py_ssize_t lo = t->tiles * i / t->jobs * w, hi = Py_MIN(t->m, t->tiles * (i + 1) / t->jobs * w);
    if (hi <= lo)
        return;
    const char *src = t->src + (size_t)(lo * t->ss * size);
    char *dst = t->dst + (size_t)(lo * size);
    if (t->kind == 'f')
        transpose_f((const float *)src, hi - lo, t->n, t->ss, (float *)dst, t->ds);
    else
        transpose_d((const double *)src, hi - lo, t->n, t->ss, (double *)dst, t->ds);
}

static void transpose_split(char kind, const void *src, Py_ssize_t m, Py_ssize_t n, Py_ssize_t ss, void *dst,
                            Py_ssize_t ds, const PoolAPI *pool)
{
    Py_ssize_t w = kind == 'f' ? 16 : 8, tiles = (m + w - 1) / w;
    int jobs = jobs_for(pool, (double)m * (double)n, MIN_JOB_ENTRIES);
    Transpose t = {kind, src, dst, m, n, ss, ds, tiles, (int)Py_MAX(1, Py_MIN(jobs, tiles))}; /* (m may be 0) */
    kernels_pool_run(pool, t.jobs, transpose_job, &t);
}

typedef struct {
    const Conv *cv;
    const void *ap;
    char kind;
    int jobs, failed;
} ConvJobs;

static void conv_job(int i, void *arg)
{
    ConvJobs *w = arg;
    Py_ssize_t lo = w->cv->n * i / w->jobs, hi = w->cv->n * (i + 1) / w->jobs;
    if ((w->kind == 'f' ? conv_f(w->cv, w->ap, lo, hi) : conv_d(w->cv, w->ap, lo, hi)) < 0)
        __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
}

static int conv_split(const Conv *cv, char kind, const PoolAPI *pool)
{
    size_t item = kind == 'f' ? sizeof(float) : sizeof(double);
    Py_ssize_t k = cv->c * cv->kh * cv->kw;
    void *ap = scratch((size_t)(((cv->o + MR - 1) / MR * MR) * k) * item);
    if (ap == NULL)
        return -1;
    if (kind == 'f')
        pack_a_f((const float *)cv->w, cv->ws[0], cv->ws[1], cv->o, k, MR, ap);
    else
        pack_a_d((const double *)cv->w, cv->ws[0], cv->ws[1], cv->o, k, MR, ap);
    int jobs = jobs_for(pool, (double)cv->n * (double)cv->o * (double)k * (double)(cv->oh * cv->ow), MIN_JOB_MACS);
    ConvJobs w = {cv, ap, kind, (int)Py_MIN(jobs, cv->n), 0};
    kernels_pool_run(pool, w.jobs, conv_job, &w);
    scratch_free(ap);
    return w.failed ? -1 : 0;
}

/* -- a convolution's weight gradient -------------------------------------------------- */

/* dW[o, (c, i, j)] = sum over images and output positions (y, x) of
 * G[n, o, y, x] * X[n, c, y sh + i dh - ph, x sw + j dw - pw] (zero outside the image), groups 1.
 * As a product, grad (O x P) @ patches^T (P x C kh kw) per image: few rows, and the patches
 * are the image read nine times over. Here nothing is packed: each image is copied once into a
 * zero-bordered buffer (with stride sw, its columns dealt into sw planes by their remainder),
 * and every patch row is then that buffer read at an offset, W output columns at a time. A
 * block of WG_O output channels x WG_K patch rows keeps its sums in registers, each lane
 * summing its own columns over a few images (WG_CACHED bytes of them; the tail of a row masked
 * to zeros), then adds them to a lane-wise buffer; the lanes are summed once, after the last
 * image. The order of every sum is fixed by the shapes alone: deterministic, and the values
 * differ from the product's in the last bits. */
#define WG_O 4
#define WG_K 6
#ifndef WG_CACHED
/* bytes of bordered images whose sums the registers carry before the buffer takes them (128 KiB
 * to 1 MiB timed alike) */
#define WG_CACHED (256 * 1024)
#endif

#define WGRAD_KERNEL(S, T, V, W, M, SET0, FMA, MLOAD, LOAD, STORE, ADD, RADD)                                  \
    static AVX512 int wgrad_##S(const WGrad *p, Py_ssize_t ob_lo, Py_ssize_t ob_hi, T *acc)                     \
    {                                                                                                           \
        const Py_ssize_t hp = p->h + 2 * p->ph, wq = (p->wd + 2 * p->pw + p->sw - 1) / p->sw;                  \
        const Py_ssize_t k = p->c * p->kh * p->kw, sw = p->sw;                                                  \
        const Py_ssize_t kb_n = (k + WG_K - 1) / WG_K;                                                          \
        const Py_ssize_t plane = p->c * sw * hp * wq; /* an image: per channel, sw planes of columns */        \
        const Py_ssize_t chunk = Py_MAX(1, Py_MIN(p->n, WG_CACHED / (Py_ssize_t)sizeof(T) / plane));            \
        T *pad = scratch(sizeof(T) * (size_t)(chunk * plane + W));                                              \
        Py_ssize_t *offsets = scratch(sizeof(Py_ssize_t) * (size_t)(kb_n * WG_K));                              \
        char *read = scratch((size_t)(hp + sw)); /* which bordered rows, then which planes, a window reads */ \
        if (pad == NULL || offsets == NULL || read == NULL) {                                                   \
            scratch_free(pad), scratch_free(offsets), scratch_free(read);                                       \
            return -1;                                                                                          \
        }                                                                                                       \
        memset(read, 0, (size_t)(hp + sw));                                                                     \
        for (Py_ssize_t i = 0; i < p->kh; i++)                                                                  \
            for (Py_ssize_t y = 0; y < p->oh; y++)                                                              \
                read[y * p->sh + i * p->dh] = 1;                                                                \
        for (Py_ssize_t j = 0; j < p->kw; j++)                                                                  \
            read[hp + j * p->dw % sw] = 1;                                                                      \
        for (Py_ssize_t q = 0; q < kb_n * WG_K; q++) { /* patch row q's place in an image's buffer; past */    \
            Py_ssize_t e = q < k ? q : k - 1;          /* the last, the last again (its sums unused) */       \
            Py_ssize_t c = e / (p->kh * p->kw), i = e / p->kw % p->kh, col = e % p->kw * p->dw;                 \
            offsets[q] = ((c * sw + col % sw) * hp + i * p->dh) * wq + col / sw;                                \
        }                                                                                                       \
        memset(pad, 0, sizeof(T) * (size_t)(chunk * plane + W));                                                \
        const T *x = (const T *)p->x, *g = (const T *)p->g;                                                     \
        const Py_ssize_t tail = p->ow % W, full = p->ow - tail;                                                 \
        const M tail_mask = (M)((1u << tail) - 1);                                                              \
        for (Py_ssize_t n0 = 0; n0 < p->n; n0 += chunk) {                                                      \
            const Py_ssize_t images = Py_MIN(chunk, p->n - n0);                                                 \
            /* each image inside its zero border, column q of a bordered row at q / sw of plane q % sw: */    \
            /* a strided window's columns are then adjacent (rows and planes no window reads: left out) */    \
            for (Py_ssize_t m = 0; m < images; m++)                                                             \
                for (Py_ssize_t c = 0; c < p->c; c++)                                                           \
                    for (Py_ssize_t r = 0; r < p->h; r++) {                                                     \
                        if (!read[r + p->ph])                                                                   \
                            continue;                                                                           \
                        const T *src = x + (n0 + m) * p->xs[0] + c * p->xs[1] + r * p->xs[2];                   \
                        T *dst = pad + m * plane + (c * sw * hp + r + p->ph) * wq;                              \
                        if (sw == 1 && p->xs[3] == 1)                                                           \
                            memcpy(dst + p->pw, src, sizeof(T) * (size_t)p->wd);                                \
                        else                                                                                    \
                            for (Py_ssize_t f = 0; f < sw; f++) { /* plane f: the columns q + pw = f mod sw */ \
                                if (!read[hp + f])                                                              \
                                    continue;                                                                   \
                                Py_ssize_t q = ((f - p->pw) % sw + sw) % sw;                                    \
                                T *d = dst + f * hp * wq + (q + p->pw) / sw;                                    \
                                for (; q < p->wd; q += sw)                                                      \
                                    *d++ = src[q * p->xs[3]];                                                   \
                            }                                                                                   \
                    }                                                                                           \
            for (Py_ssize_t ob = ob_lo; ob < ob_hi; ob++) {                                                     \
                Py_ssize_t go[WG_O];                                                                            \
                for (int r = 0; r < WG_O; r++) /* past the last channel: the last again, its sums unused */    \
                    go[r] = (ob * WG_O + r < p->o ? ob * WG_O + r : p->o - 1) * p->gs[1];                       \
                for (Py_ssize_t kb = 0; kb < kb_n; kb++) {                                                      \
                    const Py_ssize_t *off = offsets + kb * WG_K;                                                \
                    V s[WG_O][WG_K];                                                                            \
                    for (int r = 0; r < WG_O; r++)                                                              \
                        for (int t = 0; t < WG_K; t++)                                                          \
                            s[r][t] = SET0();                                                                   \
                    for (Py_ssize_t m = 0; m < images; m++)                                                     \
                    for (Py_ssize_t y = 0; y < p->oh; y++) {                                                    \
                        const T *xr = pad + m * plane + y * p->sh * wq;                                         \
                        const T *gp[WG_O];                                                                      \
                        for (int r = 0; r < WG_O; r++)                                                          \
                            gp[r] = g + (n0 + m) * p->gs[0] + go[r] + y * p->gs[2];                             \
                        for (Py_ssize_t x0 = 0; x0 < full; x0 += W) {                                           \
                            V gv[WG_O];                                                                         \
                            for (int r = 0; r < WG_O; r++)                                                      \
                                gv[r] = LOAD(gp[r] + x0);                                                  \
                            for (int t = 0; t < WG_K; t++) {                                                    \
                                V xv = LOAD(xr + off[t] + x0);                                                  \
                                for (int r = 0; r < WG_O; r++)                                                  \
                                    s[r][t] = FMA(gv[r], xv, s[r][t]);                                          \
                            }                                                                                   \
                        }                                                                                       \
                        if (tail) {                                                                             \
                            V gv[WG_O];                                                                         \
                            for (int r = 0; r < WG_O; r++)                                                      \
                                gv[r] = MLOAD(tail_mask, gp[r] + full);                                    \
                            for (int t = 0; t < WG_K; t++) {                                                    \
                                V xv = MLOAD(tail_mask, xr + off[t] + full);                                    \
                                for (int r = 0; r < WG_O; r++)                                                  \
                                    s[r][t] = FMA(gv[r], xv, s[r][t]);                                          \
                            }                                                                                   \
                        }                                                                                       \
                    }                                                                                           \
                    for (int r = 0; r < WG_O; r++)                                                              \
                        for (int t = 0; t < WG_K; t++) {                                                        \
                            T *a = acc + ((ob * WG_O + r) * kb_n * WG_K + kb * WG_K + t) * W;                   \
                            STORE(a, ADD(LOAD(a), s[r][t]));                                                    \
                        }                                                                                       \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        scratch_free(pad), scratch_free(offsets), scratch_free(read);                                           \
        return 0;                                                                                               \
    }                                                                                                           \
                                                                                                                \
    /* out[o, q] = the sum of acc's lanes for (o, q) */                                                       \
    static AVX512 void wgrad_sum_##S(const WGrad *p, const T *acc)                                              \
    {                                                                                                           \
        const Py_ssize_t k = p->c * p->kh * p->kw, kb_n = (k + WG_K - 1) / WG_K;                                \
        T *out = (T *)p->out;                                                                                   \
        for (Py_ssize_t o = 0; o < p->o; o++)                                                                   \
            for (Py_ssize_t q = 0; q < k; q++)                                                                  \
                out[o * p->out_row + q] = RADD(LOAD(acc + (o * kb_n * WG_K + q) * W));                          \
    }

WGRAD_KERNEL(f, float, __m512, 16, __mmask16, _mm512_setzero_ps, _mm512_fmadd_ps, _mm512_maskz_loadu_ps,
             _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps, _mm512_reduce_add_ps)
WGRAD_KERNEL(d, double, __m512d, 8, __mmask8, _mm512_setzero_pd, _mm512_fmadd_pd, _mm512_maskz_loadu_pd,
             _mm512_loadu_pd, _mm512_storeu_pd, _mm512_add_pd, _mm512_reduce_add_pd)

typedef struct {
    const WGrad *p;
    void *acc;       /* (O, K, W) lane sums, rows padded to blocks: each job its own blocks of rows */
    Py_ssize_t ob_n; /* blocks of WG_O output channels */
    int jobs, failed;
    char kind;
} WGradJobs;

static void wgrad_job(int i, void *arg)
{
    WGradJobs *w = arg;
    Py_ssize_t lo = w->ob_n * i / w->jobs, hi = w->ob_n * (i + 1) / w->jobs;
    if ((w->kind == 'f' ? wgrad_f(w->p, lo, hi, w->acc) : wgrad_d(w->p, lo, hi, w->acc)) < 0)
        __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
}

/* The weight gradient, its blocks of output channels split over the native kernels' pool (as
 * many jobs as BLAS is told to use threads, where `pool` is there; one otherwise): each job
 * borders the images itself and sums into its own rows, so the values do not depend on the
 * number of jobs. -1 where memory ran out. */
static int wgrad(const WGrad *p, char kind, const PoolAPI *pool)
{
    size_t item = kind == 'f' ? sizeof(float) : sizeof(double);
    Py_ssize_t lanes = 64 / (Py_ssize_t)item, k = p->c * p->kh * p->kw;
    Py_ssize_t ob_n = (p->o + WG_O - 1) / WG_O, kb_n = (k + WG_K - 1) / WG_K;
    size_t bytes = item * (size_t)(ob_n * WG_O * kb_n * WG_K * lanes);
    void *acc = scratch(bytes);
    if (acc == NULL)
        return -1;
    memset(acc, 0, bytes);
    int width = pool != NULL ? pool->width() : 1;
    WGradJobs w = {p, acc, ob_n, (int)Py_MAX(1, Py_MIN(width, ob_n)), 0, kind};
    kernels_pool_run(pool, w.jobs, wgrad_job, &w);
    if (!w.failed) {
        if (kind == 'f')
            wgrad_sum_f(p, acc);
        else
            wgrad_sum_d(p, acc);
    }
    scratch_free(acc);
    return w.failed ? -1 : 0;
}

static int have_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
#else
static int have_avx512(void)
{
    return 0;
}
#endif

/* -- Python ---------------------------------------------------------------------------------- */

static int ISA = -1; /* whether the AVX-512 kernel runs here; decided at import */

static const char *bare_format(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    return (*f == '@' || *f == '=' || *f == '<') ? f + 1 : f;
}

/* an ndim-d float buffer's element strides; -1 with an exception set otherwise */
static int viewn(PyObject *obj, Py_buffer *v, int ndim, int writable, const char *what, char *kind,
                 Py_ssize_t *strides)
{
    if (PyObject_GetBuffer(obj, v, PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = bare_format(v);
    if (v->ndim != ndim || (strcmp(f, "f") != 0 && strcmp(f, "d") != 0)) {
        PyErr_Format(PyExc_ValueError, "gemm: %s must be a %d-d float32 or float64 array (got %d dims, format %s)",
                     what, ndim, v->ndim, f);
        PyBuffer_Release(v);
        return -1;
    }
    *kind = *f;
    for (int i = 0; i < ndim; i++) {
        if (v->strides[i] % v->itemsize != 0) {
            PyErr_Format(PyExc_ValueError, "gemm: %s's strides are not whole elements", what);
            PyBuffer_Release(v);
            return -1;
        }
        strides[i] = v->strides[i] / v->itemsize;
    }
    return 0;
}

static int view4(PyObject *obj, Py_buffer *v, int writable, const char *what, char *kind, Py_ssize_t *strides)
{
    return viewn(obj, v, 4, writable, what, kind, strides);
}

static PyObject *gemm(PyObject *self, PyObject *args)
{
    PyObject *ao, *bo, *co;
    if (!PyArg_ParseTuple(args, "OOO", &ao, &bo, &co))
        return NULL;
    if (ISA != 1) {
        PyErr_SetString(PyExc_RuntimeError, "gemm: this CPU has no AVX-512 (isa() is ''): use NumPy's matmul");
        return NULL;
    }
    Py_buffer av, bv, cv;
    Gemm g;
    char kb, kc;
    if (view4(ao, &av, 0, "a", &g.kind, g.as) < 0)
        return NULL;
    if (view4(bo, &bv, 0, "b", &kb, g.bs) < 0) {
        PyBuffer_Release(&av);
        return NULL;
    }
    if (view4(co, &cv, 1, "out", &kc, g.cs) < 0) {
        PyBuffer_Release(&av), PyBuffer_Release(&bv);
        return NULL;
    }
    const Py_ssize_t *as = av.shape, *bs = bv.shape, *cs = cv.shape;
    if (kb != g.kind || kc != g.kind) {
        PyErr_SetString(PyExc_ValueError, "gemm: a, b and out must share one dtype");
        goto done;
    }
    if (as[0] != cs[0] || bs[0] != cs[0] || as[1] != cs[1] || bs[1] != cs[1] || as[2] != cs[2] || bs[3] != cs[3]
        || as[3] != bs[2]) {
        PyErr_Format(PyExc_ValueError,
                     "gemm: shapes do not match: a (%zd, %zd, %zd, %zd) @ b (%zd, %zd, %zd, %zd) into out "
                     "(%zd, %zd, %zd, %zd)",
                     as[0], as[1], as[2], as[3], bs[0], bs[1], bs[2], bs[3], cs[0], cs[1], cs[2], cs[3]);
        goto done;
    }
    if (g.cs[3] != 1 && cs[3] > 1) {
        PyErr_SetString(PyExc_ValueError, "gemm: out's columns must be adjacent in memory");
        goto done;
    }
    g.b1 = cs[0], g.b2 = cs[1], g.m = cs[2], g.n = cs[3], g.k = as[3];
    g.a = av.buf, g.b = bv.buf, g.c = cv.buf;
    if (g.b1 * g.b2 * g.m * g.n == 0)
        goto done;
    if (g.k == 0) { /* an empty sum: zeros */
        Py_ssize_t item = cv.itemsize;
        for (Py_ssize_t i = 0; i < g.b1; i++)
            for (Py_ssize_t j = 0; j < g.b2; j++)
                for (Py_ssize_t r = 0; r < g.m; r++)
                    memset(g.c + (i * g.cs[0] + j * g.cs[1] + r * g.cs[2]) * item, 0, (size_t)(g.n * item));
        goto done;
    }
#ifdef GEMM_X86
    const PoolAPI *pool = kernels_pool();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gemm_split(&g, pool);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_NoMemory();
#endif
done:
    PyBuffer_Release(&av), PyBuffer_Release(&bv), PyBuffer_Release(&cv);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *conv2d(PyObject *self, PyObject *args)
{
    PyObject *xo, *wo, *yo;
    Conv cv;
    if (!PyArg_ParseTuple(args, "OOOnnnnnnnn", &xo, &wo, &yo, &cv.kh, &cv.kw, &cv.sh, &cv.sw, &cv.ph, &cv.pw, &cv.dh,
                          &cv.dw))
        return NULL;
    if (ISA != 1) {
        PyErr_SetString(PyExc_RuntimeError, "conv2d: this CPU has no AVX-512 (isa() is ''): use the im2col path");
        return NULL;
    }
    Py_buffer xv, wv, yv;
    char kx, kw, ky;
    if (viewn(xo, &xv, 4, 0, "input", &kx, cv.xs) < 0)
        return NULL;
    if (viewn(wo, &wv, 2, 0, "weight", &kw, cv.ws) < 0) {
        PyBuffer_Release(&xv);
        return NULL;
    }
    if (viewn(yo, &yv, 3, 1, "out", &ky, cv.ys) < 0) {
        PyBuffer_Release(&xv), PyBuffer_Release(&wv);
        return NULL;
    }
    cv.n = xv.shape[0], cv.c = xv.shape[1], cv.h = xv.shape[2], cv.wd = xv.shape[3], cv.o = wv.shape[0];
    cv.oh = cv.sh > 0 ? (cv.h + 2 * cv.ph - cv.dh * (cv.kh - 1) - 1) / cv.sh + 1 : 0;
    cv.ow = cv.sw > 0 ? (cv.wd + 2 * cv.pw - cv.dw * (cv.kw - 1) - 1) / cv.sw + 1 : 0;
    if (kw != kx || ky != kx) {
        PyErr_SetString(PyExc_ValueError, "conv2d: input, weight and out must share one dtype");
        goto done;
    }
    if (cv.kh < 1 || cv.kw < 1 || cv.sh < 1 || cv.sw < 1 || cv.dh < 1 || cv.dw < 1 || cv.ph < 0 || cv.pw < 0
        || cv.oh < 1 || cv.ow < 1 || wv.shape[1] != cv.c * cv.kh * cv.kw || yv.shape[0] != cv.n
        || yv.shape[1] != cv.o || yv.shape[2] != cv.oh * cv.ow || (cv.ys[2] != 1 && yv.shape[2] > 1)) {
        PyErr_Format(PyExc_ValueError,
                     "conv2d: input (%zd, %zd, %zd, %zd), weight (%zd, %zd) and out (%zd, %zd, %zd, columns adjacent) "
                     "do not fit a %zd x %zd kernel (stride %zd, %zd; padding %zd, %zd; dilation %zd, %zd)",
                     cv.n, cv.c, cv.h, cv.wd, wv.shape[0], wv.shape[1], yv.shape[0], yv.shape[1], yv.shape[2], cv.kh,
                     cv.kw, cv.sh, cv.sw, cv.ph, cv.pw, cv.dh, cv.dw);
        goto done;
    }
    cv.x = xv.buf, cv.w = wv.buf, cv.y = yv.buf;
    if (cv.n * cv.o == 0)
        goto done;
#ifdef GEMM_X86
    const PoolAPI *pool = kernels_pool();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = conv_split(&cv, kx, pool);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_NoMemory();
#endif
done:
    PyBuffer_Release(&xv), PyBuffer_Release(&wv), PyBuffer_Release(&yv);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *conv2d_weight_grad(PyObject *self, PyObject *args)
{
    PyObject *xo, *go, *oo;
    WGrad wg;
    if (!PyArg_ParseTuple(args, "OOOnnnnnnnn", &xo, &go, &oo, &wg.kh, &wg.kw, &wg.sh, &wg.sw, &wg.ph, &wg.pw, &wg.dh,
                          &wg.dw))
        return NULL;
    if (ISA != 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "conv2d_weight_grad: this CPU has no AVX-512 (isa() is ''): use the im2col path");
        return NULL;
    }
    Py_buffer xv, gv, ov;
    char kx, kg, ko;
    Py_ssize_t os[2];
    if (viewn(xo, &xv, 4, 0, "input", &kx, wg.xs) < 0)
        return NULL;
    if (viewn(go, &gv, 4, 0, "grad_output", &kg, wg.gs) < 0) {
        PyBuffer_Release(&xv);
        return NULL;
    }
    if (viewn(oo, &ov, 2, 1, "out", &ko, os) < 0) {
        PyBuffer_Release(&xv), PyBuffer_Release(&gv);
        return NULL;
    }
    wg.n = xv.shape[0], wg.c = xv.shape[1], wg.h = xv.shape[2], wg.wd = xv.shape[3], wg.o = gv.shape[1];
    wg.oh = gv.shape[2], wg.ow = gv.shape[3], wg.out_row = os[0];
    if (kg != kx || ko != kx) {
        PyErr_SetString(PyExc_ValueError, "conv2d_weight_grad: input, grad_output and out must share one dtype");
        goto done;
    }
    if (wg.kh < 1 || wg.kw < 1 || wg.sh < 1 || wg.sw < 1 || wg.dh < 1 || wg.dw < 1 || wg.ph < 0 || wg.pw < 0
        || gv.shape[0] != wg.n || wg.oh < 1 || wg.ow < 1
        || wg.oh != (wg.h + 2 * wg.ph - wg.dh * (wg.kh - 1) - 1) / wg.sh + 1
        || wg.ow != (wg.wd + 2 * wg.pw - wg.dw * (wg.kw - 1) - 1) / wg.sw + 1
        || ov.shape[0] != wg.o || ov.shape[1] != wg.c * wg.kh * wg.kw
        || (wg.gs[3] != 1 && wg.ow > 1) || (os[1] != 1 && ov.shape[1] > 1)) {
        PyErr_Format(PyExc_ValueError,
                     "conv2d_weight_grad: input (%zd, %zd, %zd, %zd), grad_output (%zd, %zd, %zd, %zd, columns "
                     "adjacent) and out (%zd, %zd, columns adjacent) do not fit a %zd x %zd kernel (stride %zd, "
                     "%zd; padding %zd, %zd; dilation %zd, %zd)",
                     wg.n, wg.c, wg.h, wg.wd, gv.shape[0], gv.shape[1], gv.shape[2], gv.shape[3], ov.shape[0],
                     ov.shape[1], wg.kh, wg.kw, wg.sh, wg.sw, wg.ph, wg.pw, wg.dh, wg.dw);
        goto done;
    }
    wg.x = xv.buf, wg.g = gv.buf, wg.out = ov.buf;
    if (wg.o * wg.c == 0)
        goto done;
    if (wg.n == 0) { /* an empty sum: zeros */
        for (Py_ssize_t o = 0; o < wg.o; o++)
            memset((char *)ov.buf + o * os[0] * ov.itemsize, 0, (size_t)(ov.shape[1] * ov.itemsize));
        goto done;
    }
#ifdef GEMM_X86
    const PoolAPI *pool = kernels_pool();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wgrad(&wg, kx, pool);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_NoMemory();
#endif
done:
    PyBuffer_Release(&xv), PyBuffer_Release(&gv), PyBuffer_Release(&ov);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *transpose(PyObject *self, PyObject *args)
{
    PyObject *so, *oo;
    if (!PyArg_ParseTuple(args, "OO", &so, &oo))
        return NULL;
    if (ISA != 1) {
        PyErr_SetString(PyExc_RuntimeError, "transpose: this CPU has no AVX-512 (isa() is ''): use NumPy's copy");
        return NULL;
    }
    Py_buffer sv, ov;
    char ks, ko;
    Py_ssize_t ss[2], os[2];
    if (viewn(so, &sv, 2, 0, "src", &ks, ss) < 0)
        return NULL;
    if (viewn(oo, &ov, 2, 1, "out", &ko, os) < 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    Py_ssize_t m = sv.shape[0], n = sv.shape[1];
    if (ko != ks || ov.shape[0] != n || ov.shape[1] != m || (ss[1] != 1 && n > 1) || (os[1] != 1 && m > 1)) {
        PyErr_Format(PyExc_ValueError,
                     "transpose: src (%zd, %zd) and out (%zd, %zd) must share one dtype, out src's shape reversed, "
                     "and both have their columns adjacent",
                     m, n, ov.shape[0], ov.shape[1]);
        goto done;
    }
#ifdef GEMM_X86
    const PoolAPI *pool = kernels_pool();
    Py_BEGIN_ALLOW_THREADS
    transpose_split(ks, sv.buf, m, n, ss[0], ov.buf, os[0], pool);
    Py_END_ALLOW_THREADS
#endif
done:
    PyBuffer_Release(&sv), PyBuffer_Release(&ov);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* GemmAPI's gemm (gemm_api.h): one 2-d product, as gemm() above runs it */
static int api_gemm(char kind, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const void *a, Py_ssize_t lda,
                    const void *b, Py_ssize_t ldb, void *c, Py_ssize_t ldc, const PoolAPI *pool)
{
    if (ISA != 1 || (kind != 'f' && kind != 'd') || m <= 0 || n <= 0 || k <= 0)
        return -2;
#ifdef GEMM_X86
    Gemm g = {.kind = kind, .b1 = 1, .b2 = 1, .m = m, .n = n, .k = k, .a = (const char *)a,
              .b = (const char *)b, .c = (char *)c,
              .as = {0, 0, lda, 1}, .bs = {0, 0, ldb, 1}, .cs = {0, 0, ldc, 1}};
    return gemm_split(&g, pool);
#else
    (void)lda, (void)ldb, (void)ldc, (void)a, (void)b, (void)c, (void)pool;
    return -2;
#endif
}

static const GemmAPI API = {api_gemm};

static PyObject *isa(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(ISA == 1 ? "avx512" : "");
}

static PyMethodDef methods[] = {
    {"gemm", gemm, METH_VARARGS,
     "gemm(a, b, out): out[i, j] = a[i, j] @ b[i, j] for 4-d float arrays of one dtype (two batch dims; "
     "out's columns adjacent)"},
    {"conv2d", conv2d, METH_VARARGS,
     "conv2d(input, weight, out, kh, kw, sh, sw, ph, pw, dh, dw): out[n] = weight (O x C*kh*kw) @ the patches of "
     "input[n] (groups 1; out (N, O, OH*OW), columns adjacent)"},
    {"conv2d_weight_grad", conv2d_weight_grad, METH_VARARGS,
     "conv2d_weight_grad(input, grad_output, out, kh, kw, sh, sw, ph, pw, dh, dw): out (O, C*kh*kw) = the weight "
     "gradient of a convolution, groups 1 (grad_output's and out's columns adjacent)"},
    {"transpose", transpose, METH_VARARGS,
     "transpose(src, out): out = src.T for 2-d float arrays of one dtype (columns adjacent in both)"},
    {"isa", isa, METH_NOARGS, "isa() -> 'avx512' where the kernel runs, '' where it does not"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gemm", "The NumPy backend's small-matrix product.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__gemm(void)
{
    ISA = have_avx512();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *api = PyCapsule_New((void *)&API, GEMM_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObject(m, "api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
