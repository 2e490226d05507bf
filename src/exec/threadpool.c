/* A small pthread pool: the caller plus n-1 workers run the ranges of one
 * parallel-for at a time. The ranges (up to 4 per thread) depend only on the sizes and
 * the thread count; whichever thread is free first claims the next range, so a worker
 * that the OS schedules late (a loaded machine) does not hold the caller up: the caller
 * runs the unclaimed ranges itself. A range gets the index of the thread running it
 * (0 for the caller), so per-thread scratch indexed by it is never shared. Kernels only split
 * independent outputs, so results do not depend on who runs what. */
#include "exec/exec-impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct oq_pool {
    int n;                    /* threads including the caller */
    pthread_t *th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t gen;             /* bumped for every parallel-for */
    int pending;              /* worker ranges not finished */
    bool stop;
    /* current job */
    oq_range_fn fn;
    void *arg;
    int64_t n_items, chunk;
    int n_ranges;
    int next_range;           /* next unclaimed range of the current job */
};

/* set while this thread runs a range: a nested parallel-for then runs serially */
static _Thread_local int in_range;

int oq_cpu_count(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1)
        return 1;
    return c > 256 ? 256 : (int)c;
}

typedef struct worker_arg {
    oq_pool *p;
    int index;
} worker_arg;

/* range r of the current job, run by thread w (0 = the caller) */
static void run_range(oq_pool *p, int r, int w)
{
    int64_t b = (int64_t)r * p->chunk;
    int64_t e = b + p->chunk;
    if (e > p->n_items)
        e = p->n_items;
    if (b < e) {
        in_range = 1;
        p->fn(p->arg, b, e, w);
        in_range = 0;
    }
}

static void *worker_main(void *a)
{
    oq_pool *p = ((worker_arg *)a)->p;
    int w = ((worker_arg *)a)->index;
    free(a);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        /* claim ranges of this job while any are left (the mutex is held here) */
        while (p->next_range < p->n_ranges) {
            int r = p->next_range++;
            pthread_mutex_unlock(&p->mu);
            run_range(p, r, w);
            pthread_mutex_lock(&p->mu);
            if (--p->pending == 0)
                pthread_cond_signal(&p->cv_done);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

oq_pool *oq_pool_new(int threads)
{
    if (threads <= 0)
        threads = oq_cpu_count();
    if (threads > 256)
        threads = 256;
    oq_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->n = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (threads > 1) {
        p->th = calloc((size_t)threads, sizeof(pthread_t));
        if (!p->th)
            goto fail;
        for (int i = 1; i < threads; i++) {
            worker_arg *wa = malloc(sizeof(*wa));
            if (!wa)
                goto fail;
            wa->p = p;
            wa->index = i;
            if (pthread_create(&p->th[i], NULL, worker_main, wa) != 0) {
                free(wa);
                goto fail;
            }
            p->started = i;
        }
    }
    return p;
fail:
    oq_pool_free(p);
    return NULL;
}

void oq_pool_free(oq_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p->th);
    free(p);
}

int oq_pool_threads(const oq_pool *p)
{
    return p ? p->n : 1;
}

void oq_pool_for(oq_pool *p, int64_t n, int64_t grain, oq_range_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int threads = p ? p->n : 1;
    /* up to 4 ranges per thread: a thread the OS schedules late (or preempts) then
     * holds back at most a small share, which the others take over */
    int64_t ranges = n / grain;
    if (ranges > 4 * (int64_t)threads)
        ranges = 4 * (int64_t)threads;
    if (ranges <= 1 || !p || p->started + 1 < p->n || in_range) {
        fn(arg, 0, n, 0);
        return;
    }
    int64_t chunk = (n + ranges - 1) / ranges;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    p->chunk = chunk;
    p->n_ranges = (int)((n + chunk - 1) / chunk);
    p->pending = p->n_ranges;
    p->next_range = 0;
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    while (p->next_range < p->n_ranges) {
        int r = p->next_range++;
        pthread_mutex_unlock(&p->mu);
        run_range(p, r, 0);
        pthread_mutex_lock(&p->mu);
        p->pending--;
    }
    while (p->pending > 0)
        pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
