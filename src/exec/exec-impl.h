/* Private to src/exec: the thread pool and plan internals shared by plan.c/run.c. */
#ifndef ONNXQ_EXEC_IMPL_H
#define ONNXQ_EXEC_IMPL_H
#include "exec/kernel.h"

/* A fixed pool of n-1 worker threads plus the caller. */
oq_pool *oq_pool_new(int threads);
void oq_pool_free(oq_pool *p);
int oq_pool_threads(const oq_pool *p);
/* Split [0, n) into at most `threads` contiguous ranges (each >= grain items, except
 * when n < grain) and run them; the partition depends on n, grain and the thread
 * count only. Blocks until all ranges are done. */
void oq_pool_for(oq_pool *p, int64_t n, int64_t grain, oq_range_fn fn, void *arg);
/* Online CPUs (>= 1). */
int oq_cpu_count(void);

#endif
