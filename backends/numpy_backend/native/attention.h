/* scaled_dot_product_attention of one (batch, head) at a time, forward and backward, for
 * _kernels.c: included after typed.h with T and SUFFIX set, once per element type, so the heads
 * use typed.h's softmax rows (the same rows the NumPy kernel's C path runs between its products).
 *
 * NumPy's batched matmul runs one BLAS call per head, one thread each (64 heads of 64 x 32 on
 * minGPT), and the (heads, L, S) weights go through memory between its five products and the
 * softmax rows. Here a head's scores, weights and gradients stay in a scratch block of a few
 * tens of KiB while all its products run, and the heads split over the native kernels' pool.
 * Each score is a sum over the embedding dim in order, each output entry a sum over the keys in
 * order (without FMA contraction, so every build and clone gives the same bits); the causal
 * rows' keys past the diagonal are skipped, not multiplied by zero, as torch's flash kernel
 * skips them. Operands: row-major (L, D), (S, D), (S, Dv) per head, rows any number of elements
 * apart, entries adjacent.
 */

#define ATT_CAT_(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT_(a, b)
#define AFN(name) ATT_CAT(name, SUFFIX)

/* the keys row i of a head sees */
#define ATT_SEES(i) (causal ? ((i) + 1 < S ? (i) + 1 : S) : S)

/* 64-byte vectors of T (GCC's vector extension: one AVX-512 register in the avx512f clone, split
 * into narrower ones in the others), loaded and stored unaligned */
typedef T AFN(vec) __attribute__((vector_size(64)));
#define ATT_LANES ((Py_ssize_t)(64 / sizeof(T)))

static inline AFN(vec) AFN(att_load)(const T *p)
{
    AFN(vec) v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* sum over k in [k0, k1) of x(k) * v(k), in four interleaved partial sums (k mod 4) added
 * pairwise at the end: four independent chains of adds, not one waiting on each add's latency.
 * The order is fixed, so the bits do not depend on anything but the operands. */
#define ATT_SUM4(RESULT, K0, K1, XV)                                                                    \
    do {                                                                                                \
        AFN(vec) acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};                                        \
        Py_ssize_t k = (K0);                                                                            \
        for (; k + 4 <= (K1); k += 4) {                                                                 \
            { Py_ssize_t kk = k; acc0 += XV; }                                                          \
            { Py_ssize_t kk = k + 1; acc1 += XV; }                                                      \
            { Py_ssize_t kk = k + 2; acc2 += XV; }                                                      \
            { Py_ssize_t kk = k + 3; acc3 += XV; }                                                      \
        }                                                                                               \
        for (; k < (K1); k++) {                                                                         \
            Py_ssize_t kk = k;                                                                          \
            acc0 += XV;                                                                                 \
        }                                                                                               \
        RESULT = (acc0 + acc1) + (acc2 + acc3);                                                         \
    } while (0)

/* s (L x S) = a (L x D, rows as apart) @ b^T (b: S x D, rows bs apart), the entries row i sees,
 * zeros past them (the softmax rows read a causal row's padding). bt is scratch for b^T, D rows
 * of S rounded up to whole vectors (zeros past S), so a block of a row's scores is one vector
 * summing D products. */
