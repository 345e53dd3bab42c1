/* The directory of copies on this host (data/copies.h). */
#include "data/copies.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pm__copy_t *listed; /* every copy of this host, newest first */

void pm__copies_lock(void)
{
    pthread_mutex_lock(&lock);
}

void pm__copies_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

void pm__copies_add(pm__copy_t *c)
{
    c->next = listed;
    listed = c;
}

void pm__copies_remove(pm__copy_t *c)
{
    for (pm__copy_t **pp = &listed; *pp != NULL; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->next = NULL;
}

void pm__copy_sync(pm__copy_t *c, uint64_t version)
{
    if (c->version == version)
        return;
    if (version == c->version + 1 && c->pending.ncov > 0) {
        pm__acc_t t = c->valid;
        c->valid = c->pending;
        c->pending = t;
    } else {
        c->valid.ncov = 0;
    }
    c->pending.ncov = 0;
    c->writing.ncov = 0;
    c->version = version;
}

int pm__copy_mark(pm__acc_t *a, const pm__sub_t *q, bool add)
{
    return pm__acc_apply_rows(a, q->offset, q->block, q->stride, q->count, add);
}

bool pm__copy_covers(const pm__acc_t *a, const pm__sub_t *q)
{
    return pm__acc_covers_rows(a, q->offset, q->block, q->stride, q->count);
}

bool pm__copy_touches(const pm__acc_t *a, const pm__sub_t *q)
{
    for (uint64_t k = 0; k < q->count && a->ncov > 0; k++)
        if (pm__acc_touches(a, q->offset + k * q->stride, q->offset + k * q->stride + q->block))
            return true;
    return false;
}

bool pm__copy_holds(const pm__copy_t *c, uint64_t version, const pm__sub_t *q)
{
    if (c->version == version)
        return pm__copy_covers(&c->valid, q) && !pm__copy_touches(&c->writing, q);
    return c->version + 1 == version && pm__copy_covers(&c->pending, q);
}

pm__copy_t *pm__copies_find(const pm__copy_t *self, uint64_t handle, uint64_t bytes, uint64_t version,
                            const pm__sub_t *q, bool (*accept)(pm__copy_t *c, void *arg), void *arg)
{
    for (pm__copy_t *c = listed; c != NULL; c = c->next) {
        if (c == self || c->place == PM__PLACE_HOST || c->handle != handle || c->bytes != bytes)
            continue;
        if (pm__copy_holds(c, version, q) && (accept == NULL || accept(c, arg)))
            return c;
    }
    return NULL;
}

void pm__copy_free(pm__copy_t *c)
{
    pm__acc_free(&c->valid);
    pm__acc_free(&c->writing);
    pm__acc_free(&c->pending);
}
