/*
 * Per-stub ranges of chunk indices. A stub takes chunks from the front of
 * its own range; a thief takes the back half of the largest other range.
 */
#ifndef PMLIB_SCHED_RANGES_H
#define PMLIB_SCHED_RANGES_H

#include "core/internal.h"

/* One cache line per stub so that stubs do not slow each other down. */
typedef struct pm__range_slot {
    _Alignas(64) pm__lock_t lock;
    atomic_uint_fast64_t lo, hi; /* written under lock, read freely to pick victims */
    /* The task's gen once written for it (sched/ranges.c, lock_slot): in a
     * reused block an older gen reads as an empty range. */
    atomic_uint_fast64_t gen;
} pm__range_slot_t;

/* Fields every take reads come first, on lines of their own; each field
 * that takes or chunk ends write has a line to itself. With 16 stubs
 * starting a task's chunks at once, a shared line written by each take
 * made every take after it wait (a poked stub's take cost 1.2 to 1.6 us,
 * the sixteenth chunk of a timestep started 10 us after the first). */
struct pm__sched_state {
    int nstubs;
    uint64_t gen; /* the task's (pm__task_t.gen) */
    pm__range_slot_t *slot;
    /* Ranges from other hosts that found no idle stub to hold them: the
     * next stub whose own range runs out takes one. */
    pm__lock_t spare_lock;
    uint64_t (*spare)[2]; /* spare_room until more than one */
    int nspare, capspare;
    uint64_t spare_room[1][2];
    atomic_uint_fast64_t spare_chunks;
    /* pull: stubs whose last take found nothing (they may be asleep; a
     * line of their own after this struct), the stub of a held-back device
     * that probes one chunk (-1: none), and whether the task writes memory
     * in place (not through a reduce). */
    atomic_uchar *left;
    atomic_int probe;
    bool in_place;
    bool cpu_only;      /* only CPU stubs may run it */
    bool one_device;    /* and the model counts them as one device */
    double model_least; /* the model's shortest time per chunk of those stubs (0: none) */
    /* Bit s: slot s may hold chunks of this task (set before a slot is
     * given some; slots from PM__USED_BITS on are not tracked). A thief
     * looks only at these: every other slot's line is of an older task,
     * out of its cache (31 stubs: a steal read 30 such lines). */
    atomic_uint_fast64_t used;
    /* Chunks in the slots and spares: raised before chunks are added and
     * lowered after they are taken, so never below the true count, and
     * read without looking at every slot. */
    _Alignas(64) atomic_uint_fast64_t nleft;
    /* pull: the shortest time per chunk any stub has averaged in this task
     * (UINT64_MAX: none yet); it only falls. */
    _Alignas(64) atomic_uint_fast64_t min_chunk_ns;
};

/* Bytes of a task's scheduling state for nstubs stubs (the task keeps
 * them in its own block, 64-byte aligned). */
size_t pm__ranges_space(int nstubs);
/* Splits this host's share [t->lo, t->hi) of the chunks in contiguous
 * shares proportional to weight[] (0 = none; NULL: no stub gets one). */
int pm__ranges_init(pm__task_t *t, int nstubs, const double *weight);
/* The same with equal weights for the stubs that may run the task. */
int pm__ranges_init_equal(pm__task_t *t, int nstubs);
/* The same, with the whole share in one spare range: the first stub that
 * comes takes it all (a task worth one stub's time: none steals). */
int pm__ranges_init_pooled(pm__task_t *t, int nstubs);
bool pm__ranges_take_own(pm__task_t *t, int stub, uint64_t *chunk);
bool pm__ranges_steal(pm__task_t *t, int stub, uint64_t *chunk);
/* After the stub took chunk `next - 1`: up to `max` more chunks from the
 * front of its own range when that front is `next` (they follow the one
 * it took); returns how many. */
uint64_t pm__ranges_extend(pm__task_t *t, int stub, uint64_t next, uint64_t max);
/* Gives chunks [lo, hi) the stub took by pm__ranges_extend back to the
 * front of its range; false (they stay taken) if the range moved since. */
bool pm__ranges_untake(pm__task_t *t, int stub, uint64_t lo, uint64_t hi);
void pm__ranges_fini(pm__task_t *t);
/* Chunks still queued on this host (a snapshot). */
uint64_t pm__ranges_left(const pm__task_t *t);
/* For another host: takes the back of this host's largest range, at most
 * `max` chunks (UINT64_MAX: half of it; a lone chunk only if `lone`,
 * else it stays). */
bool pm__ranges_give(pm__task_t *t, uint64_t max, bool lone, uint64_t *lo, uint64_t *hi);
/* Installs a range received from another host on an idle eligible stub,
 * else keeps it spare for the next stub that runs out. */
void pm__ranges_install(pm__task_t *t, uint64_t lo, uint64_t hi);
/* Weights of this host's stubs that may run the task: 1 per eligible stub. */
int pm__ranges_equal_weights(const pm__task_t *t, int nstubs, double *weight);

#endif /* PMLIB_SCHED_RANGES_H */
