/*
 * The task protocol between hosts (sched/proto.c): host 0 sends a running
 * task to the hosts with their shares, hosts report chunks, steal from each
 * other, drain and end. Built on the data layer and the transport.
 */
#ifndef PMLIB_SCHED_PROTO_H
#define PMLIB_SCHED_PROTO_H

#include "data/data.h"

/* Its messages (after the data layer's). */
enum {
    PM__TAG_TASK = PM__TAG_USER + 8, /* host 0 -> all: a task to run */
    PM__TAG_TASK_NACK,               /* host -> 0: cannot run it (callbacks missing) */
    PM__TAG_CHUNK_DONE,              /* host -> 0: a chunk ran: its writes and failures */
    PM__TAG_STEAL_REQ,               /* host -> host: give me chunks */
    PM__TAG_STEAL_REPLY,             /* host -> host: a range, maybe empty */
    PM__TAG_DRAINED,                 /* host -> 0: no more chunks here; reduce partials, counters */
    PM__TAG_TASK_END,                /* 0 -> all: the task finished (status, message) */
    PM__TAG_COPY_REQ,                /* host -> host: a running chunk I may run too? */
    PM__TAG_COPY_REPLY,              /* host -> host: a chunk id, or none */
};

/* Registers its handlers and task hooks (before the transport starts);
 * measures what each host costs once the transport runs; frees what it
 * kept (after the transport stopped). */
void pm__proto_init(void);
void pm__proto_start(void);
void pm__proto_fini(void);
/* Other hosts: start running the tasks host 0 sends. */
void pm__proto_serve(void);
/* No chunk here: ask other hosts (runtime lock held). */
void pm__proto_want_work_locked(pm__task_t *t);
/* Remote: subscribes a chunk and starts fetching its inputs (NULL: none to
 * fetch); before it runs, waits for them (started may be NULL); host 0
 * calls the latter too for tasks whose inputs other hosts hold. */
pm__fetch_t *pm__proto_prefetch(pm__task_t *t, uint64_t chunk);
int pm__proto_before_chunk(pm__task_t *t, uint64_t chunk, pm__fetch_t *started);
/* Remote: reports a chunk that ran `run_ns` (its callbacks, not its waits),
 * `late_ns` after the task could have started it (a nap, a stub's wake-up). */
void pm__proto_after_chunk(pm__task_t *t, uint64_t chunk, pm_device_kind_t kind, uint64_t run_ns,
                           uint64_t late_ns);

#endif /* PMLIB_SCHED_PROTO_H */
