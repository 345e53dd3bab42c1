/*
 * The fixed merge tree of a task's reduced outputs. Chunk k's outputs are a
 * leaf; a node merges its left child (lower subtask ids) with its right
 * child as soon as both exist, on whichever stub finishes second. The shape
 * depends only on the chunk count, so the result does not depend on which
 * stub ran what: repeated runs give identical bits.
 */
#include <stdlib.h>
#include <string.h>

#include "reduce/acc.h"
#include "reduce/tree.h"

typedef struct pm__tree_node {
    atomic_int arrived;
    pm__accset_t *side[2];
} pm__tree_node_t;

struct pm__reduce_tree {
    int levels;            /* width[levels - 1] == 1 */
    uint64_t *width;       /* nodes per level, level 0 = chunks */
    pm__tree_node_t **node; /* node[l] for l >= 1 */
    pm__accset_t *root;
};

int pm__reduce_tree_create(pm__task_t *t)
{
    struct pm__reduce_tree *tr = calloc(1, sizeof *tr);
    if (tr == NULL)
        return PM_ENOMEM;
    int levels = 1;
    for (uint64_t w = t->nchunks; w > 1; w = (w + 1) / 2)
        levels++;
    tr->levels = levels;
    tr->width = calloc((size_t)levels, sizeof *tr->width);
    tr->node = calloc((size_t)levels, sizeof *tr->node);
    if (tr->width == NULL || tr->node == NULL)
        goto fail;
    tr->width[0] = t->nchunks;
    for (int l = 1; l < levels; l++) {
        tr->width[l] = (tr->width[l - 1] + 1) / 2;
        tr->node[l] = calloc(tr->width[l], sizeof **tr->node);
        if (tr->node[l] == NULL)
            goto fail;
    }
    t->tree = tr;
    return 0;
fail:
    t->tree = tr;
    pm__reduce_tree_free(t);
    return PM_ENOMEM;
}

static int merge_sets(pm__task_t *t, pm__accset_t *left, const pm__accset_t *right)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        if (t->desc.mem[m].reduce == PM_REDUCE_NONE)
            continue;
        int rc = pm__acc_merge(t, m, &left->acc[m], &right->acc[m]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int pm__reduce_tree_push(pm__task_t *t, int level, uint64_t index, pm__accset_t *acc)
{
    struct pm__reduce_tree *tr = t->tree;
    uint64_t i = index;
    int rc = 0;
    if (level < 0 || level >= tr->levels || index >= tr->width[level]) {
        pm__accset_free(t, acc);
        return PM_EINTERNAL;
    }
    for (int l = level;; l++) {
        if (tr->width[l] == 1) {
            tr->root = acc;
            return rc;
        }
        if ((i ^ 1) >= tr->width[l]) { /* no sibling: move up alone */
            i >>= 1;
            continue;
        }
        pm__tree_node_t *n = &tr->node[l + 1][i >> 1];
        n->side[i & 1] = acc;
        if (atomic_fetch_add_explicit(&n->arrived, 1, memory_order_acq_rel) == 0)
            return rc; /* the sibling will carry on */
        int mrc = merge_sets(t, n->side[0], n->side[1]);
        if (mrc != 0 && rc == 0)
            rc = mrc;
        pm__accset_free(t, n->side[1]);
        acc = n->side[0];
        n->side[0] = n->side[1] = NULL;
        i >>= 1;
    }
}

int pm__reduce_tree_partials(pm__task_t *t, void (*fn)(void *ctx, int level, uint64_t index,
                                                        pm__accset_t *acc), void *ctx)
{
    struct pm__reduce_tree *tr = t->tree;
    if (tr == NULL)
        return 0;
    int n = 0;
    for (int l = 1; l < tr->levels; l++) {
        for (uint64_t i = 0; i < tr->width[l]; i++) {
            pm__tree_node_t *nd = &tr->node[l][i];
            if (atomic_load(&nd->arrived) != 1)
                continue;
            int side = nd->side[0] != NULL ? 0 : 1;
            fn(ctx, l - 1, 2 * i + (uint64_t)side, nd->side[side]);
            nd->side[side] = NULL;
            atomic_store(&nd->arrived, 0);
            n++;
        }
    }
    if (tr->root != NULL) {
        fn(ctx, tr->levels - 1, 0, tr->root);
        tr->root = NULL;
        n++;
    }
    return n;
}

int pm__reduce_tree_apply(pm__task_t *t)
{
    pm__accset_t *root = t->tree ? t->tree->root : NULL;
    if (root == NULL)
        return 0;
    for (int m = 0; m < t->desc.nmem; m++) {
        const pm__acc_t *a = &root->acc[m];
        unsigned char *dst = t->mems[m]->data;
        if (t->desc.mem[m].reduce == PM_REDUCE_NONE)
            continue;
        for (uint32_t k = 0; k < a->ncov; k++) {
            memcpy(dst + a->cov[k].lo, a->data + (a->cov[k].lo - a->lo),
                   a->cov[k].hi - a->cov[k].lo);
            if (t->mems[m]->place != NULL) /* host 0 holds these bytes now */
                pm__hooks.wrote_home(t->mems[m], a->cov[k].lo, a->cov[k].hi);
        }
    }
    return 0;
}

void pm__reduce_tree_free(pm__task_t *t)
{
    struct pm__reduce_tree *tr = t->tree;
    if (tr == NULL)
        return;
    for (int l = 1; l < tr->levels && tr->node; l++) {
        if (tr->node[l] == NULL)
            continue;
        for (uint64_t i = 0; i < tr->width[l]; i++) {
            pm__accset_free(t, tr->node[l][i].side[0]);
            pm__accset_free(t, tr->node[l][i].side[1]);
        }
        free(tr->node[l]);
    }
    pm__accset_free(t, tr->root);
    free(tr->node);
    free(tr->width);
    free(tr);
    t->tree = NULL;
}
