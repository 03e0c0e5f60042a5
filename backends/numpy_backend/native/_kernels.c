/* The NumPy backend's native kernels: the few loops NumPy cannot run in one pass.
 *
 * NumPy runs every op as its own pass over memory, and on small images (MNIST's 28x28
 * and 14x14 planes) its inner loops are too short, or too strided, to vectorise: max-pool's
 * backward took eight strided passes per window offset, Adam twelve passes per parameter,
 * cross-entropy fifteen NumPy calls on a 64 x 10 array. Each function here is one pass that
 * computes what the NumPy kernel computes, in the same order and precision (built with
 * -ffp-contract=off, no fast-math), so the pooling, fold, im2col and Adam results are bit for
 * bit those of the NumPy kernels; cross-entropy's exponentials (libm's, summed in double)
 * agree to float rounding. The Python side (the native package) decides when arrays qualify and
 * hands anything else to the NumPy kernels. The loops themselves are in typed.h, once per
 * element type.
 *
 * Arrays arrive through the buffer protocol (no NumPy headers at build time), with their
 * strides; float32 ("f") and float64 ("d") only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <string.h>

#include "threadpool.h"

/* -- buffers -------------------------------------------------------------------------------- */

typedef struct {
    Py_buffer view;
    int ok;
} Buf;

static int get_buf(PyObject *obj, Buf *b, int ndim, int writable, const char *what)
{
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    b->ok = 0;
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0)
        return -1;
    b->ok = 1;
    if (ndim >= 0 && b->view.ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d dims, got %d", what, ndim, b->view.ndim);
        return -1;
    }
    return 0;
}

static void release(Buf *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].ok)
            PyBuffer_Release(&bufs[i].view);
}

/* a buffer's struct format without a byte-order prefix of native order ("B" where it has none) */
static const char *bare_format(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    return (*f == '@' || *f == '=' || *f == '<') ? f + 1 : f;
}

/* 'f' or 'd' (a byte-order prefix of native order allowed), else 0 */
static char kind_of(const Py_buffer *v)
{
    const char *f = bare_format(v);
    if ((f[0] == 'f' && v->itemsize == 4) || (f[0] == 'd' && v->itemsize == 8))
        return f[0] == 'f' ? 'f' : 'd';
    return 0;
}

static int same_kind(Buf *bufs, int n, const char *what, char *kind)
{
    *kind = kind_of(&bufs[0].view);
    for (int i = 0; i < n; i++) {
        if (!*kind || kind_of(&bufs[i].view) != *kind) {
            PyErr_Format(PyExc_TypeError, "%s: expected float32 or float64 arrays of one dtype", what);
            return -1;
        }
    }
    return 0;
}

/* element strides of a buffer; -1 where one is not a whole number of elements */
static int element_strides(const Py_buffer *v, Py_ssize_t *out)
{
    for (int i = 0; i < v->ndim; i++) {
        if (v->strides[i] % v->itemsize) {
            PyErr_SetString(PyExc_ValueError, "native kernels: a stride is not a whole number of elements");
            return -1;
        }
        out[i] = v->strides[i] / v->itemsize;
    }
    return 0;
}

/* NumPy's maximum: NaN propagates, and on a tie the first operand is kept */
#define NP_MAX(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))

typedef struct {
    Py_ssize_t kh, kw, sh, sw, ph, pw, dh, dw;
} Geometry;

/* MaxPool2d(2): 2x2 windows at stride 2, no padding or dilation */
#define IS_2X2(g) ((g)->kh == 2 && (g)->kw == 2 && (g)->sh == 2 && (g)->sw == 2 && !(g)->ph && !(g)->pw \
                   && (g)->dh == 1 && (g)->dw == 1)
/* the stride passes each window's span: a position is in one window at most */
#define DISJOINT(g) ((g)->sh >= ((g)->kh - 1) * (g)->dh + 1 && (g)->sw >= ((g)->kw - 1) * (g)->dw + 1)

typedef struct {
    double decay, weight_decay, weight, one_minus_weight, beta2, one_minus_beta2, bias2, eps, step_size;
    int maximize, decoupled, small_weight;
} AdamConsts;

#include "vector_math.h" /* VECTOR_CLONES too */


/* exp over a block of floats in place for the softmax rows, whose entries are at most 0 (their
 * maximum is subtracted first): Cody-Waite reduction to r in [-ln2/2, ln2/2] and Cephes' degree-7
 * polynomial (within 2 ulp of expf), branch-free, the clamp and the cut-off on the bits as integers
 * (float selects are not vectorised under the default trapping math), so that the loop vectorises
 * at the width of the softmax's clone: glibc's vector expf, four lanes a call, took half the
 * softmax's time. Below -87.3 the result is 0 (exp(-inf) = 0 for a masked key, where the
 * polynomial would give the smallest normal); a NaN gives 0 here, and the softmax fills its row
 * with NaN itself. */
static inline void exp_rows_f(float *x, Py_ssize_t n)
{
    const int32_t limit = (int32_t)0xC2AE999Au; /* -87.3f: as integers, negative floats grow with magnitude */
    for (Py_ssize_t i = 0; i < n; i++) {
        float v = -fabsf(x[i]); /* +0 as -0, so that every entry is negative */
        int32_t vi, bits;
        memcpy(&vi, &v, 4);
        int32_t ci = vi < limit ? vi : limit, keep = vi <= limit ? -1 : 0;
        float c;
        memcpy(&c, &ci, 4);
        float t = c * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23: k = round(c / ln2) */
        float k = t - 12582912.0f;
        float r = c - k * 0.693359375f;
        r = r - k * -2.12194440e-4f;
        float p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        p = p * (r * r) + r + 1.0f;
        memcpy(&bits, &t, 4);
        bits = (bits - 0x4B400000 + 127) << 23; /* 2^k */
        float two_k, y;
        memcpy(&two_k, &bits, 4);
        y = p * two_k;
        memcpy(&bits, &y, 4);
        bits &= keep;
        memcpy(x + i, &bits, 4);
    }
}

static inline void exp_rows_d(double *x, Py_ssize_t n)
{
    exp_block_d(x, x, n);
}

/* one attention head's shape (attention.h): query rows L, keys S, embedding D, value width Dv,
 * the operands' row strides in elements, and the scale and causal flag of the op */
typedef struct {
    Py_ssize_t L, S, D, Dv, qs, ks, vs, gs, os;
    double scale;
    int causal;
} AttHead;

/* The scratch a head works in, in entries of its dtype, in this order: b^T (max(D, Dv) rows of S
 * padded to whole 64-byte vectors, at most 16 entries more), the weights and their gradient
 * (L x S each), and the operands packed: q (L x D), k (S x D), v (S x Dv), the gradient g (L x Dv). */
static inline Py_ssize_t att_bt_entries(const AttHead *h)
{
    return (h->D > h->Dv ? h->D : h->Dv) * (h->S + 16);
}

static inline Py_ssize_t att_scratch_entries(const AttHead *h)
{
    return att_bt_entries(h) + 2 * h->L * h->S + h->L * h->D + h->S * h->D + h->S * h->Dv + h->L * h->Dv;
}

#define T float
#define SUFFIX f
#define SQRT sqrtf
#define EXP expf
#define EXP_BLOCK exp_rows_f
#define EXP_ANY exp_block_f
#include "typed.h"
#include "attention.h"
#undef T
#undef SUFFIX
#undef SQRT
#undef EXP
#undef EXP_BLOCK
#undef EXP_ANY
#define T double
#define SUFFIX d
#define SQRT sqrt
#define EXP exp
#define EXP_BLOCK exp_rows_d
#define EXP_ANY exp_block_d
#include "typed.h"
#include "attention.h"
#undef T
#undef SUFFIX
#undef SQRT
#undef EXP
#undef EXP_BLOCK

/* -- splitting a loop over the pool (threadpool.c) ---------------------------------------------- */

/* Below this many array elements a job saves less than handing it to a worker costs */
#define MIN_JOB_ELEMENTS 32768

typedef void (*RangeBody)(Py_ssize_t lo, Py_ssize_t hi, int job, void *ctx);

typedef struct {
    RangeBody body;
    void *ctx;
    Py_ssize_t total;
    int n;
} Split;

static void split_job(int i, void *arg)
{
    Split *s = arg;
    Py_ssize_t lo = s->total * i / s->n, hi = s->total * (i + 1) / s->n;
    if (lo < hi)
        s->body(lo, hi, i, s->ctx);
}

/* body over items [0, total), which touch `elements` array elements in all: in at most `width`
 * jobs (pool_width(), read once by the caller, which sizes per-job scratch by it), each with at
 * least MIN_JOB_ELEMENTS, else on the caller alone. Each item is computed as it is alone, so
 * results do not depend on the split. Call without the GIL. */
static void parallel_for(int width, Py_ssize_t total, Py_ssize_t elements, RangeBody body, void *ctx)
{
    Py_ssize_t n = width;
    if (n > total)
        n = total;
    if (n > elements / MIN_JOB_ELEMENTS)
        n = elements / MIN_JOB_ELEMENTS;
    if (n <= 1) {
        if (total > 0)
            body(0, total, 0, ctx);
        return;
    }
    Split s = {body, ctx, total, (int)n};
    pool_run((int)n, split_job, &s, 0);
}

static int parse_geometry(PyObject *args, Py_ssize_t first, Geometry *g)
{
    Py_ssize_t *v[] = {&g->kh, &g->kw, &g->sh, &g->sw, &g->ph, &g->pw, &g->dh, &g->dw};
    for (int i = 0; i < 8; i++) {
        *v[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(args, first + i));
        if (*v[i] == -1 && PyErr_Occurred())
            return -1;
    }
    if (g->kh <= 0 || g->kw <= 0 || g->sh <= 0 || g->sw <= 0 || g->dh <= 0 || g->dw <= 0 || g->ph < 0 || g->pw < 0) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d: kernel, stride and dilation must be positive");
        return -1;
    }
    return 0;
}

static int check_args(PyObject *args, Py_ssize_t n, const char *what)
{
    if (PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", what, n, PyTuple_GET_SIZE(args));
        return -1;
    }
    return 0;
}

/* a pooling call's arguments: n (N, C, H, W) arrays of one float dtype, the last one written,
 * with their element strides in s[i], then the eight geometry ints; on failure the buffers are
 * released and an exception is set */
