/* The native product (gemm.c) for the other extension modules: the LSTM's time loop (rnn.c) runs
 * its per-step products through it without coming back to Python between steps. _gemm publishes
 * the struct as a capsule, which PyCapsule_Import(GEMM_CAPSULE, 0) finds.
 */
#ifndef PLUGTORCH_GEMM_API_H
#define PLUGTORCH_GEMM_API_H

#include "threadpool.h"

typedef struct {
    /* c (m x n) = a (m x k) @ b (k x n), kind 'f' (float32) or 'd' (float64), each matrix with its
     * columns adjacent and its rows lda, ldb, ldc elements apart, split over `pool` (NULL: one
     * job) exactly as _gemm.gemm splits it, so the bits are that call's. Call without the GIL.
     * 0 on success, -1 where scratch memory ran out, -2 where the kernel does not run on this CPU. */
    int (*gemm)(char kind, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const void *a, Py_ssize_t lda,
                const void *b, Py_ssize_t ldb, void *c, Py_ssize_t ldc, const PoolAPI *pool);
} GemmAPI;
#define GEMM_CAPSULE "plugtorch_backends.numpy_backend.native._gemm.api"

#endif
