/*
 * Straggler copies on one host: a CPU chunk that may straggle runs on
 * private copies of the bytes it touches (guarded), so that a CPU stub
 * with nothing left to do may run a copy of it; whichever finishes first
 * writes its outputs back and counts the chunk, and the other's work is
 * dropped. The loser may still be running when the task ends: it touches
 * only its private bytes and the task's block, which it holds.
 */
#ifndef PMLIB_EXEC_GUARD_H
#define PMLIB_EXEC_GUARD_H

#include "exec/check.h"

/* Outcome of a guarded chunk. */
enum pm__guard_end {
    PM__GUARD_WON,  /* its outputs are in place; count the chunk as usual */
    PM__GUARD_LOST, /* a copy won and counted it: do not touch the task's
                     * state again, but drop the hold (pm__task_unhold) */
    PM__GUARD_NONE  /* not guarded after all: run it in place */
};

/* Whether CPU stub s runs chunk k of t guarded. */
bool pm__guard_wanted(pm__stub_t *s, const pm__task_t *t, uint64_t k);
/* Runs chunk k guarded on CPU stub s (see enum pm__guard_end). */
enum pm__guard_end pm__guard_run(pm__stub_t *s, pm__task_t *t, uint64_t k);
/* A CPU stub with nothing to do: runs a copy of a chunk another stub has
 * run for long enough, if there is one (true). Else *wait_ns is how long
 * until one may become due (0: none runs guarded). */
bool pm__guard_copy(pm__stub_t *s, uint64_t *wait_ns);
/* Whether any stub runs a guarded chunk (a hint, read without locks). */
bool pm__guard_any(void);
/* A stub ran a chunk far slower than the task's fastest: its next chunks
 * run guarded for a while (as after it lost one to a copy). */
void pm__guard_note_slow(pm__stub_t *s);
/* Frees a stub's guard buffers and pieces. */
void pm__guard_free(pm__host_run_t *p);

/* pm_redistribute in a guarded chunk: the piece waits for the outcome
 * (true: kept). */
bool pm__guard_keep_piece(pm__task_t *t, uint64_t key, uint64_t id, unsigned char *data,
                          size_t bytes);

#endif /* PMLIB_EXEC_GUARD_H */