static int pool_args(PyObject *args, Buf *bufs, int n, Py_ssize_t (*s)[4], Geometry *g, char *kind,
                     const char *what)
{
    if (check_args(args, n + 8, what) < 0 || parse_geometry(args, n, g) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (get_buf(PyTuple_GET_ITEM(args, i), &bufs[i], 4, i == n - 1, what) < 0 ||
            element_strides(&bufs[i].view, s[i]) < 0) {
            release(bufs, n);
            return -1;
        }
    if (same_kind(bufs, n, what, kind) < 0) {
        release(bufs, n);
        return -1;
    }
    return 0;
}

#define PLANE(b, st, a_, c_) ((char *)(b).view.buf + ((a_) * (st)[0] + (c_) * (st)[1]) * (b).view.itemsize)

typedef struct {
    Buf *bufs;
    Py_ssize_t (*s)[4];
    const Geometry *g;
    char kind;
    Py_ssize_t *first; /* the backward's scratch: one window row per job */
} PoolCall;

static void pool_fwd_planes(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    PoolCall *k = p;
    Buf *bufs = k->bufs;
    Py_ssize_t (*s)[4] = k->s;
    const Py_ssize_t *xs = bufs[0].view.shape, *ys = bufs[1].view.shape;
    (void)job;
    for (Py_ssize_t q = lo; q < hi; q++) {
        Py_ssize_t a = q / xs[1], c = q % xs[1];
        if (k->kind == 'f')
            pool_fwd_plane_f((const float *)PLANE(bufs[0], s[0], a, c), s[0][2], s[0][3], xs[2], xs[3],
                             (float *)PLANE(bufs[1], s[1], a, c), s[1][2], s[1][3], ys[2], ys[3], k->g);
        else
            pool_fwd_plane_d((const double *)PLANE(bufs[0], s[0], a, c), s[0][2], s[0][3], xs[2], xs[3],
                             (double *)PLANE(bufs[1], s[1], a, c), s[1][2], s[1][3], ys[2], ys[3], k->g);
    }
}

/* max_pool2d(input, out, kh, kw, sh, sw, ph, pw, dh, dw): out (N, C, OH, OW) filled */
static PyObject *max_pool2d(PyObject *self, PyObject *args)
{
    Buf bufs[2] = {0};
    Py_ssize_t s[2][4];
    Geometry g;
    char kind;
    if (pool_args(args, bufs, 2, s, &g, &kind, "max_pool2d") < 0)
        return NULL;
    const Py_ssize_t *xs = bufs[0].view.shape;
    PoolCall k = {bufs, s, &g, kind, NULL};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, xs[0] * xs[1], xs[0] * xs[1] * xs[2] * xs[3], pool_fwd_planes, &k);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

static void pool_bwd_planes(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    PoolCall *k = p;
    Buf *bufs = k->bufs;
    Py_ssize_t (*s)[4] = k->s;
    const Py_ssize_t *xs = bufs[1].view.shape, *ys = bufs[2].view.shape;
    Py_ssize_t *first = k->first + job * (ys[2] * ys[3] > 0 ? ys[2] * ys[3] : 1);
    for (Py_ssize_t q = lo; q < hi; q++) {
        Py_ssize_t a = q / xs[1], c = q % xs[1];
        if (k->kind == 'f')
            pool_bwd_plane_f((const float *)PLANE(bufs[0], s[0], a, c), s[0][2], s[0][3],
                             (const float *)PLANE(bufs[1], s[1], a, c), s[1][2], s[1][3], xs[2], xs[3],
                             (const float *)PLANE(bufs[2], s[2], a, c), s[2][2], s[2][3], ys[2], ys[3],
                             (float *)PLANE(bufs[3], s[3], a, c), s[3][2], s[3][3], k->g, first);
        else
            pool_bwd_plane_d((const double *)PLANE(bufs[0], s[0], a, c), s[0][2], s[0][3],
                             (const double *)PLANE(bufs[1], s[1], a, c), s[1][2], s[1][3], xs[2], xs[3],
                             (const double *)PLANE(bufs[2], s[2], a, c), s[2][2], s[2][3], ys[2], ys[3],
                             (double *)PLANE(bufs[3], s[3], a, c), s[3][2], s[3][3], k->g, first);
    }
}

/* max_pool2d_backward(grad_output, input, output, dx, kh, kw, sh, sw, ph, pw, dh, dw):
 * dx (N, C, H, W) overwritten */
static PyObject *max_pool2d_backward(PyObject *self, PyObject *args)
{
    Buf bufs[4] = {0};
    Py_ssize_t s[4][4];
    Geometry g;
    char kind;
    if (pool_args(args, bufs, 4, s, &g, &kind, "max_pool2d_backward") < 0)
        return NULL;
    const Py_ssize_t *xs = bufs[1].view.shape, *ys = bufs[2].view.shape;
    Py_ssize_t per = ys[2] * ys[3] > 0 ? ys[2] * ys[3] : 1;
    int width = pool_width();
    Py_ssize_t *first = PyMem_Malloc(sizeof(Py_ssize_t) * per * width);
    if (!first) {
        release(bufs, 4);
        return PyErr_NoMemory();
    }
    PoolCall k = {bufs, s, &g, kind, first};
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, xs[0] * xs[1], xs[0] * xs[1] * xs[2] * xs[3], pool_bwd_planes, &k);
    Py_END_ALLOW_THREADS
    PyMem_Free(first);
    release(bufs, 4);
    Py_RETURN_NONE;
}

static int contiguous_like(Buf *bufs, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (!PyBuffer_IsContiguous(&bufs[i].view, 'C') || bufs[i].view.len != bufs[0].view.len) {
            PyErr_Format(PyExc_ValueError, "%s: expected C-contiguous arrays of one size", what);
            return -1;
        }
    }
    return 0;
}

typedef struct {
    void *a[5]; /* param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or NULL */
    const AdamConsts *k;
    char kind;
} AdamCall;

/* an element range of every array: the elements are independent */
static void adam_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    AdamCall *c = p;
    (void)job;
    if (c->kind == 'f') {
        float **a = (float **)c->a;
        adam_f(a[0] + lo, a[1] + lo, a[2] + lo, a[3] + lo, a[4] ? a[4] + lo : NULL, hi - lo, c->k);
    } else {
        double **a = (double **)c->a;
        adam_d(a[0] + lo, a[1] + lo, a[2] + lo, a[3] + lo, a[4] ? a[4] + lo : NULL, hi - lo, c->k);
    }
}

/* adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or None, decay, weight_decay,
 *           weight, one_minus_weight, beta2, one_minus_beta2, bias2, eps, step_size,
 *           maximize, decoupled, small_weight): the arrays updated in place */
static PyObject *adam_step(PyObject *self, PyObject *args)
{
    PyObject *arrays[5];
    AdamConsts k;
    Buf bufs[5] = {0};
    char kind;
    if (!PyArg_ParseTuple(args, "OOOOOdddddddddppp:adam_step", &arrays[0], &arrays[1], &arrays[2], &arrays[3],
                          &arrays[4], &k.decay, &k.weight_decay, &k.weight, &k.one_minus_weight, &k.beta2,
                          &k.one_minus_beta2, &k.bias2, &k.eps, &k.step_size, &k.maximize, &k.decoupled,
                          &k.small_weight))
        return NULL;
    int count = arrays[4] != Py_None ? 5 : 4;
    for (int i = 0; i < count; i++)
        if (get_buf(arrays[i], &bufs[i], -1, i != 1, "adam_step") < 0) {
            release(bufs, 5);
            return NULL;
        }
    if (same_kind(bufs, count, "adam_step", &kind) < 0 || contiguous_like(bufs, count, "adam_step") < 0) {
        release(bufs, 5);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.len / bufs[0].view.itemsize;
    void *p = bufs[0].view.buf, *g = bufs[1].view.buf, *m = bufs[2].view.buf, *v = bufs[3].view.buf;
    void *vmax = count == 5 ? bufs[4].view.buf : NULL;
    AdamCall call = {{p, g, m, v, vmax}, &k, kind};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, n, 5 * n, adam_range, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 5);
    Py_RETURN_NONE;
}

typedef struct {
    Buf *bufs;
    const Py_ssize_t *cs, *as;
    Py_ssize_t step[4]; /* sh, sw, dh, dw */
    char kind;
} FoldCall;

/* planes (l1, l2) [lo, hi) in row-major order: each writes its own accumulator plane */
static void fold_planes(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    FoldCall *k = p;
    const Py_ssize_t *c = k->bufs[0].view.shape, *a = k->bufs[1].view.shape, *cs = k->cs, *as = k->as;
    Py_ssize_t item = k->bufs[0].view.itemsize, sh = k->step[0], sw = k->step[1], dh = k->step[2], dw = k->step[3];
    (void)job;
    for (Py_ssize_t q = lo; q < hi; q++) {
        Py_ssize_t l1 = q / c[1], l2 = q % c[1];
        const char *cp = (const char *)k->bufs[0].view.buf + (l1 * cs[0] + l2 * cs[1]) * item;
        char *ap = (char *)k->bufs[1].view.buf + (l1 * as[0] + l2 * as[1]) * item;
        if (k->kind == 'f')
            fold_plane_f((const float *)cp, cs + 2, c[2], c[3], c[4], c[5], (float *)ap, as[2], as[3], a[2], a[3],
                         sh, sw, dh, dw);
        else
            fold_plane_d((const double *)cp, cs + 2, c[2], c[3], c[4], c[5], (double *)ap, as[2], as[3], a[2], a[3],
                         sh, sw, dh, dw);
    }
}

/* fold2d(cols, acc, sh, sw, dh, dw): cols (L1, L2, OH, OW, KH, KW) any strides, acc (L1, L2, H, W)
 * overwritten; every window must lie inside acc */
