/* Growing a malloc'ed array one element at a time (the arena has oq_arena_grow). */
#ifndef ONNXQ_GROW_H
#define ONNXQ_GROW_H
#include <stddef.h>

/* An array of elem-byte elements with room for element n: arr itself while n < *cap,
 * else arr reallocated to twice *cap elements (first elements when *cap is 0) and *cap
 * updated. NULL when out of memory or on overflow; arr and *cap are then unchanged. */
void *oq_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first);
#endif
