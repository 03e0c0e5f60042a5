/* A stress run of backends/numpy_backend/native/threadpool.c on its own (test_thread_pool.py
 * builds and runs it): three threads call the pool at once, with 1 to 5 jobs a call, each job
 * waiting at a barrier for all the others (the pattern of OpenBLAS's level-3 jobs, which
 * deadlocks unless every job of a call runs at once); every job must run exactly once; some
 * calls come after a pause long enough for the workers to sleep; then a forked child does
 * the same. Prints "ok" and exits 0, or says what went wrong and exits 1. */
#define _DEFAULT_SOURCE
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int n;
    atomic_int ran[8];
    atomic_int arrived;
} Call;

static void job(int i, void *p)
{
    Call *c = p;
    atomic_fetch_add(&c->ran[i], 1);
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < c->n)
        sched_yield();
}

static void *caller(void *arg)
{
    long calls = (long)arg;
    for (long it = 0; it < calls; it++) {
        Call c = {0};
        c.n = 1 + (int)(it % 5);
        pool_run(c.n, job, &c, 1);
        for (int i = 0; i < c.n; i++)
            if (atomic_load(&c.ran[i]) != 1) {
                printf("call %ld: job %d ran %d times\n", it, i, atomic_load(&c.ran[i]));
                exit(1);
            }
        if (it % 1000 == 999)
            usleep(3000); /* past the workers' 1 ms spin: they sleep, and must be woken */
    }
    return NULL;
}

int main(void)
{
    pthread_t threads[3];
    for (int k = 0; k < 3; k++)
        pthread_create(&threads[k], NULL, caller, (void *)5000L);
    for (int k = 0; k < 3; k++)
        pthread_join(threads[k], NULL);
    pid_t pid = fork();
    if (pid == 0) {
        caller((void *)2000L);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        printf("the forked child failed\n");
        return 1;
    }
    printf("ok %d workers, %llu calls\n", pool_workers(), pool_calls());
    return 0;
}