static PyObject *fold2d(PyObject *self, PyObject *args)
{
    PyObject *cols_obj, *acc_obj;
    Py_ssize_t sh, sw, dh, dw, cs[6], as[4];
    Buf bufs[2] = {0};
    char kind;
    if (!PyArg_ParseTuple(args, "OOnnnn:fold2d", &cols_obj, &acc_obj, &sh, &sw, &dh, &dw))
        return NULL;
    if (get_buf(cols_obj, &bufs[0], 6, 0, "fold2d cols") < 0 || get_buf(acc_obj, &bufs[1], 4, 1, "fold2d acc") < 0
        || same_kind(bufs, 2, "fold2d", &kind) < 0 || element_strides(&bufs[0].view, cs) < 0
        || element_strides(&bufs[1].view, as) < 0) {
        release(bufs, 2);
        return NULL;
    }
    const Py_ssize_t *c = bufs[0].view.shape, *a = bufs[1].view.shape;
    if (c[0] != a[0] || c[1] != a[1] || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0
        || (c[2] && (c[2] - 1) * sh + (c[4] - 1) * dh >= a[2]) || (c[3] && (c[3] - 1) * sw + (c[5] - 1) * dw >= a[3])) {
        PyErr_SetString(PyExc_ValueError, "fold2d: the windows do not fit the accumulator");
        release(bufs, 2);
        return NULL;
    }
    FoldCall call = {bufs, cs, as, {sh, sw, dh, dw}, kind};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, c[0] * c[1], bufs[0].view.len / bufs[0].view.itemsize, fold_planes, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

typedef struct {
    Buf *bufs;
    const Py_ssize_t *xs;
    Py_ssize_t n0, nb, oh, ow;
    const Geometry *g;
    char kind;
    int per_image;
} Im2colCall;

/* the columns of images [lo, hi) of the call's nb: each image's columns are its own */
static void im2col_images(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    Im2colCall *k = p;
    const Py_ssize_t *x = k->bufs[0].view.shape;
    (void)job;
    if (k->kind == 'f')
        im2col_f((const float *)k->bufs[0].view.buf, k->xs, x[1], x[2], x[3], k->n0, k->nb,
                 (float *)k->bufs[1].view.buf, k->oh, k->ow, k->g, lo, hi, k->per_image);
    else
        im2col_d((const double *)k->bufs[0].view.buf, k->xs, x[1], x[2], x[3], k->n0, k->nb,
                 (double *)k->bufs[1].view.buf, k->oh, k->ow, k->g, lo, hi, k->per_image);
}

/* im2col(input, cols, n0, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw): input (N, C, H, W) any
 * strides; cols (C*KH*KW, NB*OH*OW) C-contiguous, or (NB, C*KH*KW, OH*OW) (each image's patches
 * whole), overwritten with the first OH x OW windows of images n0 .. n0 + NB (NB from cols'
 * size) */
static PyObject *im2col(PyObject *self, PyObject *args)
{
    Buf bufs[2] = {0};
    Py_ssize_t xs[4], v[3];
    Geometry g;
    char kind;
    if (check_args(args, 13, "im2col") < 0 || parse_geometry(args, 5, &g) < 0)
        return NULL;
    for (int i = 0; i < 3; i++)
        if ((v[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(args, 2 + i))) == -1 && PyErr_Occurred())
            return NULL;
    Py_ssize_t n0 = v[0], oh = v[1], ow = v[2];
    if (get_buf(PyTuple_GET_ITEM(args, 0), &bufs[0], 4, 0, "im2col input") < 0 ||
        get_buf(PyTuple_GET_ITEM(args, 1), &bufs[1], -1, 1, "im2col cols") < 0 || same_kind(bufs, 2, "im2col", &kind) < 0
        || element_strides(&bufs[0].view, xs) < 0) {
        release(bufs, 2);
        return NULL;
    }
    const Py_ssize_t *x = bufs[0].view.shape, *cs = bufs[1].view.shape;
    int per_image = bufs[1].view.ndim == 3;
    /* the windows the geometry gives; the caller may take fewer (a transposed convolution's) */
    Py_ssize_t span_h = x[2] + 2 * g.ph - g.dh * (g.kh - 1) - 1, span_w = x[3] + 2 * g.pw - g.dw * (g.kw - 1) - 1;
    Py_ssize_t per = oh * ow, nb = per_image ? cs[0] : (per > 0 && bufs[1].view.ndim == 2 ? cs[1] / per : 0);
    Py_ssize_t rows = per_image ? cs[1] : cs[0], total = bufs[1].view.len / bufs[1].view.itemsize;
    if ((bufs[1].view.ndim != 2 && !per_image) || !PyBuffer_IsContiguous(&bufs[1].view, 'C') || oh <= 0 || ow <= 0
        || span_h < 0 || span_w < 0 || oh > span_h / g.sh + 1 || ow > span_w / g.sw + 1 || rows != x[1] * g.kh * g.kw
        || nb * per * rows != total || n0 < 0 || n0 + nb > x[0]) {
        PyErr_SetString(PyExc_ValueError, "im2col: cols must be C-contiguous (C*kh*kw, images*OH*OW) or (images, "
                                          "C*kh*kw, OH*OW) for windows and images inside the input");
        release(bufs, 2);
        return NULL;
    }
    Im2colCall call = {bufs, xs, n0, nb, oh, ow, &g, kind, per_image};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, nb, total, im2col_images, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

/* the int64 target buffer (N,) and its element stride */
static int get_targets(PyObject *obj, Buf *b, Py_ssize_t n, Py_ssize_t *stride)
{
    if (get_buf(obj, b, 1, 0, "cross_entropy target") < 0)
        return -1;
    const char *f = b->view.format;
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (b->view.itemsize != 8 || (*f != 'q' && *f != 'l') || b->view.shape[0] != n || b->view.strides[0] % 8) {
        PyErr_SetString(PyExc_TypeError, "cross_entropy: expected an int64 target of one index per row");
        return -1;
    }
    *stride = b->view.strides[0] / 8;
    return 0;
}

/* cross_entropy's rows split over the pool: each job's rows as alone (so the values do not depend
 * on the split), its result in results[job] (a count, or -1 - the first bad row) */
typedef struct {
    const void *x, *scale;
    const long long *t;
    void *out;    /* loss (forward) or dx (backward) */
    char *buf;    /* forward: a row of C entries per job */
    Py_ssize_t xs0, xs1, c, ts, per_row, *results;
    long long ignore;
    double k;     /* backward: the scale of every row unless per_row */
    char kind, backward;
} CeCall;

static void ce_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    CeCall *e = p;
    Py_ssize_t r;
    if (e->backward)
        r = e->kind == 'f' ? ce_bwd_f(e->x, e->xs0, e->xs1, lo, hi, e->c, e->t, e->ts, e->ignore, e->scale, e->per_row,
                                      (float)e->k, e->out)
                           : ce_bwd_d(e->x, e->xs0, e->xs1, lo, hi, e->c, e->t, e->ts, e->ignore, e->scale, e->per_row,
                                      e->k, e->out);
    else
        r = e->kind == 'f' ? ce_fwd_f(e->x, e->xs0, e->xs1, lo, hi, e->c, e->t, e->ts, e->ignore, e->out,
                                      (float *)e->buf + (size_t)job * (size_t)e->c)
                           : ce_fwd_d(e->x, e->xs0, e->xs1, lo, hi, e->c, e->t, e->ts, e->ignore, e->out,
                                      (double *)e->buf + (size_t)job * (size_t)e->c);
    e->results[job] = r;
}

/* ce_range over rows [0, n) on up to `width` jobs: the total count, or -1 - the first bad row */
static Py_ssize_t ce_run(CeCall *e, Py_ssize_t n, int width, Py_ssize_t *results)
{
    for (int j = 0; j < width; j++)
        results[j] = 0;
    e->results = results;
    parallel_for(width, n, n * e->c, ce_range, e);
    Py_ssize_t total = 0, bad = 0;
    for (int j = 0; j < width; j++) { /* jobs hold rows in order: the first bad one is the first job's */
        if (results[j] < 0 && bad == 0)
            bad = results[j];
        else if (results[j] > 0)
            total += results[j];
    }
    return bad < 0 ? bad : total;
}

static PyObject *bad_target(Py_ssize_t r)
{
    PyErr_Format(PyExc_IndexError, "cross_entropy: target of row %zd is out of range", -1 - r);
    return NULL;
}

/* cross_entropy(input (N, C), target (N,) int64, ignore_index, loss (N,)): loss filled; returns
 * the number of targets not ignored */
static PyObject *cross_entropy(PyObject *self, PyObject *args)
{
    PyObject *x_obj, *t_obj, *loss_obj;
    long long ignore;
    Buf bufs[3] = {0};
    Py_ssize_t xs[2], ts;
    char kind;
    if (!PyArg_ParseTuple(args, "OOLO:cross_entropy", &x_obj, &t_obj, &ignore, &loss_obj))
        return NULL;
    if (get_buf(x_obj, &bufs[0], 2, 0, "cross_entropy input") < 0 || get_buf(loss_obj, &bufs[1], 1, 1, "loss") < 0
        || same_kind(bufs, 2, "cross_entropy", &kind) < 0 || element_strides(&bufs[0].view, xs) < 0
        || get_targets(t_obj, &bufs[2], bufs[0].view.shape[0], &ts) < 0
        || !PyBuffer_IsContiguous(&bufs[1].view, 'C') || bufs[1].view.shape[0] != bufs[0].view.shape[0]) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "cross_entropy: loss must be a contiguous (N,) array");
        release(bufs, 3);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.shape[0], c = bufs[0].view.shape[1], r;
    int width = pool_width();
    /* each job's row of exponentials, and its result */
    void *rows = PyMem_RawMalloc((size_t)width * (size_t)(c ? c : 1) * (size_t)bufs[0].view.itemsize);
    Py_ssize_t *results = PyMem_RawMalloc((size_t)width * sizeof(Py_ssize_t));
    if (rows == NULL || results == NULL) {
        PyMem_RawFree(rows), PyMem_RawFree(results);
        release(bufs, 3);
        return PyErr_NoMemory();
    }
    CeCall e = {.x = bufs[0].view.buf, .t = bufs[2].view.buf, .out = bufs[1].view.buf, .buf = rows, .xs0 = xs[0],
                .xs1 = xs[1], .c = c, .ts = ts, .ignore = ignore, .kind = kind, .backward = 0};
    Py_BEGIN_ALLOW_THREADS
    r = ce_run(&e, n, width, results);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(rows), PyMem_RawFree(results);
    release(bufs, 3);
    return r < 0 ? bad_target(r) : PyLong_FromSsize_t(r);
}

/* cross_entropy_backward(input (N, C), target (N,) int64, ignore_index, scale (1,) or (N,), mean,
 * dx (N, C)): dx filled; with mean, the (1,) scale is divided by the count of targets */
static PyObject *cross_entropy_backward(PyObject *self, PyObject *args)
{
    PyObject *x_obj, *t_obj, *scale_obj, *dx_obj;
    long long ignore;
    int mean;
    Buf bufs[4] = {0};
    Py_ssize_t xs[2], ts;
    char kind;
    if (!PyArg_ParseTuple(args, "OOLOpO:cross_entropy_backward", &x_obj, &t_obj, &ignore, &scale_obj, &mean,
                          &dx_obj))
        return NULL;
    if (get_buf(x_obj, &bufs[0], 2, 0, "cross_entropy_backward input") < 0
        || get_buf(dx_obj, &bufs[1], 2, 1, "dx") < 0 || get_buf(scale_obj, &bufs[2], 1, 0, "scale") < 0
        || same_kind(bufs, 3, "cross_entropy_backward", &kind) < 0 || element_strides(&bufs[0].view, xs) < 0
        || get_targets(t_obj, &bufs[3], bufs[0].view.shape[0], &ts) < 0) {
        release(bufs, 4);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.shape[0], c = bufs[0].view.shape[1], r, k = bufs[2].view.shape[0];
    if (!PyBuffer_IsContiguous(&bufs[1].view, 'C') || !PyBuffer_IsContiguous(&bufs[2].view, 'C')
        || bufs[1].view.shape[0] != n || bufs[1].view.shape[1] != c || (k != 1 && (k != n || mean)) || n * c == 0) {
        if (n * c == 0 && bufs[1].view.shape[0] == n && bufs[1].view.shape[1] == c) {  /* nothing to fill */
            release(bufs, 4);
            Py_RETURN_NONE;
        }
        PyErr_SetString(PyExc_ValueError, "cross_entropy_backward: dx must be a contiguous (N, C) array and scale "
                                          "(1,) or, without mean, (N,)");
        release(bufs, 4);
        return NULL;
    }
    const long long *t = bufs[3].view.buf;
    Py_ssize_t per_row = k == n && k != 1;
    int width = pool_width();
    Py_ssize_t *results = PyMem_RawMalloc((size_t)width * sizeof(Py_ssize_t));
    if (results == NULL) {
        release(bufs, 4);
        return PyErr_NoMemory();
    }
    CeCall e = {.x = bufs[0].view.buf, .scale = bufs[2].view.buf, .t = t, .out = bufs[1].view.buf, .xs0 = xs[0],
                .xs1 = xs[1], .c = c, .ts = ts, .per_row = per_row, .ignore = ignore, .kind = kind, .backward = 1};
    /* every kept row's scale: scale[0], divided by the count of targets not ignored for the mean, in
     * the tensor's dtype (no targets: 0/0, which no row uses) */
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; mean && i < n; i++)
        count += t[i * ts] != ignore;
    if (kind == 'f') {
        float k0 = ((const float *)bufs[2].view.buf)[0];
        e.k = mean ? k0 / (float)count : k0;
    } else {
        double k0 = ((const double *)bufs[2].view.buf)[0];
        e.k = mean ? k0 / (double)count : k0;
    }
    Py_BEGIN_ALLOW_THREADS
    r = ce_run(&e, n, width, results);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(results);
    release(bufs, 4);
    if (r < 0)
        return bad_target(r);
    Py_RETURN_NONE;
}

