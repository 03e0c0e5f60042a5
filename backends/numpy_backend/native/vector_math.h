/* erf, exp and tanh over a block of floats or doubles, shared by the native kernels (_kernels.c)
 * and the LSTM steps (rnn.c). Include after <Python.h>, <math.h> and <string.h>. */
#ifndef PLUGTORCH_VECTOR_MATH_H
#define PLUGTORCH_VECTOR_MATH_H

/* Blocks of erf, exp and tanh, for the kernels that apply them to whole arrays (erf, gelu and its
 * gradient, the LSTM's gates; inline, so that a file using some of them is not warned about the
 * rest). For float, glibc's vector variants (libmvec, glibc >= 2.35 on x86-64: four lanes a
 * call, 5-10x the scalar functions, within 2 ulp for erff and tanhf and 3 for expf, special values
 * as theirs) where setup.py found libmvec and defined PLUGTORCH_MVEC; the scalar functions
 * elsewhere, and for double. In place is allowed (out == in). */
#ifdef PLUGTORCH_MVEC
#include <immintrin.h>
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_tanhf(__m128);
/* every element through the vector function, the tail too (padded to four lanes), so that a
 * value's result does not depend on where it sits or how a loop was split */
#define BLOCK_F(name, vector, scalar)                                          \
    static inline void name(const float *in, float *out, Py_ssize_t n)                \
    {                                                                          \
        Py_ssize_t i = 0;                                                      \
        for (; i + 4 <= n; i += 4)                                             \
            _mm_storeu_ps(out + i, vector(_mm_loadu_ps(in + i)));              \
        if (i < n) {                                                           \
            float lanes[4] = {0, 0, 0, 0};                                     \
            memcpy(lanes, in + i, (size_t)(n - i) * sizeof(float));            \
            _mm_storeu_ps(lanes, vector(_mm_loadu_ps(lanes)));                 \
            memcpy(out + i, lanes, (size_t)(n - i) * sizeof(float));           \
        }                                                                      \
    }
BLOCK_F(erf_block_f, _ZGVbN4v_erff, erff)
BLOCK_F(exp_block_f, _ZGVbN4v_expf, expf)
BLOCK_F(tanh_block_f, _ZGVbN4v_tanhf, tanhf)
#else
#define BLOCK_F(name, vector, scalar)                                          \
    static inline void name(const float *in, float *out, Py_ssize_t n)                \
    {                                                                          \
        for (Py_ssize_t i = 0; i < n; i++)                                     \
            out[i] = scalar(in[i]);                                            \
    }
BLOCK_F(erf_block_f, _, erff)
BLOCK_F(exp_block_f, _, expf)
BLOCK_F(tanh_block_f, _, tanhf)
#endif

#define BLOCK_D(name, scalar)                                                  \
    static inline void name(const double *in, double *out, Py_ssize_t n)              \
    {                                                                          \
        for (Py_ssize_t i = 0; i < n; i++)                                     \
            out[i] = scalar(in[i]);                                            \
    }
BLOCK_D(erf_block_d, erf)
BLOCK_D(exp_block_d, exp)
BLOCK_D(tanh_block_d, tanh)

#endif
