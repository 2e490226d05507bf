/* Bump allocator: every object of a model comes from its arena; one free releases all. */
#ifndef ONNXQ_ARENA_H
#define ONNXQ_ARENA_H
#include <stddef.h>

typedef struct oq_arena oq_arena;

oq_arena *oq_arena_new(void);
void oq_arena_free(oq_arena *a);
/* Zeroed, 16-byte aligned. NULL on OOM or overflow. Large requests get their own chunk. */
void *oq_arena_alloc(oq_arena *a, size_t size);
/* Uninitialized variant for bulk data (still 16-byte aligned). */
void *oq_arena_alloc_raw(oq_arena *a, size_t size);
char *oq_arena_strdup(oq_arena *a, const char *s);
char *oq_arena_strndup(oq_arena *a, const char *s, size_t n);
void *oq_arena_memdup(oq_arena *a, const void *p, size_t n);
/* Grow an array allocated from the arena (old memory is simply abandoned). */
void *oq_arena_grow(oq_arena *a, void *old, size_t old_bytes, size_t new_bytes);
/* Bytes obtained from the system so far. */
size_t oq_arena_bytes(const oq_arena *a);
#endif