typedef struct {
    void *a[3]; /* grad_output, input or output, out: C-contiguous, one size */
    double threshold;
    char kind;
    char op; /* 't' threshold_backward, 'h' tanh_backward, 's' sigmoid_backward, 'r' relu, 'e' erf,
                'g' gelu, 'G' gelu_backward (threshold nonzero: the tanh form) */
} ElementCall;

static void element_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    ElementCall *c = p;
    Py_ssize_t n = hi - lo;
    (void)job;
    if (c->kind == 'f') {
        const float *g = (const float *)c->a[0] + lo, *x = (const float *)c->a[1] + lo;
        float *out = (float *)c->a[2] + lo;
        if (c->op == 't')
            threshold_bwd_f(g, x, (float)c->threshold, out, n);
        else if (c->op == 'r')
            relu_f(g, out, n);
        else if (c->op == 'e')
            erf_f(g, out, n);
        else if (c->op == 'g')
            gelu_f(g, out, n, c->threshold != 0);
        else if (c->op == 'G')
            gelu_bwd_f(g, x, out, n, c->threshold != 0);
        else
            (c->op == 's' ? sigmoid_bwd_f : tanh_bwd_f)(g, x, out, n);
    } else {
        const double *g = (const double *)c->a[0] + lo, *x = (const double *)c->a[1] + lo;
        double *out = (double *)c->a[2] + lo;
        if (c->op == 't')
            threshold_bwd_d(g, x, c->threshold, out, n);
        else if (c->op == 'r')
            relu_d(g, out, n);
        else if (c->op == 'e')
            erf_d(g, out, n);
        else if (c->op == 'g')
            gelu_d(g, out, n, c->threshold != 0);
        else if (c->op == 'G')
            gelu_bwd_d(g, x, out, n, c->threshold != 0);
        else
            (c->op == 's' ? sigmoid_bwd_d : tanh_bwd_d)(g, x, out, n);
    }
}

/* The element-wise kernels' shared body: `count` C-contiguous arrays of one size and kind (the
 * operands, then out), the loop split over the pool; `names` say which argument is wrong. */
static PyObject *run_elementwise(PyObject **objs, const char **names, int count, double threshold, char op)
{
    Buf bufs[3] = {0};
    char kind;
    for (int i = 0; i < count; i++)
        if (get_buf(objs[i], &bufs[i], -1, i == count - 1, names[i]) < 0) {
            release(bufs, count);
            return NULL;
        }
    if (same_kind(bufs, count, names[0], &kind) < 0 || contiguous_like(bufs, count, names[0]) < 0) {
        release(bufs, count);
        return NULL;
    }
    Py_ssize_t n = bufs[0].view.len / bufs[0].view.itemsize;
    /* a[1] is the second operand; a one-operand loop (relu) gets its input there too, unread */
    ElementCall call = {{bufs[0].view.buf, bufs[count - 2].view.buf, bufs[count - 1].view.buf}, threshold, kind, op};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, n, count * n, element_range, &call);
    Py_END_ALLOW_THREADS
    release(bufs, count);
    Py_RETURN_NONE;
}

/* relu(input, out): two C-contiguous arrays of one size */
static PyObject *relu(PyObject *self, PyObject *args)
{
    PyObject *objs[2];
    const char *names[2] = {"relu", "out"};
    if (!PyArg_ParseTuple(args, "OO:relu", &objs[0], &objs[1]))
        return NULL;
    return run_elementwise(objs, names, 2, 0.0, 'r');
}

/* erf(input, out): two C-contiguous arrays of one size */
static PyObject *erf_kernel(PyObject *self, PyObject *args)
{
    PyObject *objs[2];
    const char *names[2] = {"erf", "out"};
    if (!PyArg_ParseTuple(args, "OO:erf", &objs[0], &objs[1]))
        return NULL;
    return run_elementwise(objs, names, 2, 0.0, 'e');
}

/* gelu(input, tanh_form, out): two C-contiguous arrays of one size */
static PyObject *gelu_kernel(PyObject *self, PyObject *args)
{
    PyObject *objs[2];
    const char *names[2] = {"gelu", "out"};
    int tanh_form;
    if (!PyArg_ParseTuple(args, "OpO:gelu", &objs[0], &tanh_form, &objs[1]))
        return NULL;
    return run_elementwise(objs, names, 2, tanh_form, 'g');
}

/* gelu_backward(grad_output, input, tanh_form, out): three C-contiguous arrays of one size */
static PyObject *gelu_backward_kernel(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    const char *names[3] = {"gelu_backward", "input", "out"};
    int tanh_form;
    if (!PyArg_ParseTuple(args, "OOpO:gelu_backward", &objs[0], &objs[1], &tanh_form, &objs[2]))
        return NULL;
    return run_elementwise(objs, names, 3, tanh_form, 'G');
}

/* threshold_backward(grad_output, input, threshold, out): three C-contiguous arrays of one size */
static PyObject *threshold_backward(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    const char *names[3] = {"threshold_backward", "input", "out"};
    double threshold;
    if (!PyArg_ParseTuple(args, "OOdO:threshold_backward", &objs[0], &objs[1], &threshold, &objs[2]))
        return NULL;
    return run_elementwise(objs, names, 3, threshold, 't');
}

/* tanh_backward / sigmoid_backward(grad_output, output, out): three C-contiguous arrays of one size */
static PyObject *output_backward(PyObject *args, const char *name, int sigmoid)
{
    PyObject *objs[3];
    const char *names[3] = {name, "output", "out"};
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2]))
        return NULL;
    return run_elementwise(objs, names, 3, 0.0, sigmoid ? 's' : 'h');
}

static PyObject *tanh_backward(PyObject *self, PyObject *args)
{
    return output_backward(args, "tanh_backward", 0);
}

static PyObject *sigmoid_backward(PyObject *self, PyObject *args)
{
    return output_backward(args, "sigmoid_backward", 1);
}

/* -- layer_norm -------------------------------------------------------------------------------- */

typedef struct {
    const void *g, *x, *w, *b;
    void *out;
    Py_ssize_t n;
    double eps;
    char kind, backward;
} NormCall;

static void norm_rows(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    NormCall *c = p;
    (void)job;
    if (c->kind == 'f') {
        if (c->backward)
            ln_bwd_f(c->g, c->x, c->w, c->out, lo, hi, c->n, c->eps);
        else
            ln_fwd_f(c->x, c->w, c->b, c->out, lo, hi, c->n, c->eps);
    } else {
        if (c->backward)
            ln_bwd_d(c->g, c->x, c->w, c->out, lo, hi, c->n, c->eps);
        else
            ln_fwd_d(c->x, c->w, c->b, c->out, lo, hi, c->n, c->eps);
    }
}

/* The buffers of a layer_norm call: `count` row-major (rows, n) arrays (objs[0..count-1], out
 * last), then the optional (n,) params; all C-contiguous floats of one dtype. */
static int norm_buffers(PyObject **objs, int count, PyObject **params, int nparams, Buf *bufs, Buf *pbufs,
                        const char *what, char *kind, Py_ssize_t *n)
{
    for (int i = 0; i < count; i++)
        if (get_buf(objs[i], &bufs[i], 2, i == count - 1, what) < 0)
            return -1;
    if (same_kind(bufs, count, what, kind) < 0 || contiguous_like(bufs, count, what) < 0)
        return -1;
    *n = bufs[0].view.shape[1];
    for (int i = 0; i < nparams; i++) {
        if (params[i] == Py_None)
            continue;
        if (get_buf(params[i], &pbufs[i], 1, 0, what) < 0)
            return -1;
        if (kind_of(&pbufs[i].view) != *kind || !PyBuffer_IsContiguous(&pbufs[i].view, 'C') ||
            pbufs[i].view.shape[0] != *n) {
            PyErr_Format(PyExc_ValueError, "%s: weight and bias must be C-contiguous (%zd,) arrays of the "
                         "input's dtype", what, *n);
            return -1;
        }
    }
    return 0;
}

/* `obj` as a writable C-contiguous (n,) array of the kind given: a norm's gradient summed over
 * the rows (`name` in the error) */
static int norm_sum_out(PyObject *obj, Buf *b, char kind, Py_ssize_t n, const char *what, const char *name)
{
    if (get_buf(obj, b, 1, 1, name) < 0)
        return -1;
    if (kind_of(&b->view) != kind || !PyBuffer_IsContiguous(&b->view, 'C') || b->view.shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be a C-contiguous (%zd,) array of the input's dtype", what,
                     name, n);
        return -1;
    }
    return 0;
}

/* layer_norm(x, weight, bias, eps, out): x and out (rows, n); weight and bias (n,) or None */
static PyObject *layer_norm(PyObject *self, PyObject *args)
{
    PyObject *objs[2], *params[2];
    double eps;
    if (!PyArg_ParseTuple(args, "OOOdO:layer_norm", &objs[0], &params[0], &params[1], &eps, &objs[1]))
        return NULL;
    Buf bufs[2] = {0}, pbufs[2] = {0};
    char kind;
    Py_ssize_t n;
    if (norm_buffers(objs, 2, params, 2, bufs, pbufs, "layer_norm", &kind, &n) < 0) {
        release(bufs, 2);
        release(pbufs, 2);
        return NULL;
    }
    Py_ssize_t rows = bufs[0].view.shape[0];
    NormCall call = {NULL, bufs[0].view.buf, pbufs[0].ok ? pbufs[0].view.buf : NULL,
                     pbufs[1].ok ? pbufs[1].view.buf : NULL, bufs[1].view.buf, n, eps, kind, 0};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, rows, 2 * rows * n, norm_rows, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    release(pbufs, 2);
    Py_RETURN_NONE;
}

/* layer_norm_backward(grad_output, x, weight, eps, out): the input gradient; weight (n,) or None */
static PyObject *layer_norm_backward(PyObject *self, PyObject *args)
{
    PyObject *objs[3], *params[1];
    double eps;
    if (!PyArg_ParseTuple(args, "OOOdO:layer_norm_backward", &objs[0], &objs[1], &params[0], &eps, &objs[2]))
        return NULL;
    Buf bufs[3] = {0}, pbufs[1] = {0};
    char kind;
    Py_ssize_t n;
    if (norm_buffers(objs, 3, params, 1, bufs, pbufs, "layer_norm_backward", &kind, &n) < 0) {
        release(bufs, 3);
        release(pbufs, 1);
        return NULL;
    }
    Py_ssize_t rows = bufs[0].view.shape[0];
    NormCall call = {bufs[0].view.buf, bufs[1].view.buf, pbufs[0].ok ? pbufs[0].view.buf : NULL, NULL,
                     bufs[2].view.buf, n, eps, kind, 1};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, rows, 3 * rows * n, norm_rows, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    release(pbufs, 1);
    Py_RETURN_NONE;
}

