#include "ir/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *oq_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc < *cap || (elem && nc > SIZE_MAX / elem))
        return NULL;
    void *p = realloc(arr, nc * elem);
    if (p)
        *cap = nc;
    return p;
}
