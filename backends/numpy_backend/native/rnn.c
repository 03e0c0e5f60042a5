/* One LSTM step's gate arithmetic in one pass, forward and backward: the loops of the NumPy
 * backend's lstm_layer kernels (../rnn.py) between their per-step GEMMs, which NumPy would run
 * as eleven and twenty passes over (N, H) arrays. And, where the native product (gemm.c, through
 * the capsule of gemm_api.h) takes a layer's per-step products, the whole time loop
 * (lstm_forward_layer, lstm_backward_layer), so that no step returns to Python.
 *
 * state is lstm_layer's (6, T, N, H) array (rows h, c, i, f, g, o), C-contiguous; t is the step.
 * float32 and float64; every array C-contiguous and of one dtype (native/rnn.py sees to it).
 * A module of its own (_rnn), beside _kernels: loaded where the native kernels are on. With
 * several BLAS threads a step's batch rows split over _kernels' pool (run_step), as its GEMM's
 * columns do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include <string.h>

#include "threadpool.h"   /* the pool's interface only: _kernels has the pool */
#include "gemm_api.h"    /* the native product, for the whole-layer loops */
#include "vector_math.h"  /* tanh_block_f/_d (libmvec's tanhf where setup.py found it), VECTOR_CLONES */

/* -- the loops, once per element type ----------------------------------------------------------- */

/* A sigmoid is 0.5 + 0.5 tanh(x / 2): one tanh, which never overflows (1 / (1 + exp(-x)) does for
 * x < -88 in float, harmlessly but through inf). `scratch` holds 4H elements.
 *
 * Each batch row's arithmetic is in small functions whose arrays are `restrict`: no two of them
 * overlap (state's rows for step t, the previous step's c, the gradients, scratch), and only so
 * can the compiler vectorize loops that read six arrays and write five; as one loop over
 * pointers into one state array it ran scalar (a step's gates took 21.6 us forward and 26.6 backward
 * at N = 20, H = 256). Each element's operations are the same, in the same order, so the values
 * are the same bits at any width. */