/* layer_norm_weight_grad(grad_output, x, eps, out): out (n,) = sum over rows of g * xhat */
static PyObject *layer_norm_weight_grad(PyObject *self, PyObject *args)
{
    PyObject *objs[2], *out;
    double eps;
    if (!PyArg_ParseTuple(args, "OOdO:layer_norm_weight_grad", &objs[0], &objs[1], &eps, &out))
        return NULL;
    Buf bufs[2] = {0}, o = {0};
    char kind;
    if (get_buf(objs[0], &bufs[0], 2, 0, "layer_norm_weight_grad") < 0 ||
        get_buf(objs[1], &bufs[1], 2, 0, "layer_norm_weight_grad") < 0 ||
        same_kind(bufs, 2, "layer_norm_weight_grad", &kind) < 0 ||
        contiguous_like(bufs, 2, "layer_norm_weight_grad") < 0 ||
        norm_sum_out(out, &o, kind, bufs[0].view.shape[1], "layer_norm_weight_grad", "out") < 0) {
        release(bufs, 2);
        release(&o, 1);
        return NULL;
    }
    Py_ssize_t rows = bufs[0].view.shape[0], n = bufs[0].view.shape[1];
    double *acc = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (acc == NULL) {
        release(bufs, 2);
        release(&o, 1);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    if (kind == 'f') {
        ln_wgrad_f(bufs[0].view.buf, bufs[1].view.buf, acc, rows, n, eps);
        for (Py_ssize_t j = 0; j < n; j++)
            ((float *)o.view.buf)[j] = (float)acc[j];
    } else {
        ln_wgrad_d(bufs[0].view.buf, bufs[1].view.buf, acc, rows, n, eps);
        for (Py_ssize_t j = 0; j < n; j++)
            ((double *)o.view.buf)[j] = acc[j];
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(acc);
    release(bufs, 2);
    release(&o, 1);
    Py_RETURN_NONE;
}

/* layer_norm_gradients' rows go in chunks of this many, each summing its own share of the weight's
 * and bias's gradients; the chunks' sums are then added in chunk order: the same bits whatever
 * the number of threads */
#define LN_CHUNK 128

typedef struct {
    const void *g, *x, *w;
    void *gx;
    double *acc; /* the chunks' sums: chunk c's weight terms at acc + 2 * c * n, its bias's after them */
    Py_ssize_t rows, n;
    double eps;
    char kind;
} NormGradients;

static void norm_gradient_chunks(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    NormGradients *c = p;
    (void)job;
    for (Py_ssize_t ch = lo; ch < hi; ch++) {
        Py_ssize_t r0 = ch * LN_CHUNK, r1 = r0 + LN_CHUNK < c->rows ? r0 + LN_CHUNK : c->rows;
        double *accw = c->acc + 2 * ch * c->n, *accb = accw + c->n;
        if (c->kind == 'f')
            ln_bwd_all_f(c->g, c->x, c->w, c->gx, accw, accb, r0, r1, c->n, c->eps);
        else
            ln_bwd_all_d(c->g, c->x, c->w, c->gx, accw, accb, r0, r1, c->n, c->eps);
    }
}

/* layer_norm_gradients(grad_output, x, weight, eps, gx, gw, gb): the input's gradient into gx (rows,
 * n) and the weight's and bias's into gw and gb (n,), from one pass over grad_output and x */
static PyObject *layer_norm_gradients(PyObject *self, PyObject *args)
{
    PyObject *objs[3], *params[1], *sums[2];
    double eps;
    if (!PyArg_ParseTuple(args, "OOOdOOO:layer_norm_gradients", &objs[0], &objs[1], &params[0], &eps, &objs[2],
                          &sums[0], &sums[1]))
        return NULL;
    if (params[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "layer_norm_gradients: weight must be an array");
        return NULL;
    }
    Buf bufs[3] = {0}, pbufs[3] = {0}; /* pbufs: weight, gw, gb */
    char kind;
    Py_ssize_t n;
    if (norm_buffers(objs, 3, params, 1, bufs, pbufs, "layer_norm_gradients", &kind, &n) < 0 ||
        norm_sum_out(sums[0], &pbufs[1], kind, n, "layer_norm_gradients", "gw") < 0 ||
        norm_sum_out(sums[1], &pbufs[2], kind, n, "layer_norm_gradients", "gb") < 0) {
        release(bufs, 3);
        release(pbufs, 3);
        return NULL;
    }
    Py_ssize_t rows = bufs[0].view.shape[0], chunks = (rows + LN_CHUNK - 1) / LN_CHUNK;
    double *acc = PyMem_Calloc((size_t)(chunks * 2 * n > 0 ? chunks * 2 * n : 1), sizeof(double));
    if (acc == NULL) {
        release(bufs, 3);
        release(pbufs, 3);
        return PyErr_NoMemory();
    }
    NormGradients call = {bufs[0].view.buf, bufs[1].view.buf, pbufs[0].view.buf, bufs[2].view.buf, acc, rows, n,
                          eps, kind};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, chunks, 4 * rows * n, norm_gradient_chunks, &call);
    for (Py_ssize_t j = 0; j < n; j++) {
        double sw = 0, sb = 0;
        for (Py_ssize_t ch = 0; ch < chunks; ch++)
            sw += acc[2 * ch * n + j], sb += acc[(2 * ch + 1) * n + j];
        if (kind == 'f')
            ((float *)pbufs[1].view.buf)[j] = (float)sw, ((float *)pbufs[2].view.buf)[j] = (float)sb;
        else
            ((double *)pbufs[1].view.buf)[j] = sw, ((double *)pbufs[2].view.buf)[j] = sb;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(acc);
    release(bufs, 3);
    release(pbufs, 3);
    Py_RETURN_NONE;
}

/* -- batch_norm -------------------------------------------------------------------------------- */

/* an optional (C,) vector of the kind given (`kind` 'f' or 'd'; 'D' for a writable float64 one):
 * its data in *data, NULL for None; -1 with an error set for anything else */
static int channel_vector(PyObject *obj, Buf *b, char kind, Py_ssize_t c, const char *what, void **data)
{
    *data = NULL;
    if (obj == Py_None)
        return 0;
    int writable = kind == 'D';
    if (get_buf(obj, b, 1, writable, what) < 0)
        return -1;
    if (kind_of(&b->view) != (writable ? 'd' : kind) || !PyBuffer_IsContiguous(&b->view, 'C') ||
        b->view.shape[0] != c) {
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous (%zd,) array of the input's dtype", what, c);
        return -1;
    }
    *data = b->view.buf;
    return 0;
}

typedef struct {
    const void *g, *x, *w, *b, *rm, *rv;
    void *out;
    double *mean, *var;
    Py_ssize_t n, c, hw;
    double eps;
    char kind, what; /* 'f' forward, 'b' input gradient, 'w' weight gradient */
    int training;
} BatchNormCall;

static void batch_norm_channels(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    BatchNormCall *k = p;
    (void)job;
    if (k->kind == 'f') {
        if (k->what == 'f')
            bn_fwd_f(k->x, k->w, k->b, k->rm, k->rv, k->out, k->mean, k->var, k->n, k->c, k->hw, lo, hi, k->eps,
                     k->training);
        else if (k->what == 'b')
            bn_bwd_f(k->g, k->x, k->w, k->rv, k->out, k->n, k->c, k->hw, lo, hi, k->eps, k->training);
        else
            bn_wgrad_f(k->g, k->x, k->rm, k->rv, k->out, k->n, k->c, k->hw, lo, hi, k->eps, k->training);
    } else {
        if (k->what == 'f')
            bn_fwd_d(k->x, k->w, k->b, k->rm, k->rv, k->out, k->mean, k->var, k->n, k->c, k->hw, lo, hi, k->eps,
                     k->training);
        else if (k->what == 'b')
            bn_bwd_d(k->g, k->x, k->w, k->rv, k->out, k->n, k->c, k->hw, lo, hi, k->eps, k->training);
        else
            bn_wgrad_d(k->g, k->x, k->rm, k->rv, k->out, k->n, k->c, k->hw, lo, hi, k->eps, k->training);
    }
}

/* batch_norm(x, running_mean, running_var, weight, bias, training, eps, out, mean, var): x and out
 * (N, C, HW) C-contiguous; the four (C,) vectors or None; mean and var float64 (C,) arrays the
 * batch's statistics go to in training (None in evaluation) */
static PyObject *batch_norm(PyObject *self, PyObject *args)
{
    PyObject *x, *rm, *rv, *w, *b, *out, *mean, *var;
    int training;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOOOpdOOO:batch_norm", &x, &rm, &rv, &w, &b, &training, &eps, &out, &mean, &var))
        return NULL;
    Buf bufs[2] = {0}, vecs[6] = {0};
    BatchNormCall k = {0};
    PyObject *objs[2] = {x, out};
    void *data[6];
    for (int i = 0; i < 2; i++)
        if (get_buf(objs[i], &bufs[i], 3, i == 1, "batch_norm") < 0)
            goto fail;
    if (same_kind(bufs, 2, "batch_norm", &k.kind) < 0 || contiguous_like(bufs, 2, "batch_norm") < 0)
        goto fail;
    k.n = bufs[0].view.shape[0], k.c = bufs[0].view.shape[1], k.hw = bufs[0].view.shape[2];
    PyObject *vobjs[6] = {rm, rv, w, b, training ? mean : Py_None, training ? var : Py_None};
    for (int i = 0; i < 6; i++)
        if (channel_vector(vobjs[i], &vecs[i], i < 4 ? k.kind : 'D', k.c, "batch_norm", &data[i]) < 0)
            goto fail;
    if ((!training && (!data[0] || !data[1])) || (training && (!data[4] || !data[5]))) {
        PyErr_SetString(PyExc_ValueError, "batch_norm: evaluation needs the running statistics, training the "
                        "mean and var outputs");
        goto fail;
    }
    k.x = bufs[0].view.buf, k.out = bufs[1].view.buf, k.rm = data[0], k.rv = data[1], k.w = data[2], k.b = data[3];
    k.mean = data[4], k.var = data[5], k.eps = eps, k.what = 'f', k.training = training;
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, k.c, 3 * k.n * k.c * k.hw, batch_norm_channels, &k);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    release(vecs, 6);
    Py_RETURN_NONE;
fail:
    release(bufs, 2);
    release(vecs, 6);
    return NULL;
}

/* batch_norm_backward(grad_output, x, weight, running_var, training, eps, out) and
 * batch_norm_weight_grad(grad_output, x, running_mean, running_var, training, eps, out): the input
 * gradient (out like x) and the weight's ((C,)); the running statistics are read in evaluation */
static PyObject *batch_norm_grad(PyObject *args, char what)
{
    PyObject *g, *x, *v0, *v1, *out;
    int training;
    double eps;
    const char *name = what == 'b' ? "batch_norm_backward" : "batch_norm_weight_grad";
    if (!PyArg_ParseTuple(args, "OOOOpdO", &g, &x, &v0, &v1, &training, &eps, &out))
        return NULL;
    Buf bufs[3] = {0}, vecs[2] = {0}, o = {0};
    BatchNormCall k = {0};
    PyObject *objs[3] = {g, x, what == 'b' ? out : x};
    void *data[2];
    for (int i = 0; i < 3; i++)
        if (get_buf(objs[i], &bufs[i], 3, what == 'b' && i == 2, name) < 0)
            goto fail;
    if (same_kind(bufs, 3, name, &k.kind) < 0 || contiguous_like(bufs, 3, name) < 0)
        goto fail;
    k.n = bufs[0].view.shape[0], k.c = bufs[0].view.shape[1], k.hw = bufs[0].view.shape[2];
    for (int i = 0; i < 2; i++)
        if (channel_vector(i ? v1 : v0, &vecs[i], k.kind, k.c, name, &data[i]) < 0)
            goto fail;
    if (what == 'w') {
        if (get_buf(out, &o, 1, 1, name) < 0)
            goto fail;
        if (kind_of(&o.view) != k.kind || !PyBuffer_IsContiguous(&o.view, 'C') || o.view.shape[0] != k.c) {
            PyErr_Format(PyExc_ValueError, "%s: out must be a C-contiguous (%zd,) array of the input's dtype", name,
                         k.c);
            goto fail;
        }
        k.out = o.view.buf, k.rm = data[0], k.rv = data[1];
    } else {
        k.out = bufs[2].view.buf, k.w = data[0], k.rv = data[1];
    }
    if (!training && !k.rv) {
        PyErr_Format(PyExc_ValueError, "%s: evaluation needs the running statistics", name);
        goto fail;
    }
    k.g = bufs[0].view.buf, k.x = bufs[1].view.buf, k.eps = eps, k.what = what, k.training = training;
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, k.c, 3 * k.n * k.c * k.hw, batch_norm_channels, &k);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    release(vecs, 2);
    release(&o, 1);
    Py_RETURN_NONE;
fail:
    release(bufs, 3);
    release(vecs, 2);
    release(&o, 1);
    return NULL;
}

