/* scaled_dot_product_attention of one (batch, head) at a time, forward and backward, for
 * _kernels.c: included after typed.h with T and SUFFIX set, once per element type, so the heads
 * use typed.h's softmax rows (the same rows the NumPy kernel's C path runs between its products).
 *
 * NumPy's batched matmul runs one BLAS call per head, one thread each (64 heads of 64 x 32 on
 * minGPT), and the (heads, L, S) weights go through memory between its five products and the
 * softmax rows. Here a head's operands (packed where their rows lie apart), scores, weights and
 * gradients stay in a scratch block while all its products run, and the heads split over the
 * native kernels' pool. Each product works four rows (or keys) at a time, sharing each load of
 * its other operand among four chains of vector multiply-adds; each entry is one chain in a
 * fixed order (over the embedding dim, the keys or the queries), without FMA contraction, so
 * every build and clone gives the same bits whatever the split. A causal row's keys past the
 * diagonal are skipped, or multiplied by its weights' zeros within a group of four. Operands:
 * row-major (L, D), (S, D), (S, Dv) per head, rows any number of elements apart, entries adjacent. */

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

/* s (L x S) = a (L x D, rows as apart) @ b^T (b: S x D, rows bs apart): the entries row i sees,
 * zeros past them (the softmax rows read a causal row's padding). bt is scratch for b^T, D rows
 * of S rounded up to whole vectors (zeros past S). Four rows at a time share each load of bt (a
 * causal group up to its last row's keys, the others' extra entries zeroed after); each entry
 * is one chain of D products in order, whichever group computes it. */
