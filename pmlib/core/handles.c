/*
 * Handle tables: a handle is (generation << 32) | (slot + 1). Releasing an
 * object bumps its slot's generation, so a stale handle is recognised and
 * refused instead of reaching freed memory. Callers hold the runtime lock.
 */
#include "core/internal.h"

#include <stdlib.h>

static int grow(pm__handle_table_t *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    void **obj = realloc(t->obj, cap * sizeof *obj);
    if (obj == NULL)
        return PM_ENOMEM;
    t->obj = obj;
    uint32_t *gen = realloc(t->gen, cap * sizeof *gen);
    if (gen == NULL)
        return PM_ENOMEM;
    t->gen = gen;
    uint32_t *fl = realloc(t->free_list, cap * sizeof *fl);
    if (fl == NULL)
        return PM_ENOMEM;
    t->free_list = fl;
    /* New slots go on the free list highest first so low slots are used first. */
    for (uint32_t i = cap; i > t->cap; i--) {
        t->obj[i - 1] = NULL;
        t->gen[i - 1] = 1;
        t->free_list[t->nfree++] = i - 1;
    }
    t->cap = cap;
    return 0;
}

uint64_t pm__handle_add(pm__handle_table_t *t, void *obj)
{
    if (t->nfree == 0 && grow(t) != 0)
        return 0;
    uint32_t slot = t->free_list[--t->nfree];
    t->obj[slot] = obj;
    return ((uint64_t)t->gen[slot] << 32) | (uint64_t)(slot + 1);
}

void *pm__handle_get(const pm__handle_table_t *t, uint64_t h)
{
    uint32_t slot = (uint32_t)(h & 0xffffffffu);
    uint32_t gen = (uint32_t)(h >> 32);
    if (slot == 0 || slot > t->cap)
        return NULL;
    slot--;
    if (t->gen[slot] != gen)
        return NULL;
    return t->obj[slot];
}

void pm__handle_remove(pm__handle_table_t *t, uint64_t h)
{
    uint32_t slot = (uint32_t)(h & 0xffffffffu) - 1;
    t->obj[slot] = NULL;
    t->gen[slot]++;
    if (t->gen[slot] == 0)
        t->gen[slot] = 1;
    t->free_list[t->nfree++] = slot;
}

void pm__handle_table_free(pm__handle_table_t *t)
{
    free(t->obj);
    free(t->gen);
    free(t->free_list);
    *t = (pm__handle_table_t){0};
}
