/* A small pthread pool: the caller plus n-1 workers run the ranges of one
 * parallel-for at a time. The ranges (up to 4 per thread) depend only on the sizes and
 * the thread count; whichever thread is free first claims the next range, so a worker
 * that the OS schedules late (a loaded machine) does not hold the caller up: the caller
 * runs the unclaimed ranges itself. A range gets the index of the thread running it
 * (0 for the caller), so per-thread scratch indexed by it is never shared. Kernels only split
 * independent outputs, so results do not depend on who runs what.
 *
 * Waking a sleeping thread takes tens of microseconds, as long as a small operator
 * runs, and a plan runs hundreds of parallel-fors per inference. So a worker that
 * finishes a job spins for a while (SPIN_NS) watching for the next one before it
 * sleeps on the condition variable, and the caller wakes sleepers only when there are
 * any. Jobs are claimed through one atomic ticket that holds the job's generation,
 * its range count and the next unclaimed range: a worker can claim a range only of
 * the job it read, and the job cannot end (nor its parameters change) while any of its
 * ranges is claimed and unfinished. */
#include "exec/exec-impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* how long a worker (and the caller waiting for the last ranges) spins before sleeping */
#define SPIN_NS 200000

/* ticket: generation (32 bits) | range count (16) | next unclaimed range (16) */
#define T_GEN(t) ((uint32_t)((t) >> 32))
#define T_N(t) ((int)(((t) >> 16) & 0xffff))
#define T_NEXT(t) ((int)((t)&0xffff))

struct oq_pool {
    int n;                    /* threads including the caller */
    pthread_t *th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    _Atomic uint64_t ticket;
    _Atomic int pending;      /* ranges of the current job not finished */
    _Atomic bool stop;
    int sleepers;             /* workers waiting on cv_work (under mu) */
    bool caller_sleeps;       /* the caller waits on cv_done (under mu) */
    /* current job: written by the caller before the ticket that publishes it */
    oq_range_fn fn;
    void *arg;
    int64_t n_items, chunk;
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

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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

/* one range finished: the last one wakes a sleeping caller */
static void range_done(oq_pool *p)
{
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&p->mu);
        if (p->caller_sleeps)
            pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* claim and run ranges of job generation gen while any are left */
static void run_job(oq_pool *p, uint32_t gen, int w)
{
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    while (T_GEN(t) == gen && T_NEXT(t) < T_N(t)) {
        if (atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            run_range(p, T_NEXT(t), w);
            range_done(p);
            t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        }
    }
}

static void *worker_main(void *a)
{
    oq_pool *p = ((worker_arg *)a)->p;
    int w = ((worker_arg *)a)->index;
    free(a);
    uint32_t seen = 0;
    for (;;) {
        /* wait for a generation other than `seen`: spin, then sleep */
        uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
        if (T_GEN(t) == seen && !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            int64_t until = now_ns() + SPIN_NS;
            for (int i = 0;; i++) {
                cpu_relax();
                t = atomic_load_explicit(&p->ticket, memory_order_acquire);
                if (T_GEN(t) != seen || atomic_load_explicit(&p->stop, memory_order_acquire))
                    break;
                if ((i & 255) == 255 && now_ns() > until) {
                    pthread_mutex_lock(&p->mu);
                    p->sleepers++;
                    for (;;) {
                        t = atomic_load_explicit(&p->ticket, memory_order_acquire);
                        if (T_GEN(t) != seen || atomic_load_explicit(&p->stop, memory_order_acquire))
                            break;
                        pthread_cond_wait(&p->cv_work, &p->mu);
                    }
                    p->sleepers--;
                    pthread_mutex_unlock(&p->mu);
                    break;
                }
            }
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            break;
        seen = T_GEN(t);
        run_job(p, seen, w);
    }
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
    atomic_init(&p->ticket, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, false);
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
    atomic_store_explicit(&p->stop, true, memory_order_release);
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
    int n_ranges = (int)((n + chunk - 1) / chunk); /* <= 1024: fits the ticket's 16 bits */
    p->fn = fn;
    p->arg = arg;
    p->n_items = n;
    p->chunk = chunk;
    atomic_store_explicit(&p->pending, n_ranges, memory_order_relaxed);
    uint32_t gen = T_GEN(atomic_load_explicit(&p->ticket, memory_order_relaxed)) + 1;
    if (gen == 0) /* 0 is what workers start out having seen */
        gen = 1;
    /* publish: the job's fields and pending happen-before any claim of it */
    atomic_store_explicit(&p->ticket, (uint64_t)gen << 32 | (uint64_t)n_ranges << 16,
                          memory_order_seq_cst);
    pthread_mutex_lock(&p->mu);
    if (p->sleepers)
        pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_job(p, gen, 0);
    /* the ranges still running on workers: spin, then sleep */
    int64_t until = 0;
    for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
        cpu_relax();
        if ((i & 255) != 255)
            continue;
        if (!until) {
            until = now_ns() + SPIN_NS;
        } else if (now_ns() > until) {
            pthread_mutex_lock(&p->mu);
            p->caller_sleeps = true;
            while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
                pthread_cond_wait(&p->cv_done, &p->mu);
            p->caller_sleeps = false;
            pthread_mutex_unlock(&p->mu);
            break;
        }
    }
}