VECTOR_CLONES static void AFN(att_scores)(const T *a, Py_ssize_t as, const T *b, Py_ssize_t bs, Py_ssize_t L,
                                       Py_ssize_t S, Py_ssize_t D, int causal, T *s, T *bt)
{
    Py_ssize_t sp = (S + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    for (Py_ssize_t j = 0; j < S; j++) { /* b's rows read whole */
        const T *bj = b + j * bs;
        for (Py_ssize_t d = 0; d < D; d++)
            bt[d * sp + j] = bj[d];
    }
    for (Py_ssize_t d = 0; d < D; d++)
        for (Py_ssize_t j = S; j < sp; j++)
            bt[d * sp + j] = 0;
    for (Py_ssize_t i = 0; i < L; i += 4) {
        int rows = L - i < 4 ? (int)(L - i) : 4;
        Py_ssize_t top = ATT_SEES(i + rows - 1);
        const T *ar[4];
        for (int r = 0; r < 4; r++)
            ar[r] = a + (i + (r < rows ? r : 0)) * as;
        for (Py_ssize_t j0 = 0; j0 < top; j0 += ATT_LANES) {
            AFN(vec) c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (Py_ssize_t d = 0; d < D; d++) {
                AFN(vec) bv = AFN(att_load)(bt + d * sp + j0);
                c0 += ar[0][d] * bv, c1 += ar[1][d] * bv, c2 += ar[2][d] * bv, c3 += ar[3][d] * bv;
            }
            AFN(vec) c[4] = {c0, c1, c2, c3};
            Py_ssize_t n = S - j0 < ATT_LANES ? S - j0 : ATT_LANES;
            for (int r = 0; r < rows; r++)
                memcpy(s + (i + r) * S + j0, &c[r], (size_t)n * sizeof(T));
        }
        for (int r = 0; r < rows; r++)
            for (Py_ssize_t j = ATT_SEES(i + r); j < S; j++)
                s[(i + r) * S + j] = 0;
    }
}

/* out (L x E, rows os apart) = w (L x S) @ b (S x E, rows bs apart): row i over the keys it sees
 * (w is 0 past them: a group of four rows runs to its last row's keys, sharing each load of b).
 * Each entry one chain over the keys in order. */
VECTOR_CLONES static void AFN(att_mix)(const T *w, Py_ssize_t L, Py_ssize_t S, int causal, const T *b,
                                    Py_ssize_t bs, Py_ssize_t E, T *out, Py_ssize_t os)
{
    for (Py_ssize_t i = 0; i < L; i += 4) {
        int rows = L - i < 4 ? (int)(L - i) : 4;
        Py_ssize_t top = ATT_SEES(i + rows - 1);
        const T *wr[4];
        for (int r = 0; r < 4; r++)
            wr[r] = w + (i + (r < rows ? r : 0)) * S;
        Py_ssize_t e0 = 0;
        for (; e0 + ATT_LANES <= E; e0 += ATT_LANES) {
            AFN(vec) c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (Py_ssize_t j = 0; j < top; j++) {
                AFN(vec) bv = AFN(att_load)(b + j * bs + e0);
                c0 += wr[0][j] * bv, c1 += wr[1][j] * bv, c2 += wr[2][j] * bv, c3 += wr[3][j] * bv;
            }
            AFN(vec) c[4] = {c0, c1, c2, c3};
            for (int r = 0; r < rows; r++)
                memcpy(out + (i + r) * os + e0, &c[r], sizeof(AFN(vec)));
        }
        for (Py_ssize_t e = e0; e < E; e++) /* the last entries, one at a time, in the same order */
            for (int r = 0; r < rows; r++) {
                T acc = 0;
                for (Py_ssize_t j = 0; j < top; j++)
                    acc += wr[r][j] * b[j * bs + e];
                out[(i + r) * os + e] = acc;
            }
    }
}

/* out (S x E, rows os apart) = w^T (w: L x S) @ b (L x E, rows bs apart): key j's row sums over
 * the queries that see it (from i = j on where causal; w is 0 before), four keys at a time
 * sharing each load of b, each entry one chain over the queries in order */
VECTOR_CLONES static void AFN(att_mix_t)(const T *w, Py_ssize_t L, Py_ssize_t S, int causal, const T *b,
                                      Py_ssize_t bs, Py_ssize_t E, T *out, Py_ssize_t os)
{
    for (Py_ssize_t j = 0; j < S; j += 4) {
        int keys = S - j < 4 ? (int)(S - j) : 4;
        Py_ssize_t first = causal ? j : 0;
        Py_ssize_t col[4];
        for (int r = 0; r < 4; r++)
            col[r] = j + (r < keys ? r : 0);
        Py_ssize_t e0 = 0;
        for (; e0 + ATT_LANES <= E; e0 += ATT_LANES) {
            AFN(vec) c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (Py_ssize_t i = first; i < L; i++) {
                AFN(vec) bv = AFN(att_load)(b + i * bs + e0);
                const T *wi = w + i * S;
                c0 += wi[col[0]] * bv, c1 += wi[col[1]] * bv, c2 += wi[col[2]] * bv, c3 += wi[col[3]] * bv;
            }
            AFN(vec) c[4] = {c0, c1, c2, c3};
            for (int r = 0; r < keys; r++)
                memcpy(out + (j + r) * os + e0, &c[r], sizeof(AFN(vec)));
        }
        for (Py_ssize_t e = e0; e < E; e++)
            for (int r = 0; r < keys; r++) {
                T acc = 0;
                for (Py_ssize_t i = first; i < L; i++)
                    acc += w[i * S + col[r]] * b[i * bs + e];
                out[(j + r) * os + e] = acc;
            }
    }
}

/* a head's operand (rows x width, rows `stride` apart) with its rows adjacent: itself where they
 * are, else copied into dst. Rows a page or more apart (a (L, N, E) layout's heads: 8 KiB) share
 * a few L1 sets, and the products read each row many times: copied once, they stay in cache
 * (an encoder layer's attention went from 4.9 to 1.2 ms a forward). */
static const T *AFN(att_packed)(const T *src, Py_ssize_t rows, Py_ssize_t stride, Py_ssize_t width, T *dst)
{
    if (stride == width || rows == 1)
        return src;
    for (Py_ssize_t r = 0; r < rows; r++)
        memcpy(dst + r * width, src + r * stride, (size_t)width * sizeof(T));
    return dst;
}

/* w (L x S) *= mask (L x S, contiguous): dropout's kept weights' scale */
static void AFN(att_drop)(T *w, const T *mask, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++)
        w[j] *= mask[j];
}

