/* erf, exp and tanh over a block of floats or doubles, shared by the native kernels (_kernels.c)
 * and the LSTM steps (rnn.c). Include after <Python.h>, <math.h> and <string.h>. */
#ifndef PLUGTORCH_VECTOR_MATH_H
#define PLUGTORCH_VECTOR_MATH_H

/* Loops bound by arithmetic (Adam's divide and square root, the LSTM step's gates) are built for
 * the wider vector units too, and the loader picks the widest this CPU has (GCC/Clang function
 * multiversioning, which needs glibc's ifunc, on x86-64; the build's baseline is SSE2). IEEE
 * division, square root, + and * round the same at any width, and -ffp-contract=off keeps FMA
 * out, so every clone gives the same bits. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

/* Blocks of erf, exp and tanh, for the kernels that apply them to whole arrays (erf, gelu and its
 * gradient, the LSTM's gates; inline, so that a file using some of them is not warned about the
 * rest). For float, glibc's vector variants (libmvec, glibc >= 2.35 on x86-64; 5-10x the scalar
 * functions, special values as theirs) where setup.py found libmvec and defined PLUGTORCH_MVEC, at
 * the widest vector this CPU has: sixteen lanes a call with AVX-512, eight with AVX2, four
 * otherwise (the four-lane ones left gelu's gradient at 2.7 ns an element, torch's at a third;
 * the LSTM step's tanh 1.16 ns against 0.37). The width is chosen once a process
 * (vector_math_width), so every kernel rounds alike; every element of a call goes through one
 * function, the tail padded, so a value's result does not depend on where it sits or how a loop
 * was split. The four-lane functions are within 2 ulp for erff and tanhf and 3 for expf; the wide
 * erff reaches -1/1 from |x| ~ 3.67 (erf is 1 - 2.4e-7 there): 4 ulp of the value below 1
 * (tests/ops/test_erf.py holds it to that). The scalar functions elsewhere, and for double. In
 * place is allowed (out == in). */
#if defined(PLUGTORCH_MVEC) && defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#define MVEC_BLOCK(name, vtype, lanes, load, store, vector)                     \
    static inline void name(const float *in, float *out, Py_ssize_t n)          \
    {                                                                           \
        Py_ssize_t i = 0;                                                       \
        for (; i + lanes <= n; i += lanes)                                      \
            store(out + i, vector(load(in + i)));                               \
        if (i < n) {                                                            \
            float pad[lanes] = {0};                                             \
            memcpy(pad, in + i, (size_t)(n - i) * sizeof(float));               \
            store(pad, vector(load(pad)));                                      \
            memcpy(out + i, pad, (size_t)(n - i) * sizeof(float));              \
        }                                                                       \
    }
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_tanhf(__m128);
MVEC_BLOCK(erf_block_f4, __m128, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_erff)
MVEC_BLOCK(exp_block_f4, __m128, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_expf)
MVEC_BLOCK(tanh_block_f4, __m128, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_tanhf)
#pragma GCC push_options
#pragma GCC target("avx2")
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
MVEC_BLOCK(erf_block_f8, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_erff)
MVEC_BLOCK(exp_block_f8, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_expf)
MVEC_BLOCK(tanh_block_f8, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_tanhf)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f")
__m512 _ZGVeN16v_erff(__m512);
__m512 _ZGVeN16v_expf(__m512);
__m512 _ZGVeN16v_tanhf(__m512);
MVEC_BLOCK(erf_block_f16, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _ZGVeN16v_erff)
MVEC_BLOCK(exp_block_f16, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _ZGVeN16v_expf)
MVEC_BLOCK(tanh_block_f16, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _ZGVeN16v_tanhf)
#pragma GCC pop_options
#undef MVEC_BLOCK

/* the lanes a call, chosen at the first call (each module decides alike) */
static inline int vector_math_width(void)
{
    static int width = 0;
    if (width == 0) {
        __builtin_cpu_init();
        width = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 4;
    }
    return width;
}

#define BLOCK_F(name)                                                           \
    static inline void name(const float *in, float *out, Py_ssize_t n)          \
    {                                                                           \
        int width = vector_math_width();                                        \
        if (width == 16)                                                        \
            name##16(in, out, n);                                               \
        else if (width == 8)                                                    \
            name##8(in, out, n);                                                \
        else                                                                    \
            name##4(in, out, n);                                                \
    }
BLOCK_F(erf_block_f)
BLOCK_F(exp_block_f)
BLOCK_F(tanh_block_f)
#else
static inline int vector_math_width(void)
{
    return 1;
}

#define BLOCK_F(name, scalar)                                                  \
    static inline void name(const float *in, float *out, Py_ssize_t n)        \
    {                                                                          \
        for (Py_ssize_t i = 0; i < n; i++)                                     \
            out[i] = scalar(in[i]);                                            \
    }
BLOCK_F(erf_block_f, erff)
BLOCK_F(exp_block_f, expf)
BLOCK_F(tanh_block_f, tanhf)
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
