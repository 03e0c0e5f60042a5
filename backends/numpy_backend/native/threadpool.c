/* One small thread pool for the native kernels and for NumPy's OpenBLAS: see threadpool.h.
 *
 * The rules it keeps:
 * - every job of a call runs at once, the caller running job 0 and worker k job k. OpenBLAS's
 *   threaded level-3 jobs wait on each other's progress, so running them one after another
 *   would deadlock; a call makes sure it has n - 1 workers before it starts;
 * - one call at a time (call_lock): OpenBLAS addresses per-job scratch buffers by job index;
 * - a worker spins for up to 1 ms for its next job (kernels and matrix products come back to
 *   back in a training step), yielding the core now and then to any thread that wants it, then
 *   sleeps on a condition variable, so an idle pool takes no core;
 * - fork: the child starts with no workers (they are not copied) and makes new ones on its
 *   first call; the locks are held across the fork so no call is half done in the child.
 * Hand-off: each worker has a ticket the caller bumps; sleeping is announced through a counter
 * read after the tickets are written (sequentially consistent on both sides), so a wake-up is
 * never lost and a spinning pool makes no system call.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "threadpool.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef _WIN32 /* no pthreads: everything runs on the caller, one job after another */

void pool_run(int n, void (*job)(int, void *), void *arg, int together)
{
    (void)together;
    for (int i = 0; i < n; i++)
        job(i, arg);
}
int pool_width(void) { return 1; }
void pool_set_width(int n) { (void)n; }
void pool_follow(int (*source)(void)) { (void)source; }
void pool_openblas_callback(int sync, void (*dojob)(int, void *, int), int numjobs, size_t elsize,
                            void *jobdata, int dojob_data)
{
    (void)sync;
    for (int i = 0; i < numjobs; i++)
        dojob(i, (char *)jobdata + i * elsize, dojob_data);
}
int pool_workers(void) { return 0; }
unsigned long long pool_calls(void) { return 0; }

#else

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define MAX_WORKERS 256
#define SPIN_NS 1000000 /* how long a worker, or a caller waiting for its workers, spins before sleeping */

typedef struct {
    atomic_ulong ticket; /* bumped by the caller for each job it hands this worker */
    unsigned long start; /* the ticket when the worker was made: a job handed before it ran is not missed */
    void (*job)(int, void *);
    void *arg;
} Slot;

static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;    /* workers: a ticket moved */
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER; /* the caller: the last job is done */
static atomic_int sleepers;          /* workers asleep, or about to be, on `wake` */
static atomic_int caller_asleep;     /* the caller asleep, or about to be, on `finished` */
static atomic_int remaining;         /* jobs of the current call still running on workers */
static Slot slots[MAX_WORKERS + 1];  /* slots[k] for worker k (1-based) */
static int nworkers;
static atomic_int width = 1;
static atomic_uintptr_t width_source; /* int (*)(void) whose answer is the width, when set */
static atomic_ullong calls;
static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *p)
{
    Slot *slot = p;
    unsigned long seen = slot->start;
    for (;;) {
        unsigned long t = atomic_load(&slot->ticket);
        if (t == seen) {
            uint64_t until = now_ns() + SPIN_NS;
            for (unsigned n = 1; (t = atomic_load(&slot->ticket)) == seen; n++) {
                relax();
                if ((n & 63) == 0) {
                    if (now_ns() > until)
                        break;
                    sched_yield(); /* more threads than cores (ranks, other pools): let them run */
                }
            }
        }
        if (t == seen) {
            pthread_mutex_lock(&sleep_lock);
            atomic_fetch_add(&sleepers, 1);
            while ((t = atomic_load(&slot->ticket)) == seen)
                pthread_cond_wait(&wake, &sleep_lock);
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&sleep_lock);
        }
        seen = t;
        slot->job((int)(slot - slots), slot->arg);
        if (atomic_fetch_sub(&remaining, 1) == 1 && atomic_load(&caller_asleep)) {
            pthread_mutex_lock(&sleep_lock);
            pthread_cond_signal(&finished);
            pthread_mutex_unlock(&sleep_lock);
        }
    }
    return NULL;
}

static void before_fork(void)
{
    pthread_mutex_lock(&call_lock);
    pthread_mutex_lock(&sleep_lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&sleep_lock);
    pthread_mutex_unlock(&call_lock);
}