/* One head forward: out = (softmax(q k^T * scale) * mask) @ v. scratch: att_scratch_entries(h),
 * laid out as _kernels.c says there (the gradient's rows unused here). */
static void AFN(att_head)(const AttHead *h, const T *q, const T *k, const T *v, const T *mask, T *out, T *scratch)
{
    Py_ssize_t L = h->L, S = h->S, D = h->D, Dv = h->Dv;
    T *bt = scratch, *w = bt + att_bt_entries(h), *pq = w + 2 * L * S, *pk = pq + L * D,
      *pv = pk + S * D;
    q = AFN(att_packed)(q, L, h->qs, D, pq);
    k = AFN(att_packed)(k, S, h->ks, D, pk);
    v = AFN(att_packed)(v, S, h->vs, Dv, pv);
    AFN(att_scores)(q, D, k, D, L, S, D, h->causal, w, bt);
    AFN(softmax_rows)(w, w, 0, L, S, L, h->causal, (T)h->scale, 1);
    if (mask != NULL)
        AFN(att_drop)(w, mask, L * S);
    AFN(att_mix)(w, L, S, h->causal, v, Dv, Dv, out, h->os);
}

/* One head backward from the output's gradient g: gq (L x D), gk (S x D), gv (S x Dv), rows
 * contiguous. The weights are recomputed from q and k. scratch: as att_head's. */
static void AFN(att_head_backward)(const AttHead *h, const T *g, const T *q, const T *k, const T *v, const T *mask,
                                   T *gq, T *gk, T *gv, T *scratch)
{
    Py_ssize_t L = h->L, S = h->S, D = h->D, Dv = h->Dv;
    int causal = h->causal;
    T *bt = scratch, *w = bt + att_bt_entries(h), *dw = w + L * S, *pq = dw + L * S, *pk = pq + L * D,
      *pv = pk + S * D, *pg = pv + S * Dv;
    q = AFN(att_packed)(q, L, h->qs, D, pq);
    k = AFN(att_packed)(k, S, h->ks, D, pk);
    v = AFN(att_packed)(v, S, h->vs, Dv, pv);
    g = AFN(att_packed)(g, L, h->gs, Dv, pg);
    AFN(att_scores)(q, D, k, D, L, S, D, causal, w, bt);
    AFN(softmax_rows)(w, w, 0, L, S, L, causal, (T)h->scale, 1);
    if (mask != NULL) { /* gv from the dropped weights, kept in dw for the moment */
        for (Py_ssize_t j = 0; j < L * S; j++)
            dw[j] = w[j] * mask[j];
        AFN(att_mix_t)(dw, L, S, causal, g, Dv, Dv, gv, Dv);
    } else {
        AFN(att_mix_t)(w, L, S, causal, g, Dv, Dv, gv, Dv);
    }
    AFN(att_scores)(g, Dv, v, Dv, L, S, Dv, causal, dw, bt); /* the weights' gradient */
    if (mask != NULL)
        AFN(att_drop)(dw, mask, L * S);
    AFN(softmax_bwd_rows)(dw, w, dw, 0, L, S, L, causal, (T)h->scale); /* the scores' gradient */
    AFN(att_mix)(dw, L, S, causal, k, D, D, gq, D);
    AFN(att_mix_t)(dw, L, S, causal, q, D, D, gk, D);
}

#undef ATT_SEES
#undef ATT_LANES
#undef AFN
#undef ATT_CAT
#undef ATT_CAT_
