/* One small thread pool for the native kernels and for NumPy's OpenBLAS (threadpool.c).
 *
 * Two pools on two cores fight: OpenBLAS's workers spin for a while after every matrix product,
 * so a kernel split over threads of its own finds the other core taken. With OpenBLAS's
 * parallel jobs handed to this pool too (its threads callback), one set of workers serves both,
 * and they sleep as soon as a short spin finds no work.
 */
#ifndef PLUGTORCH_THREADPOOL_H
#define PLUGTORCH_THREADPOOL_H

#include <stddef.h>

/* job(i, arg) for every i in [0, n), all n running at once (the caller runs job 0); returns when
 * all are done. Calls from several threads run one at a time. n <= 1 runs on the caller alone.
 * together: the jobs wait on each other (OpenBLAS's), so if the workers cannot be made the
 * process stops; otherwise the caller then runs them one after another. */
void pool_run(int n, void (*job)(int i, void *arg), void *arg, int together);

/* How many jobs a kernel should split into: a fixed number (pool_set_width; 1 at start), or
 * what `source` answers at each call (pool_follow: OpenBLAS's openblas_get_num_threads, so
 * that the kernels use the threads BLAS is told to use). */
int pool_width(void);
void pool_set_width(int n);
void pool_follow(int (*source)(void));

/* OpenBLAS's threads callback (openblas_set_threads_callback_function): its jobs on this pool. */
void pool_openblas_callback(int sync, void (*dojob)(int, void *, int), int numjobs, size_t elsize,
                            void *jobdata, int dojob_data);

/* For tests and reports: workers alive, calls run with more than one job. */
int pool_workers(void);
unsigned long long pool_calls(void);

/* The pool for the other extension modules (the weight gradient in gemm.c): _kernels publishes
 * these two as a capsule, which PyCapsule_Import(POOL_CAPSULE, 0) finds. */
typedef struct {
    void (*run)(int n, void (*job)(int i, void *arg), void *arg, int together);
    int (*width)(void);
} PoolAPI;
#define POOL_CAPSULE "plugtorch_backends.numpy_backend.native._kernels.pool"

/* job(i, arg) for every i in [0, n) on `pool`, not waiting on each other; n <= 1 runs job 0 on the
 * caller (which is how a kernel without the pool runs: its width is then 1) */
static inline void kernels_pool_run(const PoolAPI *pool, int n, void (*job)(int i, void *arg), void *arg)
{
    if (n > 1)
        pool->run(n, job, arg, 0);
    else
        job(0, arg);
}

#ifdef Py_PYTHON_H
/* That pool, for another module: looked up once, with the GIL held; NULL where _kernels was not
 * built (the kernels then run as one job). */
static inline const PoolAPI *kernels_pool(void)
{
    static const PoolAPI *pool = NULL;
    static int looked = 0;
    if (!looked) {
        looked = 1;
        pool = PyCapsule_Import(POOL_CAPSULE, 0);
        if (pool == NULL)
            PyErr_Clear();
    }
    return pool;
}
#endif

#endif