static void after_fork_child(void)
{
    /* the workers are not copied: start again with none; tickets may stay as they are, since a
     * new worker reads its slot's ticket before it waits */
    nworkers = 0;
    atomic_store(&sleepers, 0);
    atomic_store(&caller_asleep, 0);
    atomic_store(&remaining, 0);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&finished, NULL);
    pthread_mutex_unlock(&sleep_lock);
    pthread_mutex_unlock(&call_lock);
}

static void install_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* under call_lock: at least `want` workers, or as many as could be made */
static int ensure_workers(int want)
{
    pthread_once(&fork_handlers, install_fork_handlers);
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    while (nworkers < want) {
        pthread_t th;
        pthread_attr_t attr;
        Slot *slot = &slots[nworkers + 1];
        slot->start = atomic_load(&slot->ticket);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 1 << 20); /* OpenBLAS's jobs keep their buffers off the stack */
        int err = pthread_create(&th, &attr, worker_main, slot);
        pthread_attr_destroy(&attr);
        if (err)
            break;
        nworkers++;
    }
    return nworkers;
}

void pool_run(int n, void (*job)(int, void *), void *arg, int together)
{
    if (n <= 1) {
        if (n == 1)
            job(0, arg);
        return;
    }
    pthread_mutex_lock(&call_lock);
    if (ensure_workers(n - 1) < n - 1) {
        if (together) {
            /* Jobs that must run at once (OpenBLAS's) cannot run otherwise: stop rather than hang. */
            fprintf(stderr, "plugtorch: could not start %d worker threads for OpenBLAS's jobs\n", n - 1);
            abort();
        }
        pthread_mutex_unlock(&call_lock);
        for (int i = 0; i < n; i++) /* independent jobs: one after another on the caller */
            job(i, arg);
        return;
    }
    atomic_fetch_add(&calls, 1);
    atomic_store(&remaining, n - 1);
    for (int k = 1; k < n; k++) {
        slots[k].job = job;
        slots[k].arg = arg;
        atomic_fetch_add(&slots[k].ticket, 1);
    }
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&sleep_lock);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&sleep_lock);
    }
    job(0, arg);
    if (atomic_load(&remaining) > 0) {
        uint64_t until = now_ns() + SPIN_NS;
        for (unsigned i = 1; atomic_load(&remaining) > 0; i++) {
            relax();
            if ((i & 63) == 0) {
                if (now_ns() > until)
                    break;
                sched_yield();
            }
        }
        if (atomic_load(&remaining) > 0) {
            pthread_mutex_lock(&sleep_lock);
            atomic_store(&caller_asleep, 1);
            while (atomic_load(&remaining) > 0)
                pthread_cond_wait(&finished, &sleep_lock);
            atomic_store(&caller_asleep, 0);
            pthread_mutex_unlock(&sleep_lock);
        }
    }
    pthread_mutex_unlock(&call_lock);
}

static int clamp_width(int n) { return n < 1 ? 1 : (n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : n); }

int pool_width(void)
{
    int (*source)(void) = (int (*)(void))atomic_load(&width_source);
    return source ? clamp_width(source()) : atomic_load(&width);
}

void pool_set_width(int n)
{
    atomic_store(&width_source, (uintptr_t)0);
    atomic_store(&width, clamp_width(n));
}

void pool_follow(int (*source)(void)) { atomic_store(&width_source, (uintptr_t)source); }

typedef struct {
    void (*dojob)(int, void *, int);
    char *jobdata;
    size_t elsize;
    int dojob_data;
} BlasCall;

static void blas_job(int i, void *arg)
{
    BlasCall *c = arg;
    c->dojob(i, c->jobdata + (size_t)i * c->elsize, c->dojob_data);
}

void pool_openblas_callback(int sync, void (*dojob)(int, void *, int), int numjobs, size_t elsize,
                            void *jobdata, int dojob_data)
{
    (void)sync; /* OpenBLAS passes 1; returning with every job done serves 0 as well */
    BlasCall c = {dojob, jobdata, elsize, dojob_data};
    pool_run(numjobs, blas_job, &c, 1);
}

int pool_workers(void)
{
    pthread_mutex_lock(&call_lock);
    int n = nworkers;
    pthread_mutex_unlock(&call_lock);
    return n;
}

unsigned long long pool_calls(void) { return atomic_load(&calls); }

#endif
