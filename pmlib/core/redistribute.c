/*
 * Redistribution: subtasks emit variable-length pieces with an order key;
 * host 0 sorts all of them (key, then subtask id, then emission order) into
 * one new memory when the task completes.
 */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

int pm__task_add_piece(pm__task_t *t, uint64_t key, uint64_t id, unsigned char *data, size_t bytes)
{
    int rc = 0;
    pm__lock(&t->redist_lock);
    if (t->npieces == t->cap_pieces) {
        size_t cap = t->cap_pieces ? t->cap_pieces * 2 : 64;
        pm__piece_t *n = realloc(t->pieces, cap * sizeof *n);
        if (n == NULL) {
            rc = PM_ENOMEM;
            goto out;
        }
        t->pieces = n;
        t->cap_pieces = cap;
    }
    t->pieces[t->npieces++] = (pm__piece_t){
        .key = key, .id = id, .seq = atomic_fetch_add(&t->piece_seq, 1), .bytes = bytes, .data = data};
out:
    pm__unlock(&t->redist_lock);
    return rc;
}

int pm_redistribute(const pm_subtask_info_t *info, uint64_t key, const void *data, size_t bytes)
{
    if (info == NULL || info->internal == NULL)
        return PM__FAIL(PM_EINVAL, "pm_redistribute: pass the info your cpu callback received");
    if (bytes > 0 && data == NULL)
        return PM__FAIL(PM_EINVAL, "pm_redistribute: data is NULL but bytes is %zu", bytes);
    pm__task_t *t = info->internal;
    unsigned char *copy = malloc(bytes ? bytes : 1);
    if (copy == NULL)
        return PM__FAIL(PM_ENOMEM, "pm_redistribute: cannot copy %zu bytes", bytes);
    if (bytes > 0)
        memcpy(copy, data, bytes);
    if (pm__hooks.keep_piece(t, key, info->id, copy, bytes))
        return 0; /* a guarded chunk's: kept if it wins */
    int rc = pm__task_add_piece(t, key, info->id, copy, bytes);
    if (rc != 0) {
        free(copy);
        return PM__FAIL(rc, "pm_redistribute: out of memory");
    }
    return 0;
}

static int by_key(const void *a, const void *b)
{
    const pm__piece_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void pm__task_gather_pieces(pm__task_t *t)
{
    if (t->npieces == 0 || t->status != 0)
        return;
    qsort(t->pieces, t->npieces, sizeof *t->pieces, by_key);
    size_t total = 0;
    for (size_t i = 0; i < t->npieces; i++)
        total += t->pieces[i].bytes;
    pm_memory_t m;
    if (total == 0 || pm_memory_create(total, &m) != 0)
        return;
    unsigned char *dst = pm_memory_data(m);
    for (size_t i = 0; i < t->npieces; i++) {
        memcpy(dst, t->pieces[i].data, t->pieces[i].bytes);
        dst += t->pieces[i].bytes;
    }
    t->redistributed = m;
}

void pm__task_free_pieces(pm__task_t *t)
{
    for (size_t i = 0; i < t->npieces; i++)
        free(t->pieces[i].data);
    free(t->pieces);
    t->pieces = NULL;
    t->npieces = t->cap_pieces = 0;
}