static PyObject *batch_norm_backward(PyObject *self, PyObject *args)
{
    return batch_norm_grad(args, 'b');
}

static PyObject *batch_norm_weight_grad(PyObject *self, PyObject *args)
{
    return batch_norm_grad(args, 'w');
}

/* -- the pool (threadpool.c) ------------------------------------------------------------------ */

/* pool_set_width(n): how many jobs the kernels split their loops into (1: none) */
static PyObject *py_pool_set_width(PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    pool_set_width((int)(n < 1 ? 1 : (n > 1024 ? 1024 : n)));
    Py_RETURN_NONE;
}

/* pool_follow(address): the width is what the C function int f(void) at `address` answers at
 * each call (OpenBLAS's get_num_threads); 0 stops following */
static PyObject *py_pool_follow(PyObject *self, PyObject *arg)
{
    void *address = PyLong_AsVoidPtr(arg);
    if (!address && PyErr_Occurred())
        return NULL;
    if (address)
        pool_follow((int (*)(void))address);
    else
        pool_set_width(pool_width());
    Py_RETURN_NONE;
}

/* pool_info() -> (width, workers alive, calls split so far) */
static PyObject *py_pool_info(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("iiK", pool_width(), pool_workers(), pool_calls());
}

/* pool_blas_callback() -> the address of OpenBLAS's threads callback, or None where the pool
 * cannot run OpenBLAS's jobs at once (no threads: Windows) */
static PyObject *py_pool_blas_callback(PyObject *self, PyObject *unused)
{
#ifdef _WIN32
    Py_RETURN_NONE;
#else
    return PyLong_FromVoidPtr((void *)pool_openblas_callback);
#endif
}

/* -- take_rows: a batch of rows, for a data loader's gather ------------------------------------ */

/* Whether an entry of index (count int64 row numbers, negative ones counting from the end) is out
 * of range for `rows` rows; NumPy's IndexError is set for the first such entry. */
static int rows_out_of_range(const long long *index, Py_ssize_t count, Py_ssize_t rows)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        long long k = index[i];
        if (k < -(long long)rows || k >= (long long)rows) {
            PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for axis 0 with size %zd", k, rows);
            return 1;
        }
    }
    return 0;
}

typedef struct {
    const char *src;
    const long long *index;
    char *out;
    Py_ssize_t rows, row; /* rows in src, bytes a row */
} TakeCall;

static void take_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    TakeCall *c = p;
    (void)job;
    for (Py_ssize_t i = lo; i < hi; i++) {
        long long k = c->index[i];
        if (k < 0)
            k += c->rows;
        memcpy(c->out + i * c->row, c->src + k * c->row, (size_t)c->row);
    }
}

/* take_rows(src, index, out): out[i] = src[index[i]] along the first axis, as NumPy's src[index];
 * src and out C-contiguous, of one format and the same trailing shape; index 1-D int64, its
 * negative entries counting from the end. An entry out of range raises NumPy's IndexError before
 * anything is written. The rows are copied on the pool: a random batch of rows is bound by the
 * memory's latency, which two threads' loads in flight share. */
static PyObject *take_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Buf bufs[3] = {0};
    if (!PyArg_ParseTuple(args, "OOO:take_rows", &objs[0], &objs[1], &objs[2]))
        return NULL;
    const char *names[3] = {"take_rows", "take_rows index", "take_rows out"};
    for (int i = 0; i < 3; i++)
        if (get_buf(objs[i], &bufs[i], i == 1 ? 1 : -1, i == 2, names[i]) < 0) {
            release(bufs, 3);
            return NULL;
        }
    Py_buffer *src = &bufs[0].view, *idx = &bufs[1].view, *out = &bufs[2].view;
    const char *fi = bare_format(idx);
    int ok = src->ndim >= 1 && out->ndim == src->ndim && PyBuffer_IsContiguous(src, 'C') &&
             PyBuffer_IsContiguous(out, 'C') && PyBuffer_IsContiguous(idx, 'C') && idx->itemsize == 8 &&
             (*fi == 'q' || *fi == 'l') && src->itemsize == out->itemsize &&
             strcmp(src->format ? src->format : "B", out->format ? out->format : "B") == 0 &&
             out->shape[0] == idx->shape[0];
    for (int d = 1; ok && d < src->ndim; d++)
        ok = out->shape[d] == src->shape[d];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "take_rows: expected C-contiguous src and out of one dtype and trailing "
                                          "shape, and a 1-D int64 index of out's length");
        release(bufs, 3);
        return NULL;
    }
    Py_ssize_t rows = src->shape[0], count = idx->shape[0];
    const long long *index = idx->buf;
    if (rows_out_of_range(index, count, rows)) {
        release(bufs, 3);
        return NULL;
    }
    TakeCall call = {src->buf, index, out->buf, rows, rows ? src->len / rows : 0};
    int width = pool_width();
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, count, out->len / 4, take_range, &call);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    Py_RETURN_NONE;
}

/* -- scaled_dot_product_attention, head by head (attention.h) ----------------------------------- */

typedef struct {
    AttHead h;
    const char *q, *k, *v, *g, *mask;
    char *out, *gq, *gk, *gv, *scratch;
    Py_ssize_t heads2;                            /* the second lead dim's size */
    Py_ssize_t qb[2], kb[2], vb[2], gb[2], ob[2]; /* element strides of the two lead dims */
    Py_ssize_t per_job;                           /* scratch entries a job has */
    char kind, backward;
} AttCall;

static void att_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    AttCall *c = p;
    size_t item = c->kind == 'f' ? sizeof(float) : sizeof(double);
    Py_ssize_t L = c->h.L, S = c->h.S, D = c->h.D, Dv = c->h.Dv;
    char *scratch = c->scratch + (size_t)job * (size_t)c->per_job * item;
    for (Py_ssize_t x = lo; x < hi; x++) {
        Py_ssize_t a = x / c->heads2, b = x % c->heads2;
        const char *q = c->q + (size_t)(a * c->qb[0] + b * c->qb[1]) * item;
        const char *k = c->k + (size_t)(a * c->kb[0] + b * c->kb[1]) * item;
        const char *v = c->v + (size_t)(a * c->vb[0] + b * c->vb[1]) * item;
        const char *mask = c->mask != NULL ? c->mask + (size_t)(x * L * S) * item : NULL;
        if (!c->backward) {
            char *out = c->out + (size_t)(a * c->ob[0] + b * c->ob[1]) * item;
            if (c->kind == 'f')
                att_head_f(&c->h, (const float *)q, (const float *)k, (const float *)v, (const float *)mask,
                           (float *)out, (float *)scratch);
            else
                att_head_d(&c->h, (const double *)q, (const double *)k, (const double *)v, (const double *)mask,
                           (double *)out, (double *)scratch);
            continue;
        }
        const char *g = c->g + (size_t)(a * c->gb[0] + b * c->gb[1]) * item;
        char *gq = c->gq + (size_t)(x * L * D) * item, *gk = c->gk + (size_t)(x * S * D) * item;
        char *gv = c->gv + (size_t)(x * S * Dv) * item;
        if (c->kind == 'f')
            att_head_backward_f(&c->h, (const float *)g, (const float *)q, (const float *)k, (const float *)v,
                                (const float *)mask, (float *)gq, (float *)gk, (float *)gv, (float *)scratch);
        else
            att_head_backward_d(&c->h, (const double *)g, (const double *)q, (const double *)k, (const double *)v,
                                (const double *)mask, (double *)gq, (double *)gk, (double *)gv, (double *)scratch);
    }
}

/* A 4-d operand (two lead dims, rows, entries): its lead dims' and rows' element strides, entries
 * adjacent; `whole`: C-contiguous too. -1 with an exception where it is not so. */
static int att_operand(Buf *b, const char *what, int whole, Py_ssize_t *lead, Py_ssize_t *row)
{
    Py_ssize_t st[4];
    if (element_strides(&b->view, st) < 0)
        return -1;
    if ((st[3] != 1 && b->view.shape[3] > 1) || (whole && !PyBuffer_IsContiguous(&b->view, 'C'))) {
        PyErr_Format(PyExc_ValueError, "attention heads: %s must have its last dim's entries adjacent%s", what,
                     whole ? " and be C-contiguous" : "");
        return -1;
    }
    lead[0] = st[0], lead[1] = st[1], *row = st[2];
    return 0;
}

/* attention_heads(q, k, v, mask, out, scale, causal) and attention_heads_backward(g, q, k, v,
 * mask, gq, gk, gv, scale, causal): scaled_dot_product_attention over 4-d operands (two lead dims,
 * the same for all) without an attn_mask, mask the dropout scale (C-contiguous, L x S per head) or
 * None; out, gq, gk, gv C-contiguous; q, k, v, g any strides with entries adjacent. The heads
 * split over the pool, each computed as alone (the split changes no bit). */
