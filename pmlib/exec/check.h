/*
 * PMLIB_CHECK=1: a subtask runs on a view of each task memory in which only
 * its subscribed bytes are real; every other byte holds PM_CHECK_POISON.
 * After the callback, a byte outside the subscriptions that is no longer
 * poison, or a byte subscribed for reading only that changed, fails the
 * task naming the subtask, the memory and the bytes. The CPU stub uses it
 * on every host.
 */
#ifndef PMLIB_EXEC_CHECK_H
#define PMLIB_EXEC_CHECK_H

#include "exec/subs.h"

/* One stub's views, kept between subtasks: each view is all poison
 * between subtasks, so only the subscribed bytes are copied in and out. */
typedef struct pm__check pm__check_t;

pm__check_t *pm__check_new(void);
void pm__check_free(pm__check_t *c);
/* Points info->mem[m] of each memory at its view, after copying in the
 * subscribed bytes from where info->mem[m] pointed (natural view). */
int pm__check_enter(pm__check_t *c, const pm__task_t *t, pm__subs_view_t v,
                    pm_subtask_info_t *info);
/* Checks the views, copies the written bytes back and puts info->mem[]
 * back. A stray write fails the task (PM_ESTRAY, or PM_EACCESS for bytes
 * subscribed for reading only) and is returned. */
int pm__check_leave(pm__check_t *c, pm__task_t *t, pm__subs_view_t v,
                    pm_subtask_info_t *info);

/*
 * Running a chunk's subtasks one by one on this thread over host memory
 * (the CPU stub's way): private outputs for reduced memories, the views of
 * the checking mode when it is on, the chunk's accumulators pushed up the
 * merge tree. `call` runs one subtask: the cpu callback, or (GPU stubs in
 * checking mode) the cuda callback over device copies of the views; it
 * returns the callback's nonzero value, or PM__CALL_FAILED when it has
 * failed the subtask itself.
 */
#define PM__CALL_FAILED INT32_MIN

/* A chunk run on private copies of the bytes it touches (exec/guard.c), so
 * that of it and a copy of it, the one that finishes first wins and the
 * other changes nothing: its outputs, reduce partials, failures and
 * redistributed pieces are kept here until it wins. */
typedef struct pm__guard {
    unsigned char *buf[PM_MAX_TASK_MEMORIES]; /* bytes [lo[m], hi[m]) of memory m */
    size_t cap[PM_MAX_TASK_MEMORIES];
    uint64_t lo[PM_MAX_TASK_MEMORIES], hi[PM_MAX_TASK_MEMORIES];
    size_t bytes[PM_MAX_TASK_MEMORIES]; /* the memories' sizes */
    bool on[PM_MAX_TASK_MEMORIES];
    pm__accset_t *acc; /* the chunk's reduce partials */
    uint64_t subtasks;
    int status; /* the lowest failing subtask's */
    uint64_t failed_id;
    char what[160];
} pm__guard_t;

/* A piece pm_redistribute made in a guarded chunk. */
struct pm__guard_piece {
    uint64_t key, id;
    unsigned char *data;
    size_t bytes;
};

typedef struct pm__host_run {
    unsigned char *scratch[PM_MAX_TASK_MEMORIES]; /* private reduce outputs */
    size_t cap[PM_MAX_TASK_MEMORIES];
    pm__check_t *check; /* PMLIB_CHECK: made at the first subtask */
    pm__guard_t guard;
    bool guarded; /* the chunk being run is (guard holds its bytes) */
    int suspect;  /* chunks left to guard since this stub was slow (exec/guard.c) */
    int lost;     /* the same since it lost a chunk to a copy, however short */
    struct pm__guard_piece *pieces; /* pm_redistribute's while guarded */
    size_t npieces, cap_pieces;
} pm__host_run_t;

typedef int (*pm__host_call_fn)(pm__stub_t *s, pm__task_t *t, pm_subtask_info_t *info);

void pm__host_run_chunk(pm__host_run_t *hr, pm__stub_t *s, pm__task_t *t, uint64_t chunk,
                        pm__host_call_fn call);
void pm__host_run_free(pm__host_run_t *hr);
/* Fails subtask `id` of t, run by stub s, saying `what` happened; in a
 * guarded chunk (hr->guarded) only records it for the winner to apply. */
void pm__host_run_fail(pm__host_run_t *hr, const pm__stub_t *s, pm__task_t *t, uint64_t id,
                       int status, const char *what);
/* What a failed merge of reduce output says, by its status. */
const char *pm__merge_failure(int rc);

/* Reads PMLIB_CHECK: in pm_init, after the stubs started. */
void pm__check_init(void);

#endif /* PMLIB_EXEC_CHECK_H */
