#include "ir/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE ((size_t)64 * 1024)
#define BIG_SIZE ((size_t)16 * 1024)

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    /* followed by data, aligned to 16 */
} chunk;

struct oq_arena {
    chunk *head;   /* current small-object chunk */
    chunk *big;    /* dedicated chunks for large allocations */
    size_t total;
};

#define HDR (((sizeof(chunk) + 15) / 16) * 16)

static chunk *chunk_new(size_t size)
{
    if (size > SIZE_MAX - HDR)
        return NULL;
    chunk *c = malloc(HDR + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

oq_arena *oq_arena_new(void)
{
    oq_arena *a = calloc(1, sizeof(*a));
    return a;
}

static void free_list(chunk *c)
{
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
}

void oq_arena_free(oq_arena *a)
{
    if (!a)
        return;
    free_list(a->head);
    free_list(a->big);
    free(a);
}

void *oq_arena_alloc_raw(oq_arena *a, size_t size)
{
    if (!a)
        return NULL;
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - 15)
        return NULL;
    size_t asz = (size + 15) & ~(size_t)15;
    if (asz >= BIG_SIZE) {
        chunk *c = chunk_new(asz);
        if (!c)
            return NULL;
        c->used = asz;
        c->next = a->big;
        a->big = c;
        a->total += asz;
        return (char *)c + HDR;
    }
    if (!a->head || a->head->size - a->head->used < asz) {
        chunk *c = chunk_new(CHUNK_SIZE);
        if (!c)
            return NULL;
        c->next = a->head;
        a->head = c;
        a->total += CHUNK_SIZE;
    }
    void *p = (char *)a->head + HDR + a->head->used;
    a->head->used += asz;
    return p;
}

void *oq_arena_alloc(oq_arena *a, size_t size)
{
    void *p = oq_arena_alloc_raw(a, size);
    if (p)
        memset(p, 0, size ? size : 1);
    return p;
}

char *oq_arena_strndup(oq_arena *a, const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *p = oq_arena_alloc_raw(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *oq_arena_strdup(oq_arena *a, const char *s)
{
    return s ? oq_arena_strndup(a, s, strlen(s)) : NULL;
}

void *oq_arena_memdup(oq_arena *a, const void *p, size_t n)
{
    void *q = oq_arena_alloc_raw(a, n);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

void *oq_arena_grow(oq_arena *a, void *old, size_t old_bytes, size_t new_bytes)
{
    if (new_bytes <= old_bytes && old)
        return old;
    void *p = oq_arena_alloc(a, new_bytes);
    if (p && old && old_bytes)
        memcpy(p, old, old_bytes);
    return p;
}

size_t oq_arena_bytes(const oq_arena *a)
{
    return a ? a->total : 0;
}
