/*
 * The fixed merge tree of a task's reduced memories: chunk outputs merge in
 * an order fixed by chunk and host ids, not by arrival, so a repeated run
 * gives the same bits for the same device mix (design-notes.md).
 */
#ifndef PMLIB_REDUCE_TREE_H
#define PMLIB_REDUCE_TREE_H

#include "core/internal.h"

struct pm__accset;
int pm__reduce_tree_create(pm__task_t *t);
/* Hands a finished subtree (level 0: one chunk) to the fixed merge tree. */
int pm__reduce_tree_push(pm__task_t *t, int level, uint64_t index, struct pm__accset *acc);
/* Calls fn for each finished subtree still waiting for its sibling (the
 * partial results a remote host sends to host 0) and takes them. */
int pm__reduce_tree_partials(pm__task_t *t, void (*fn)(void *ctx, int level, uint64_t index,
                                                        struct pm__accset *acc), void *ctx);
/* Writes the merged result into the memories. */
int pm__reduce_tree_apply(pm__task_t *t);
void pm__reduce_tree_free(pm__task_t *t);

#endif /* PMLIB_REDUCE_TREE_H */