VECTOR_CLONES static void AFN(att_scores)(const T *a, Py_ssize_t as, const T *b, Py_ssize_t bs, Py_ssize_t L,
                                          Py_ssize_t S, Py_ssize_t D, int causal, T *s, T *bt)
{
    Py_ssize_t sp = (S + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    for (Py_ssize_t d = 0; d < D; d++) {
        for (Py_ssize_t j = 0; j < S; j++)
            bt[d * sp + j] = b[j * bs + d];
        for (Py_ssize_t j = S; j < sp; j++)
            bt[d * sp + j] = 0;
    }
    for (Py_ssize_t i = 0; i < L; i++) {
        Py_ssize_t sees = ATT_SEES(i);
        T *row = s + i * S;
        const T *ai = a + i * as;
        for (Py_ssize_t j0 = 0; j0 < sees; j0 += ATT_LANES) {
            AFN(vec) sum;
            ATT_SUM4(sum, 0, D, ai[kk] * AFN(att_load)(bt + kk * sp + j0));
            if (j0 + ATT_LANES <= S)
                memcpy(row + j0, &sum, sizeof sum);
            else
                for (Py_ssize_t j = j0; j < S; j++)
                    row[j] = sum[j - j0];
        }
        for (Py_ssize_t j = sees; j < S; j++)
            row[j] = 0;
    }
}

/* out (L x E, rows os apart) = w (L x S) @ b (S x E, rows bs apart), row i over the keys it sees */
VECTOR_CLONES static void AFN(att_mix)(const T *w, Py_ssize_t L, Py_ssize_t S, int causal, const T *b,
                                       Py_ssize_t bs, Py_ssize_t E, T *out, Py_ssize_t os)
{
    for (Py_ssize_t i = 0; i < L; i++) {
        T *o = out + i * os;
        const T *wi = w + i * S;
        Py_ssize_t sees = ATT_SEES(i), e0 = 0;
        for (; e0 + ATT_LANES <= E; e0 += ATT_LANES) {
            AFN(vec) sum;
            ATT_SUM4(sum, 0, sees, wi[kk] * AFN(att_load)(b + kk * bs + e0));
            memcpy(o + e0, &sum, sizeof sum);
        }
        for (Py_ssize_t e = e0; e < E; e++) { /* the last entries, one at a time, in the same order */
            T part[4] = {0, 0, 0, 0};
            Py_ssize_t j = 0;
            for (; j + 4 <= sees; j += 4)
                for (int r = 0; r < 4; r++)
                    part[r] += wi[j + r] * b[(j + r) * bs + e];
            for (; j < sees; j++)
                part[0] += wi[j] * b[j * bs + e];
            o[e] = (part[0] + part[1]) + (part[2] + part[3]);
        }
    }
}

/* out (S x E, rows os apart) = w^T (w: L x S) @ b (L x E, rows bs apart): key j's row sums over
 * the queries that see it */
VECTOR_CLONES static void AFN(att_mix_t)(const T *w, Py_ssize_t L, Py_ssize_t S, int causal, const T *b,
                                         Py_ssize_t bs, Py_ssize_t E, T *out, Py_ssize_t os)
{
    for (Py_ssize_t j = 0; j < S; j++) {
        T *o = out + j * os;
        Py_ssize_t first = causal ? j : 0, e0 = 0; /* causal: query i sees key j from i = j on */
        for (; e0 + ATT_LANES <= E; e0 += ATT_LANES) {
            AFN(vec) sum;
            ATT_SUM4(sum, first, L, w[kk * S + j] * AFN(att_load)(b + kk * bs + e0));
            memcpy(o + e0, &sum, sizeof sum);
        }
        for (Py_ssize_t e = e0; e < E; e++) {
            T part[4] = {0, 0, 0, 0};
            Py_ssize_t i = first;
            for (; i + 4 <= L; i += 4)
                for (int r = 0; r < 4; r++)
                    part[r] += w[(i + r) * S + j] * b[(i + r) * bs + e];
            for (; i < L; i++)
                part[0] += w[i * S + j] * b[i * bs + e];
            o[e] = (part[0] + part[1]) + (part[2] + part[3]);
        }
    }
}

/* w (L x S) *= mask (L x S, contiguous): dropout's kept weights' scale */
static void AFN(att_drop)(T *w, const T *mask, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        w[j] *= mask[j];
}

/* One head forward: out = (softmax(q k^T * scale) * mask) @ v. scratch: ATT_SCRATCH entries. */
static void AFN(att_head)(const AttHead *h, const T *q, const T *k, const T *v, const T *mask, T *out, T *scratch)
{
    Py_ssize_t L = h->L, S = h->S;
    T *bt = scratch, *w = scratch + h->D * (S + 64);
    AFN(att_scores)(q, h->qs, k, h->ks, L, S, h->D, h->causal, w, bt);
    AFN(softmax_rows)(w, w, 0, L, S, L, h->causal, (T)h->scale, 1);
    if (mask != NULL)
        AFN(att_drop)(w, mask, L * S);
    AFN(att_mix)(w, L, S, h->causal, v, h->vs, h->Dv, out, h->os);
}

/* One head backward from the output's gradient g: gq (L x D), gk (S x D), gv (S x Dv), rows
 * contiguous. The weights are recomputed from q and k. scratch: ATT_SCRATCH entries. */
static void AFN(att_head_backward)(const AttHead *h, const T *g, const T *q, const T *k, const T *v, const T *mask,
                                   T *gq, T *gk, T *gv, T *scratch)
{
    Py_ssize_t L = h->L, S = h->S, D = h->D, Dv = h->Dv;
    int causal = h->causal;
    T *bt = scratch, *w = bt + (D > Dv ? D : Dv) * (S + 64), *dw = w + L * S;
    AFN(att_scores)(q, h->qs, k, h->ks, L, S, D, causal, w, bt);
    AFN(softmax_rows)(w, w, 0, L, S, L, causal, (T)h->scale, 1);
    if (mask != NULL) { /* gv from the dropped weights, kept in dw for the moment */
        for (Py_ssize_t j = 0; j < L * S; j++)
            dw[j] = w[j] * mask[j];
        AFN(att_mix_t)(dw, L, S, causal, g, h->gs, Dv, gv, Dv);
    } else {
        AFN(att_mix_t)(w, L, S, causal, g, h->gs, Dv, gv, Dv);
    }
    AFN(att_scores)(g, h->gs, v, h->vs, L, S, Dv, causal, dw, bt); /* the weights' gradient */
    if (mask != NULL)
        AFN(att_drop)(dw, mask, L * S);
    AFN(softmax_bwd_rows)(dw, w, dw, 0, L, S, L, causal, (T)h->scale); /* the scores' gradient */
    AFN(att_mix)(dw, L, S, causal, k, h->ks, D, gq, D);
    AFN(att_mix_t)(dw, L, S, causal, q, h->qs, D, gk, D);
}

#undef ATT_SEES
#undef ATT_LANES
#undef ATT_SUM4
#undef AFN
#undef ATT_CAT
#undef ATT_CAT_