static PyObject *attention_call(PyObject *args, int backward)
{
    PyObject *o[9] = {NULL};
    double scale;
    int causal;
    Buf bufs[9] = {0};
    const char *names[9];
    int n;
    if (!backward) {
        if (!PyArg_ParseTuple(args, "OOOOOdp:attention_heads", &o[0], &o[1], &o[2], &o[3], &o[4], &scale, &causal))
            return NULL;
        const char *fwd[5] = {"q", "k", "v", "mask", "out"};
        memcpy(names, fwd, sizeof(fwd));
        n = 5;
    } else {
        if (!PyArg_ParseTuple(args, "OOOOOOOOdp:attention_heads_backward", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                              &o[6], &o[7], &scale, &causal))
            return NULL;
        const char *bwd[8] = {"g", "q", "k", "v", "mask", "gq", "gk", "gv"};
        memcpy(names, bwd, sizeof(bwd));
        n = 8;
    }
    int at_mask = backward ? 4 : 3, have_mask = o[at_mask] != Py_None, count = 0;
    Buf *used[9];
    for (int i = 0; i < n; i++) {
        if (i == at_mask && !have_mask)
            continue;
        int writable = backward ? i >= 5 : i == 4;
        if (get_buf(o[i], &bufs[count], 4, writable, names[i]) < 0) {
            release(bufs, count + 1);
            return NULL;
        }
        used[i] = &bufs[count++];
    }
    char kind;
    if (same_kind(bufs, count, backward ? "attention_heads_backward" : "attention_heads", &kind) < 0) {
        release(bufs, count);
        return NULL;
    }
    int g0 = backward ? 1 : 0; /* q's place */
    Py_ssize_t *qs = used[g0]->view.shape, *ks = used[g0 + 1]->view.shape, *vs = used[g0 + 2]->view.shape;
    Py_ssize_t B1 = qs[0], B2 = qs[1], L = qs[2], D = qs[3], S = ks[2], Dv = vs[3];
    int ok = ks[0] == B1 && ks[1] == B2 && ks[3] == D && vs[0] == B1 && vs[1] == B2 && vs[2] == S && L > 0 && S > 0
             && D > 0 && Dv > 0;
    if (have_mask) {
        Py_ssize_t *ms = used[at_mask]->view.shape;
        ok &= ms[0] == B1 && ms[1] == B2 && ms[2] == L && ms[3] == S;
    }
    if (!backward) {
        Py_ssize_t *os = used[4]->view.shape;
        ok &= os[0] == B1 && os[1] == B2 && os[2] == L && os[3] == Dv;
    } else {
        Py_ssize_t *gs = used[0]->view.shape, *a = used[5]->view.shape, *b = used[6]->view.shape,
                   *c = used[7]->view.shape;
        ok &= gs[0] == B1 && gs[1] == B2 && gs[2] == L && gs[3] == Dv && a[0] == B1 && a[1] == B2 && a[2] == L &&
              a[3] == D && b[0] == B1 && b[1] == B2 && b[2] == S && b[3] == D && c[0] == B1 && c[1] == B2 &&
              c[2] == S && c[3] == Dv;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "attention heads: expected q (B1, B2, L, D), k (B1, B2, S, D), v (B1, B2, "
                                          "S, Dv), a mask (B1, B2, L, S) and outputs of those shapes, all nonempty");
        release(bufs, count);
        return NULL;
    }
    AttCall c = {.h = {.L = L, .S = S, .D = D, .Dv = Dv, .os = Dv, .scale = scale, .causal = causal},
                 .heads2 = B2, .kind = kind, .backward = (char)backward};
    Py_ssize_t mb[2], mrow;
    if (att_operand(used[g0], "q", 0, c.qb, &c.h.qs) < 0 || att_operand(used[g0 + 1], "k", 0, c.kb, &c.h.ks) < 0
        || att_operand(used[g0 + 2], "v", 0, c.vb, &c.h.vs) < 0
        || (have_mask && att_operand(used[at_mask], "mask", 1, mb, &mrow) < 0)
        || (!backward && att_operand(used[4], "out", 1, c.ob, &mrow) < 0)
        || (backward && (att_operand(used[0], "g", 0, c.gb, &c.h.gs) < 0 || att_operand(used[5], "gq", 1, mb, &mrow) < 0
                         || att_operand(used[6], "gk", 1, mb, &mrow) < 0 || att_operand(used[7], "gv", 1, mb, &mrow) < 0))) {
        release(bufs, count);
        return NULL;
    }
    c.q = used[g0]->view.buf, c.k = used[g0 + 1]->view.buf, c.v = used[g0 + 2]->view.buf;
    c.mask = have_mask ? used[at_mask]->view.buf : NULL;
    if (backward)
        c.g = used[0]->view.buf, c.gq = used[5]->view.buf, c.gk = used[6]->view.buf, c.gv = used[7]->view.buf;
    else
        c.out = used[4]->view.buf;
    c.per_job = att_scratch_entries(&c.h);
    int width = pool_width();
    c.scratch = PyMem_RawMalloc((size_t)width * (size_t)c.per_job * (size_t)used[g0]->view.itemsize);
    if (c.scratch == NULL) {
        release(bufs, count);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    parallel_for(width, B1 * B2, B1 * B2 * L * S * (D + Dv), att_range, &c);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(c.scratch);
    release(bufs, count);
    Py_RETURN_NONE;
}

static PyObject *attention_heads(PyObject *self, PyObject *args)
{
    (void)self;
    return attention_call(args, 0);
}

static PyObject *attention_heads_backward(PyObject *self, PyObject *args)
{
    (void)self;
    return attention_call(args, 1);
}

/* -- add_rows: rows added in at an index, an embedding's gradient ------------------------------ */

#define ADD_ROWS(T, SUF)                                                                                \
    static VECTOR_CLONES void add_rows_##SUF(T *out, const long long *index, const T *values, Py_ssize_t count, \
                                             Py_ssize_t rows, Py_ssize_t width)                         \
    {                                                                                                   \
        for (Py_ssize_t i = 0; i < count; i++) {                                                        \
            long long k = index[i] < 0 ? index[i] + rows : index[i];                                    \
            T *o = out + k * width;                                                                     \
            const T *v = values + i * width;                                                            \
            for (Py_ssize_t j = 0; j < width; j++)                                                      \
                o[j] += v[j];                                                                           \
        }                                                                                               \
    }

ADD_ROWS(float, f)
ADD_ROWS(double, d)

/* add_rows(out, index, values): out[index[i]] += values[i] for i = 0, 1, ... in turn, so a row
 * indexed twice gets both, always summed in that order; out (rows, width) and values (len(index),
 * width) C-contiguous float32 or float64 of one dtype, index 1-D int64, its negative entries
 * counting from the end. An entry out of range raises NumPy's IndexError before anything is
 * written. One thread: rows indexed twice would race on two. */
static PyObject *add_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Buf bufs[3] = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:add_rows", &objs[0], &objs[1], &objs[2]))
        return NULL;
    const char *names[3] = {"add_rows out", "add_rows index", "add_rows values"};
    for (int i = 0; i < 3; i++)
        if (get_buf(objs[i], &bufs[i], i == 1 ? 1 : 2, i == 0, names[i]) < 0) {
            release(bufs, 3);
            return NULL;
        }
    Py_buffer *out = &bufs[0].view, *idx = &bufs[1].view, *val = &bufs[2].view;
    const char *fi = bare_format(idx), *fo = bare_format(out), *fv = bare_format(val);
    int ok = PyBuffer_IsContiguous(out, 'C') && PyBuffer_IsContiguous(val, 'C') && PyBuffer_IsContiguous(idx, 'C') &&
             idx->itemsize == 8 && (*fi == 'q' || *fi == 'l') && (*fo == 'f' || *fo == 'd') && fo[1] == 0 &&
             *fv == *fo && fv[1] == 0 && val->shape[0] == idx->shape[0] && val->shape[1] == out->shape[1];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "add_rows: expected C-contiguous 2-D out and values of one float dtype "
                                          "and width, and a 1-D int64 index of values' length");
        release(bufs, 3);
        return NULL;
    }
    Py_ssize_t rows = out->shape[0], count = idx->shape[0], width = out->shape[1];
    const long long *index = idx->buf;
    if (rows_out_of_range(index, count, rows)) {
        release(bufs, 3);
        return NULL;
    }
    char kind = *fo;
    Py_BEGIN_ALLOW_THREADS
    if (kind == 'f')
        add_rows_f(out->buf, index, val->buf, count, rows, width);
    else
        add_rows_d(out->buf, index, val->buf, count, rows, width);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    Py_RETURN_NONE;
}

/* -- the module ------------------------------------------------------------------------------- */


/* -- softmax over rows ------------------------------------------------------------------------- */

typedef struct {
    const void *g, *x;
    void *out;
    Py_ssize_t n, L;
    double scale;
    int causal, dead_zero;
    char kind, backward, log; /* log: log_softmax's rows (L, causal and scale unused) */
} SoftmaxCall;

static void softmax_range(Py_ssize_t lo, Py_ssize_t hi, int job, void *p)
{
    SoftmaxCall *c = p;
    (void)job;
    if (c->log && c->kind == 'f') {
        if (c->backward)
            log_softmax_bwd_rows_f(c->g, c->x, c->out, lo, hi, c->n);
        else
            log_softmax_rows_f(c->x, c->out, lo, hi, c->n);
    } else if (c->log) {
        if (c->backward)
            log_softmax_bwd_rows_d(c->g, c->x, c->out, lo, hi, c->n);
        else
            log_softmax_rows_d(c->x, c->out, lo, hi, c->n);
    } else if (c->kind == 'f') {
        if (c->backward)
            softmax_bwd_rows_f(c->g, c->x, c->out, lo, hi, c->n, c->L, c->causal, (float)c->scale);
        else
            softmax_rows_f(c->x, c->out, lo, hi, c->n, c->L, c->causal, (float)c->scale, c->dead_zero);
    } else {
        if (c->backward)
            softmax_bwd_rows_d(c->g, c->x, c->out, lo, hi, c->n, c->L, c->causal, c->scale);
        else
            softmax_rows_d(c->x, c->out, lo, hi, c->n, c->L, c->causal, c->scale, c->dead_zero);
    }
}

/* softmax's arrays: `count` C-contiguous (rows, n) arrays of one float dtype, out last; L > 0 */
static PyObject *softmax_call(PyObject **objs, int count, Py_ssize_t L, int causal, double scale, int dead_zero,
                              int log, const char *what)
{
    Buf bufs[3] = {0};
    char kind;
    for (int i = 0; i < count; i++)
        if (get_buf(objs[i], &bufs[i], 2, i == count - 1, what) < 0) {
            release(bufs, count);
            return NULL;
        }
    if (same_kind(bufs, count, what, &kind) < 0 || contiguous_like(bufs, count, what) < 0) {
        release(bufs, count);
        return NULL;
    }
    Py_ssize_t rows = bufs[0].view.shape[0], n = bufs[0].view.shape[1];
    if (L <= 0 || (causal && rows % L)) {
        PyErr_Format(PyExc_ValueError, "%s: L must be positive and divide the rows (%zd), got %zd", what, rows, L);
        release(bufs, count);
        return NULL;
    }
    SoftmaxCall call = {count == 3 ? bufs[0].view.buf : NULL, bufs[count - 2].view.buf, bufs[count - 1].view.buf,
                        n, L, scale, causal, dead_zero, kind, count == 3, (char)log};
    int width = pool_width();
    if (n > 0) {
        Py_BEGIN_ALLOW_THREADS
        parallel_for(width, rows, count * rows * n, softmax_range, &call);
        Py_END_ALLOW_THREADS
    }
    release(bufs, count);
    Py_RETURN_NONE;
}

/* softmax_rows(x, L, causal, scale, dead_zero, out): out = softmax(x * scale) along rows, each
 * (L, n) block's row i limited to its first i + 1 entries with causal, a row of -inf all 0 with
 * dead_zero (else NaN); in place allowed */
static PyObject *softmax_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[2];
    Py_ssize_t L;
    int causal, dead_zero;
    double scale;
    if (!PyArg_ParseTuple(args, "OnpdpO:softmax_rows", &objs[0], &L, &causal, &scale, &dead_zero, &objs[1]))
        return NULL;
    return softmax_call(objs, 2, L, causal, scale, dead_zero, 0, "softmax_rows");
}

/* softmax_backward_rows(grad, y, L, causal, scale, out): out = (y * (grad - sum(grad * y))) * scale
 * along rows, limited as softmax_rows; out may be grad */
static PyObject *softmax_backward_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    Py_ssize_t L;
    int causal;
    double scale;
    if (!PyArg_ParseTuple(args, "OOnpdO:softmax_backward_rows", &objs[0], &objs[1], &L, &causal, &scale, &objs[2]))
        return NULL;
    return softmax_call(objs, 3, L, causal, scale, 0, 0, "softmax_backward_rows");
}

/* log_softmax_rows(x, out): out = log_softmax(x) along rows; out a new array (not x) */
static PyObject *log_softmax_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[2];
    if (!PyArg_ParseTuple(args, "OO:log_softmax_rows", &objs[0], &objs[1]))
        return NULL;
    return softmax_call(objs, 2, 1, 0, 1.0, 0, 1, "log_softmax_rows");
}