#define LSTM_LOOPS(T, SUF)                                                                              \
    /* one row's gate inputs: gates + in + bias (added in that order, as NumPy's two adds would;        \
     * in, bias may be NULL), halved where a sigmoid follows (times 1, exact, for g) */                 \
    static inline void lstm_pre_##SUF(const T *restrict gr, const T *restrict inr, const T *restrict bias, \
                                      T *restrict s, Py_ssize_t h)                                      \
    {                                                                                                   \
        for (Py_ssize_t q = 0; q < 4; q++) {                                                            \
            T scale = q == 2 ? (T)1 : (T)0.5;                                                           \
            for (Py_ssize_t j = q * h; j < (q + 1) * h; j++) {                                          \
                T x = gr[j];                                                                            \
                if (inr != NULL)                                                                        \
                    x += inr[j];                                                                        \
                if (bias != NULL)                                                                       \
                    x += bias[j];                                                                       \
                s[j] = scale * x;                                                                       \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    /* one row's i, f, g, o and c from the tanh of its gate inputs, s */                                \
    static inline void lstm_cells_##SUF(const T *restrict s, const T *restrict c_prev, T *restrict is,  \
                                        T *restrict fs, T *restrict gs, T *restrict os, T *restrict cs, \
                                        Py_ssize_t h)                                                   \
    {                                                                                                   \
        for (Py_ssize_t j = 0; j < h; j++) {                                                            \
            T i = (T)0.5 + (T)0.5 * s[j], f = (T)0.5 + (T)0.5 * s[h + j], g = s[2 * h + j],             \
              o = (T)0.5 + (T)0.5 * s[3 * h + j];                                                       \
            is[j] = i, fs[j] = f, gs[j] = g, os[j] = o, cs[j] = f * c_prev[j] + i * g;                  \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    static inline void lstm_mul_##SUF(T *restrict out, const T *restrict by, Py_ssize_t h)              \
    {                                                                                                   \
        for (Py_ssize_t j = 0; j < h; j++)                                                              \
            out[j] *= by[j];                                                                            \
    }                                                                                                   \
                                                                                                        \
    /* gates (N, 4H): i, f, g, o before their activations, plus `in` (N, 4H) and `bias` (4H) where      \
     * not NULL; writes state[:, t] */                                                                  \
    static VECTOR_CLONES void lstm_fwd_##SUF(const T *gates, const T *in, const T *bias, const T *c_prev, \
                                             T *state, Py_ssize_t t, Py_ssize_t steps, Py_ssize_t n,    \
                                             Py_ssize_t h, Py_ssize_t lo, Py_ssize_t hi, T *scratch)    \
    {                                                                                                   \
        Py_ssize_t plane = n * h, row = steps * plane;                                                  \
        T *hs = state + t * plane, *cs = hs + row, *is = cs + row, *fs = is + row, *gs = fs + row,      \
          *os = gs + row;                                                                               \
        for (Py_ssize_t b = lo; b < hi; b++) {                                                          \
            Py_ssize_t k = b * h;                                                                       \
            lstm_pre_##SUF(gates + 4 * k, in == NULL ? NULL : in + 4 * k, bias, scratch, h);            \
            tanh_block_##SUF(scratch, scratch, 4 * h);                                                  \
            lstm_cells_##SUF(scratch, c_prev + k, is + k, fs + k, gs + k, os + k, cs + k, h);           \
            tanh_block_##SUF(cs + k, hs + k, h);                                                        \
            lstm_mul_##SUF(hs + k, os + k, h);                                                          \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    /* one row back: tc = tanh(c); see lstm_bwd */                                                      \
    static inline void lstm_bwd_cells_##SUF(const T *restrict tc, const T *restrict is, const T *restrict fs, \
                                            const T *restrict gs, const T *restrict os, const T *restrict g0, \
                                            const T *restrict g1, const T *restrict g2, const T *restrict g3, \
                                            const T *restrict g4, const T *restrict g5,                 \
                                            const T *restrict c_prev, const T *restrict dh, T *restrict dc, \
                                            T *restrict orow, Py_ssize_t h)                             \
    {                                                                                                   \
        for (Py_ssize_t j = 0; j < h; j++) {                                                            \
            T i = is[j], f = fs[j], g = gs[j], o = os[j], t = tc[j];                                    \
            T dhj = dh[j] + g0[j];                                                                      \
            T dcj = dc[j] + g1[j] + dhj * o * ((T)1 - t * t);                                           \
            orow[j] = (dcj * g + g2[j]) * i * ((T)1 - i);                                               \
            orow[h + j] = (dcj * c_prev[j] + g3[j]) * f * ((T)1 - f);                                   \
            orow[2 * h + j] = (dcj * i + g4[j]) * ((T)1 - g * g);                                       \
            orow[3 * h + j] = (dhj * t + g5[j]) * o * ((T)1 - o);                                       \
            dc[j] = dcj * f;                                                                            \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    /* dh, dc (N, H): the gradients flowing in from the later step; out, dc is the one for c_prev       \
     * (the caller's GEMM makes dh's). out (N, 4H): the gates' gradient before their activations. */    \
    static VECTOR_CLONES void lstm_bwd_##SUF(const T *grad, const T *state, Py_ssize_t t, Py_ssize_t steps, \
                                             Py_ssize_t n, Py_ssize_t h, const T *c_prev, const T *dh, T *dc, \
                                             T *out, Py_ssize_t lo, Py_ssize_t hi, T *scratch)          \
    {                                                                                                   \
        Py_ssize_t plane = n * h, row = steps * plane, at = t * plane;                                  \
        const T *cs = state + row + at, *is = cs + row, *fs = is + row, *gs = fs + row, *os = gs + row; \
        const T *g0 = grad + at, *g1 = g0 + row, *g2 = g1 + row, *g3 = g2 + row, *g4 = g3 + row,        \
                *g5 = g4 + row;                                                                         \
        for (Py_ssize_t b = lo; b < hi; b++) {                                                          \
            Py_ssize_t k = b * h;                                                                       \
            tanh_block_##SUF(cs + k, scratch, h);                                                       \
            lstm_bwd_cells_##SUF(scratch, is + k, fs + k, gs + k, os + k, g0 + k, g1 + k, g2 + k, g3 + k, \
                                 g4 + k, g5 + k, c_prev + k, dh + k, dc + k, out + 4 * k, h);           \
        }                                                                                               \
    }

LSTM_LOOPS(float, f)
LSTM_LOOPS(double, d)

/* -- one step split over the pool ----------------------------------------------------------------- */

/* A step's batch rows are independent, so they split over the native kernels' pool (as many jobs
 * as BLAS is told to use threads; threadpool.h) with the same values; a job gets at least
 * MIN_JOB_CELLS of the (N, H) cells (a handoff costs a few microseconds, a cell a few
 * nanoseconds). */
#define MIN_JOB_CELLS 2048

typedef struct {
    char kind, forward;
    const void *gates, *in, *bias, *grad, *state_in, *c_prev, *dh;
    void *state, *dc, *out;
    Py_ssize_t t, steps, n, h, per_job; /* per_job: doubles of scratch each job has */
    char *scratch;
    int jobs;
} Step;

static void step_job(int i, void *arg)
{
    const Step *s = arg;
    Py_ssize_t lo = s->n * i / s->jobs, hi = s->n * (i + 1) / s->jobs;
    void *scratch = s->scratch + (size_t)i * (size_t)s->per_job * sizeof(double);
    if (s->forward && s->kind == 'f')
        lstm_fwd_f(s->gates, s->in, s->bias, s->c_prev, s->state, s->t, s->steps, s->n, s->h, lo, hi, scratch);
    else if (s->forward)
        lstm_fwd_d(s->gates, s->in, s->bias, s->c_prev, s->state, s->t, s->steps, s->n, s->h, lo, hi, scratch);
    else if (s->kind == 'f')
        lstm_bwd_f(s->grad, s->state_in, s->t, s->steps, s->n, s->h, s->c_prev, s->dh, s->dc, s->out, lo, hi,
                   scratch);
    else
        lstm_bwd_d(s->grad, s->state_in, s->t, s->steps, s->n, s->h, s->c_prev, s->dh, s->dc, s->out, lo, hi,
                   scratch);
}

/* How many jobs a step splits into on `pool`, and their scratch; -1 (an exception set) where
 * memory ran out. Called with the GIL held; free s->scratch with PyMem_RawFree. */
static int step_setup(Step *s, const PoolAPI *pool)
{
    Py_ssize_t by_work = s->n * s->h / MIN_JOB_CELLS, width = pool != NULL ? pool->width() : 1;
    s->jobs = (int)Py_MAX(1, Py_MIN(Py_MIN(width, by_work), s->n));
    s->scratch = PyMem_RawMalloc((size_t)s->jobs * (size_t)s->per_job * sizeof(double));
    if (s->scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* the step on the pool; -1 (an exception set) where memory ran out. Called with the GIL held. */
static int run_step(Step *s)
{
    const PoolAPI *pool = kernels_pool();
    if (step_setup(s, pool) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    kernels_pool_run(pool, s->jobs, step_job, s);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(s->scratch);
    return 0;
}

/* -- arguments ------------------------------------------------------------------------------------ */

typedef struct {
    Py_buffer v;
    int ok;
} RBuf;

/* a C-contiguous float buffer of `ndim` dims; its kind ('f' or 'd') must equal *kind (0: set it) */
static int take(PyObject *obj, RBuf *b, int ndim, int writable, char *kind, const char *what)
{
    b->ok = 0;
    if (PyObject_GetBuffer(obj, &b->v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    b->ok = 1;
    const char *f = b->v.format ? b->v.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    char k = (f[0] == 'f' || f[0] == 'd') && f[1] == 0 ? f[0] : 0;
    if (b->v.ndim != ndim || !k || (*kind && k != *kind)) {
        PyErr_Format(PyExc_ValueError, "lstm kernel: %s must be a %d-d C-contiguous float32/float64 array of "
                     "the others' dtype", what, ndim);
        return -1;
    }
    *kind = k;
    return 0;
}

static void drop(RBuf *bufs, int count)
{
    for (int i = 0; i < count; i++)
        if (bufs[i].ok)
            PyBuffer_Release(&bufs[i].v);
}

static PyObject *lstm_forward_step(PyObject *self, PyObject *args)
{
    PyObject *o_gates, *o_c, *o_state;
    Py_ssize_t t;
    RBuf b[3] = {{.ok = 0}};
    char kind = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOn", &o_gates, &o_c, &o_state, &t))
        return NULL;
    if (take(o_state, &b[2], 4, 1, &kind, "state") < 0 || take(o_gates, &b[0], 2, 0, &kind, "gates") < 0
        || take(o_c, &b[1], 2, 0, &kind, "c_prev") < 0)
        goto fail;
    Py_ssize_t *s = b[2].v.shape, steps = s[1], n = s[2], h = s[3];
    if (s[0] != 6 || t < 0 || t >= steps || b[0].v.shape[0] != n || b[0].v.shape[1] != 4 * h
        || b[1].v.shape[0] != n || b[1].v.shape[1] != h) {
        PyErr_SetString(PyExc_ValueError, "lstm_forward_step: shapes do not match state (6, T, N, H)");
        goto fail;
    }
    Step step = {.kind = kind, .forward = 1, .gates = b[0].v.buf, .c_prev = b[1].v.buf, .state = b[2].v.buf,
                 .t = t, .steps = steps, .n = n, .h = h, .per_job = 4 * h + 1};
    if (run_step(&step) < 0)
        goto fail;
    drop(b, 3);
    Py_RETURN_NONE;
fail:
    drop(b, 3);
    return NULL;
}

static PyObject *lstm_backward_step(PyObject *self, PyObject *args)
{
    PyObject *o_grad, *o_state, *o_c, *o_dh, *o_dc, *o_out;
    Py_ssize_t t;
    RBuf b[6] = {{.ok = 0}};
    char kind = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnOOOO", &o_grad, &o_state, &t, &o_c, &o_dh, &o_dc, &o_out))
        return NULL;
    if (take(o_state, &b[1], 4, 0, &kind, "state") < 0 || take(o_grad, &b[0], 4, 0, &kind, "grad_state") < 0
        || take(o_c, &b[2], 2, 0, &kind, "c_prev") < 0 || take(o_dh, &b[3], 2, 0, &kind, "dh") < 0
        || take(o_dc, &b[4], 2, 1, &kind, "dc") < 0 || take(o_out, &b[5], 2, 1, &kind, "out") < 0)
        goto fail;
    Py_ssize_t *s = b[1].v.shape, steps = s[1], n = s[2], h = s[3];
    int same = 1;
    for (int d = 0; d < 4; d++)
        same &= b[0].v.shape[d] == s[d];
    for (int k = 2; k < 5; k++)
        same &= b[k].v.shape[0] == n && b[k].v.shape[1] == h;
    if (!same || s[0] != 6 || t < 0 || t >= steps || b[5].v.shape[0] != n || b[5].v.shape[1] != 4 * h) {
        PyErr_SetString(PyExc_ValueError, "lstm_backward_step: shapes do not match state (6, T, N, H)");
        goto fail;
    }
    Step step = {.kind = kind, .forward = 0, .grad = b[0].v.buf, .state_in = b[1].v.buf, .c_prev = b[2].v.buf,
                 .dh = b[3].v.buf, .dc = b[4].v.buf, .out = b[5].v.buf, .t = t, .steps = steps, .n = n, .h = h,
                 .per_job = h + 1};
    if (run_step(&step) < 0)
        goto fail;
    drop(b, 6);
    Py_RETURN_NONE;
fail:
    drop(b, 6);
    return NULL;
}

/* -- whole layers: the time loop in C ------------------------------------------------------------ */

/* The native product's API (gemm_api.h), looked up once with the GIL held; NULL (an exception set)
 * where _gemm is not there. */
static const GemmAPI *gemm_api(void)
{
    static const GemmAPI *api = NULL;
    if (api == NULL)
        api = PyCapsule_Import(GEMM_CAPSULE, 0);
    return api;
}

static int layer_error(int rc, const char *fn)
{
    if (rc == -1)
        PyErr_NoMemory();
    else
        PyErr_Format(PyExc_RuntimeError, "%s: the native product does not run on this CPU", fn);
    return -1;
}

static Py_ssize_t step_at(Py_ssize_t k, Py_ssize_t steps, int reverse)
{
    return reverse ? steps - 1 - k : k;
}

/* lstm_forward_layer(input_gates, h0, c0, w_t, bias_hh, state, reverse): the layer's every step,
 * each the native product h @ w_t and one pass of gate arithmetic (lstm_fwd, with the input gates
 * and bias added there), with the GIL released throughout. The same values as the loop over
 * lstm_forward_step in native/rnn.py where that loop's products are the native kernel's. */
static PyObject *lstm_forward_layer(PyObject *self, PyObject *args)
{
    PyObject *o_in, *o_h0, *o_c0, *o_wt, *o_bias, *o_state;
    int reverse;
    RBuf b[6] = {{.ok = 0}};
    char kind = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOp", &o_in, &o_h0, &o_c0, &o_wt, &o_bias, &o_state, &reverse))
        return NULL;
    if (take(o_state, &b[0], 4, 1, &kind, "state") < 0 || take(o_in, &b[1], 3, 0, &kind, "input_gates") < 0
        || take(o_h0, &b[2], 2, 0, &kind, "h0") < 0 || take(o_c0, &b[3], 2, 0, &kind, "c0") < 0
        || take(o_wt, &b[4], 2, 0, &kind, "w_t") < 0
        || (o_bias != Py_None && take(o_bias, &b[5], 1, 0, &kind, "bias_hh") < 0))
        goto fail;
    Py_ssize_t *s = b[0].v.shape, steps = s[1], n = s[2], h = s[3], *in = b[1].v.shape;
    if (s[0] != 6 || in[0] != steps || in[1] != n || in[2] != 4 * h || b[2].v.shape[0] != n || b[2].v.shape[1] != h
        || b[3].v.shape[0] != n || b[3].v.shape[1] != h || b[4].v.shape[0] != h || b[4].v.shape[1] != 4 * h
        || (b[5].ok && b[5].v.shape[0] != 4 * h)) {
        PyErr_SetString(PyExc_ValueError, "lstm_forward_layer: shapes do not match state (6, T, N, H)");
        goto fail;
    }
    const GemmAPI *api = gemm_api();
    const PoolAPI *pool = kernels_pool();
    if (api == NULL)
        goto fail;
    size_t item = (size_t)b[0].v.itemsize, plane = (size_t)(n * h) * item, row = (size_t)steps * plane;
    char *gates = PyMem_RawMalloc((size_t)(n * 4 * h) * item + 1);
    Step step = {.kind = kind, .forward = 1, .gates = gates, .bias = b[5].ok ? b[5].v.buf : NULL,
                 .state = b[0].v.buf, .steps = steps, .n = n, .h = h, .per_job = 4 * h + 1};
    if (gates == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    if (step_setup(&step, pool) < 0) {
        PyMem_RawFree(gates);
        goto fail;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    const char *hp = b[2].v.buf, *cp = b[3].v.buf, *state = b[0].v.buf, *input = b[1].v.buf;
    for (Py_ssize_t k = 0; k < steps && rc == 0; k++) {
        Py_ssize_t t = step_at(k, steps, reverse);
        rc = api->gemm(kind, n, 4 * h, h, hp, h, b[4].v.buf, 4 * h, gates, 4 * h, pool);
        if (rc == 0) {
            step.in = input + (size_t)t * 4 * plane, step.c_prev = cp, step.t = t;
            kernels_pool_run(pool, step.jobs, step_job, &step);
            hp = state + (size_t)t * plane, cp = hp + row; /* this step's h and c */
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(step.scratch);
    PyMem_RawFree(gates);
    if (rc < 0 && layer_error(rc, "lstm_forward_layer") < 0)
        goto fail;
    drop(b, 6);
    Py_RETURN_NONE;
fail:
    drop(b, 6);
    return NULL;
}

/* lstm_backward_layer(grad_state, state, c0, weight_hh, out, reverse): lstm_layer_backward's every
 * step (lstm_bwd, then the native product out[t] @ weight_hh for the next dh) with the GIL
 * released; out (T + 1, N, 4H) gets the gates' gradients and, in row T, dh and dc of the initial
 * state followed by zeros. The values of the loop over lstm_backward_step in native/rnn.py where
 * its products are the native kernel's. */
static PyObject *lstm_backward_layer(PyObject *self, PyObject *args)
{
    PyObject *o_grad, *o_state, *o_c0, *o_w, *o_out;
    int reverse;
    RBuf b[5] = {{.ok = 0}};
    char kind = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOp", &o_grad, &o_state, &o_c0, &o_w, &o_out, &reverse))
        return NULL;
    if (take(o_state, &b[1], 4, 0, &kind, "state") < 0 || take(o_grad, &b[0], 4, 0, &kind, "grad_state") < 0
        || take(o_c0, &b[2], 2, 0, &kind, "c0") < 0 || take(o_w, &b[3], 2, 0, &kind, "weight_hh") < 0
        || take(o_out, &b[4], 3, 1, &kind, "out") < 0)
        goto fail;
    Py_ssize_t *s = b[1].v.shape, steps = s[1], n = s[2], h = s[3], *o = b[4].v.shape;
    int same = s[0] == 6;
    for (int d = 0; d < 4; d++)
        same &= b[0].v.shape[d] == s[d];
    if (!same || b[2].v.shape[0] != n || b[2].v.shape[1] != h || b[3].v.shape[0] != 4 * h || b[3].v.shape[1] != h
        || o[0] != steps + 1 || o[1] != n || o[2] != 4 * h) {
        PyErr_SetString(PyExc_ValueError, "lstm_backward_layer: shapes do not match state (6, T, N, H)");
        goto fail;
    }
    const GemmAPI *api = gemm_api();
    const PoolAPI *pool = kernels_pool();
    if (api == NULL)
        goto fail;
    size_t item = (size_t)b[1].v.itemsize, plane = (size_t)(n * h) * item, row = (size_t)steps * plane;
    char *dh = PyMem_RawCalloc(2 * (size_t)(n * h) + 1, item), *dc = dh + plane;
    Step step = {.kind = kind, .forward = 0, .grad = b[0].v.buf, .state_in = b[1].v.buf, .dh = dh, .dc = dc,
                 .steps = steps, .n = n, .h = h, .per_job = h + 1};
    if (dh == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    if (step_setup(&step, pool) < 0) {
        PyMem_RawFree(dh);
        goto fail;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    const char *state = b[1].v.buf;
    char *out = b[4].v.buf;
    for (Py_ssize_t k = steps - 1; k >= 0 && rc == 0; k--) {
        Py_ssize_t t = step_at(k, steps, reverse);
        char *gates = out + (size_t)t * 4 * plane;
        step.t = t, step.out = gates;
        step.c_prev = k ? state + row + (size_t)step_at(k - 1, steps, reverse) * plane : (const char *)b[2].v.buf;
        kernels_pool_run(pool, step.jobs, step_job, &step);
        rc = api->gemm(kind, n, h, 4 * h, gates, 4 * h, b[3].v.buf, h, dh, h, pool);
    }
    if (rc == 0) { /* row T: dh, dc, zeros */
        char *last = out + (size_t)steps * 4 * plane;
        size_t width = (size_t)h * item;
        for (Py_ssize_t r = 0; r < n; r++) {
            char *dst = last + (size_t)r * 4 * width;
            memcpy(dst, dh + (size_t)r * width, width);
            memcpy(dst + width, dc + (size_t)r * width, width);
            memset(dst + 2 * width, 0, 2 * width);
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(step.scratch);
    PyMem_RawFree(dh);
    if (rc < 0 && layer_error(rc, "lstm_backward_layer") < 0)
        goto fail;
    drop(b, 5);
    Py_RETURN_NONE;
fail:
    drop(b, 5);
    return NULL;
}

static PyMethodDef methods[] = {
    {"lstm_forward_step", lstm_forward_step, METH_VARARGS,
     "lstm_forward_step(gates, c_prev, state, t): step t's h, c, i, f, g, o into state"},
    {"lstm_backward_step", lstm_backward_step, METH_VARARGS,
     "lstm_backward_step(grad_state, state, t, c_prev, dh, dc, out): step t's gates' gradient into out"},
    {"lstm_forward_layer", lstm_forward_layer, METH_VARARGS,
     "lstm_forward_layer(input_gates, h0, c0, w_t, bias_hh, state, reverse): every step into state, the products "
     "in the native kernel"},
    {"lstm_backward_layer", lstm_backward_layer, METH_VARARGS,
     "lstm_backward_layer(grad_state, state, c0, weight_hh, out, reverse): every step's gates' gradient and the "
     "initial state's into out (T + 1, N, 4H), the products in the native kernel"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rnn", "The LSTM steps of the NumPy backend's kernels.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__rnn(void)
{
    return PyModule_Create(&module);
}
