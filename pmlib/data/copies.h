/*
 * The copies of memories on this host: every place that keeps bytes of a
 * memory (this host's mirror of it, each GPU's mirror) keeps them as a
 * copy, and one set of rules says what each copy holds. Per copy, at a version of
 * its memory: the ranges valid there, the ranges its own subtasks are
 * writing in the running task, and, of those, the ranges already sent home,
 * which are valid at the next version. A task that writes the memory makes
 * a new version: a copy moving to it keeps only what it wrote and sent home
 * (pm__copy_sync), so a write invalidates every other copy. The GPU
 * mirrors' copies are listed in a directory, where a GPU that lacks a range
 * finds the nearest copy holding it, another GPU's, before it turns to the
 * host's memory. A host mirror's copy is found by its own host's paths
 * through the mirror (data.c), under the mirror's lock, and is not listed.
 * Between hosts, host 0's map of which host holds which range (dir.h)
 * plays the same part.
 *
 * One lock (pm__copies_lock) guards the list and the fields of every
 * listed copy: the owner changes them only under it and reads its own
 * without it.
 */
#ifndef PMLIB_DATA_COPIES_H
#define PMLIB_DATA_COPIES_H

#include "reduce/acc.h"

enum { PM__PLACE_HOST = -1 }; /* else a GPU's ordinal */

typedef struct pm__copy {
    uint64_t handle, bytes; /* of the memory */
    uint64_t version;       /* what `valid` describes */
    pm__acc_t valid;        /* bytes equal to the memory's at `version` */
    pm__acc_t writing;      /* bytes its subtasks write in the running task */
    pm__acc_t pending;      /* of those, the ones home: valid at version + 1 */
    int place;
    int readers;            /* other places copying from it now: it stays */
    struct pm__copy *next;
} pm__copy_t;

void pm__copies_lock(void);
void pm__copies_unlock(void);
/* Lists a copy in the directory (once), or takes it off if listed (lock
 * held). */
void pm__copies_add(pm__copy_t *c);
void pm__copies_remove(pm__copy_t *c);
/* Brings a copy up to its memory's `version` (lock held for a listed
 * copy): what it wrote and sent home in the task that made that version
 * stays valid; anything else may have changed. */
void pm__copy_sync(pm__copy_t *c, uint64_t version);
/* Adds or takes out every row of part q (0 or PM_ENOMEM). */
int pm__copy_mark(pm__acc_t *a, const pm__sub_t *q, bool add);
/* Whether every row of part q lies in a; whether any row touches it. */
bool pm__copy_covers(const pm__acc_t *a, const pm__sub_t *q);
bool pm__copy_touches(const pm__acc_t *a, const pm__sub_t *q);
/* Whether c holds all of part q at `version`: valid there and not being
 * written, or written by the task that made `version` and already home. */
bool pm__copy_holds(const pm__copy_t *c, uint64_t version, const pm__sub_t *q);
/* A listed copy of the memory (handle, bytes) other than `self` and not a
 * host's that holds all of part q at `version` and that accept(c, arg)
 * takes (NULL: any), or NULL (lock held). */
pm__copy_t *pm__copies_find(const pm__copy_t *self, uint64_t handle, uint64_t bytes, uint64_t version,
                            const pm__sub_t *q, bool (*accept)(pm__copy_t *c, void *arg), void *arg);
/* Frees what a copy holds (not the copy; it must not be listed). */
void pm__copy_free(pm__copy_t *c);

#endif /* PMLIB_DATA_COPIES_H */