/* log_softmax_backward_rows(grad, y, out): out = grad - exp(y) * sum(grad) along rows; out a new
 * array (neither grad nor y) */
static PyObject *log_softmax_backward_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    if (!PyArg_ParseTuple(args, "OOO:log_softmax_backward_rows", &objs[0], &objs[1], &objs[2]))
        return NULL;
    return softmax_call(objs, 3, 1, 0, 1.0, 0, 1, "log_softmax_backward_rows");
}

/* -- ufuncs called with out=... ------------------------------------------------------------ */

/* A primitive that is a ufunc asked for ``out=...`` (an array even for 0-d operands, where NumPy
 * would return a scalar) costs a Python frame per call when written as a lambda: about a fifth
 * of ``a + b`` on small tensors. OutUfunc makes that call from C, with the keyword passed by
 * vectorcall (functools.partial would build a dict per call). Anything but the common case goes
 * to ``slow``, the Python function it stands in for: keyword arguments, another argument count,
 * and a Python float second operand beside a first operand of dtype ``float_slow`` (bfloat16,
 * whose scalar rule is decided there). */
typedef struct {
    PyObject_HEAD
    PyObject *ufunc;
    PyObject *slow;
    PyObject *float_slow; /* a dtype, or NULL */
    Py_ssize_t nin;
    vectorcallfunc vectorcall;
} OutUfunc;

static PyObject *OUT_KWNAMES; /* ("out",) */
static PyObject *DTYPE_NAME;  /* "dtype" */

/* Whether x's dtype is ``dtype`` (-1 with an exception set where x has none). */
static int has_dtype(PyObject *x, PyObject *dtype)
{
    PyObject *dt = PyObject_GetAttr(x, DTYPE_NAME);
    if (dt == NULL)
        return -1;
    int same = dt == dtype;
    Py_DECREF(dt);
    return same;
}

static PyObject *out_ufunc_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    OutUfunc *self = (OutUfunc *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n != self->nin)
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    if (self->float_slow != NULL && n == 2 && PyFloat_CheckExact(args[1])) {
        int slow = has_dtype(args[0], self->float_slow);
        if (slow != 0) {
            PyErr_Clear(); /* no dtype: slow says what is wrong */
            return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
        }
    }
    PyObject *stack[3];
    for (Py_ssize_t i = 0; i < n; i++)
        stack[i] = args[i];
    stack[n] = Py_Ellipsis;
    return PyObject_Vectorcall(self->ufunc, stack, n, OUT_KWNAMES);
}

static PyObject *out_ufunc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *ufunc, *slow, *float_slow = Py_None;
    Py_ssize_t nin;
    static char *names[] = {"ufunc", "nin", "slow", "float_slow", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnO|O:OutUfunc", names, &ufunc, &nin, &slow, &float_slow))
        return NULL;
    if (nin != 1 && nin != 2) {
        PyErr_Format(PyExc_ValueError, "OutUfunc: nin must be 1 or 2, not %zd", nin);
        return NULL;
    }
    if (!PyCallable_Check(ufunc) || !PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "OutUfunc: ufunc and slow must be callable");
        return NULL;
    }
    OutUfunc *self = (OutUfunc *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->ufunc = Py_NewRef(ufunc);
    self->slow = Py_NewRef(slow);
    self->nin = nin;
    self->float_slow = float_slow == Py_None ? NULL : Py_NewRef(float_slow);
    self->vectorcall = out_ufunc_vectorcall;
    return (PyObject *)self;
}

static int out_ufunc_traverse(PyObject *op, visitproc visit, void *arg)
{
    OutUfunc *self = (OutUfunc *)op;
    Py_VISIT(self->ufunc);
    Py_VISIT(self->slow);
    Py_VISIT(self->float_slow);
    return 0;
}

static int out_ufunc_clear(PyObject *op)
{
    OutUfunc *self = (OutUfunc *)op;
    Py_CLEAR(self->ufunc);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->float_slow);
    return 0;
}

static void out_ufunc_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    out_ufunc_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *out_ufunc_repr(PyObject *op)
{
    return PyUnicode_FromFormat("<OutUfunc %R(..., out=...)>", ((OutUfunc *)op)->ufunc);
}

static PyMemberDef out_ufunc_members[] = {
    {"ufunc", T_OBJECT, offsetof(OutUfunc, ufunc), READONLY, "the ufunc called with out=..."},
    {"slow", T_OBJECT, offsetof(OutUfunc, slow), READONLY, "the Python function for the other calls"},
    {NULL},
};

static PyTypeObject OutUfuncType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "plugtorch_backends.numpy_backend.native._kernels.OutUfunc",
    .tp_basicsize = sizeof(OutUfunc),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "OutUfunc(ufunc, nin, slow, float_slow=None): ufunc(*args, out=...) called from C",
    .tp_new = out_ufunc_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(OutUfunc, vectorcall),
    .tp_traverse = out_ufunc_traverse,
    .tp_clear = out_ufunc_clear,
    .tp_dealloc = out_ufunc_dealloc,
    .tp_repr = out_ufunc_repr,
    .tp_members = out_ufunc_members,
};

static PyMethodDef methods[] = {
    {"softmax_rows", softmax_rows, METH_VARARGS, "softmax_rows(x, L, causal, scale, dead_zero, out)"},
    {"softmax_backward_rows", softmax_backward_rows, METH_VARARGS,
     "softmax_backward_rows(grad, y, L, causal, scale, out)"},
    {"log_softmax_rows", log_softmax_rows, METH_VARARGS, "log_softmax_rows(x, out)"},
    {"log_softmax_backward_rows", log_softmax_backward_rows, METH_VARARGS, "log_softmax_backward_rows(grad, y, out)"},
    {"max_pool2d", max_pool2d, METH_VARARGS, "max_pool2d(input, out, kh, kw, sh, sw, ph, pw, dh, dw)"},
    {"max_pool2d_backward", max_pool2d_backward, METH_VARARGS,
     "max_pool2d_backward(grad_output, input, output, dx, kh, kw, sh, sw, ph, pw, dh, dw)"},
    {"adam_step", adam_step, METH_VARARGS, "adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, ...)"},
    {"fold2d", fold2d, METH_VARARGS, "fold2d(cols, acc, sh, sw, dh, dw)"},
    {"cross_entropy", cross_entropy, METH_VARARGS, "cross_entropy(input, target, ignore_index, loss) -> count"},
    {"cross_entropy_backward", cross_entropy_backward, METH_VARARGS,
     "cross_entropy_backward(input, target, ignore_index, scale, mean, dx)"},
    {"relu", relu, METH_VARARGS, "relu(input, out)"},
    {"erf", erf_kernel, METH_VARARGS, "erf(input, out)"},
    {"layer_norm", layer_norm, METH_VARARGS, "layer_norm(x, weight, bias, eps, out): rows of x normalised"},
    {"batch_norm", batch_norm, METH_VARARGS,
     "batch_norm(x, running_mean, running_var, weight, bias, training, eps, out, mean, var)"},
    {"batch_norm_backward", batch_norm_backward, METH_VARARGS,
     "batch_norm_backward(grad_output, x, weight, running_var, training, eps, out)"},
    {"batch_norm_weight_grad", batch_norm_weight_grad, METH_VARARGS,
     "batch_norm_weight_grad(grad_output, x, running_mean, running_var, training, eps, out)"},
    {"layer_norm_backward", layer_norm_backward, METH_VARARGS,
     "layer_norm_backward(grad_output, x, weight, eps, out): the input gradient"},
    {"layer_norm_weight_grad", layer_norm_weight_grad, METH_VARARGS,
     "layer_norm_weight_grad(grad_output, x, eps, out): sum over rows of grad_output * xhat"},
    {"layer_norm_gradients", layer_norm_gradients, METH_VARARGS,
     "layer_norm_gradients(grad_output, x, weight, eps, gx, gw, gb): the three gradients in one pass"},
    {"gelu", gelu_kernel, METH_VARARGS, "gelu(input, tanh_form, out)"},
    {"gelu_backward", gelu_backward_kernel, METH_VARARGS, "gelu_backward(grad_output, input, tanh_form, out)"},
    {"threshold_backward", threshold_backward, METH_VARARGS, "threshold_backward(grad_output, input, threshold, out)"},
    {"tanh_backward", tanh_backward, METH_VARARGS, "tanh_backward(grad_output, output, out)"},
    {"sigmoid_backward", sigmoid_backward, METH_VARARGS, "sigmoid_backward(grad_output, output, out)"},
    {"take_rows", take_rows, METH_VARARGS, "take_rows(src, index, out): out[i] = src[index[i]]"},
    {"add_rows", add_rows, METH_VARARGS, "add_rows(out, index, values): out[index[i]] += values[i], i in turn"},
    {"attention_heads", attention_heads, METH_VARARGS,
     "attention_heads(q, k, v, mask, out, scale, causal): scaled_dot_product_attention head by head"},
    {"attention_heads_backward", attention_heads_backward, METH_VARARGS,
     "attention_heads_backward(g, q, k, v, mask, gq, gk, gv, scale, causal): its gradients head by head"},
    {"im2col", im2col, METH_VARARGS, "im2col(input, cols, n0, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)"},
    {"pool_set_width", py_pool_set_width, METH_O, "pool_set_width(n): split kernels' loops into n jobs"},
    {"pool_follow", py_pool_follow, METH_O, "pool_follow(address): width from the C function int f(void) there"},
    {"pool_info", py_pool_info, METH_NOARGS, "pool_info() -> (width, workers, calls)"},
    {"pool_blas_callback", py_pool_blas_callback, METH_NOARGS,
     "pool_blas_callback() -> address of OpenBLAS's threads callback running its jobs on the pool, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", "The NumPy backend's native kernels.", -1,
                                    methods};

/* The interface version native/__init__.py expects: bump it with any change to a function's
 * name or arguments, so that a checkout whose extension was built from older sources (an
 * editable install is not rebuilt by a pull) runs the NumPy kernels instead of failing. */
#define ABI 9

PyMODINIT_FUNC PyInit__kernels(void)
{
    vector_math_width(); /* libmvec's width chosen at import */
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* IM2COL_PER_IMAGE: im2col takes (images, rows, positions) cols too; an addition the ABI
     * leaves alone (conv.py copies those patches with NumPy where an older build lacks it).
     * OutUfunc: an addition the ABI leaves alone too (xp_table keeps its Python wrappers without it) */
    static PoolAPI pool = {pool_run, pool_width}; /* for gemm.c's weight gradient (threadpool.h) */
    PyObject *capsule = PyCapsule_New(&pool, POOL_CAPSULE, NULL);
    int added = capsule != NULL && PyModule_AddObjectRef(m, "pool", capsule) == 0;
    Py_XDECREF(capsule);
    if (!added || PyModule_AddIntConstant(m, "ABI", ABI) < 0 || PyModule_AddIntConstant(m, "IM2COL_PER_IMAGE", 1) < 0
        || (OUT_KWNAMES == NULL && (OUT_KWNAMES = Py_BuildValue("(s)", "out")) == NULL)
        || (DTYPE_NAME == NULL && (DTYPE_NAME = PyUnicode_InternFromString("dtype")) == NULL)
        || PyType_Ready(&OutUfuncType) < 0 || PyModule_AddObjectRef(m, "OutUfunc", (PyObject *)&OutUfuncType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
