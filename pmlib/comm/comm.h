/*
 * The comm layer: the only code that calls MPI. One comm thread per host
 * sends queued messages and dispatches received ones to the handlers of
 * proto.c and data.c; stubs never block on MPI.
 */
#ifndef PMLIB_COMM_COMM_H
#define PMLIB_COMM_COMM_H

#include "comm/buf.h"
#include "core/internal.h"

/* One MPI tag per message kind. */
enum pm__tag {
    PM__TAG_TASK = 101,   /* host 0 -> all: a task to run */
    PM__TAG_TASK_NACK,    /* host -> 0: cannot run it (callbacks missing) */
    PM__TAG_DATA_REQ,     /* host -> 0: send me these ranges */
    PM__TAG_DATA_REPLY,   /* 0 -> host: the bytes */
    PM__TAG_CHUNK_DONE,   /* host -> 0: a chunk ran: its writes and failures */
    PM__TAG_STEAL_REQ,    /* host -> host: give me chunks */
    PM__TAG_STEAL_REPLY,  /* host -> host: a range, maybe empty */
    PM__TAG_DRAINED,      /* host -> 0: no more chunks here; reduce partials, counters */
    PM__TAG_TASK_END,     /* 0 -> all: the task finished (status, message) */
    PM__TAG_MEM_RELEASE,  /* 0 -> all: drop the mirror of a memory */
    PM__TAG_HEARTBEAT,    /* host <-> 0: still alive */
    PM__TAG_SHUTDOWN,     /* 0 -> all: host 0 finalized */
    PM__TAG_COPY_REQ,     /* host -> host: a running chunk I may run too? */
    PM__TAG_COPY_REPLY,   /* host -> host: a chunk id, or none */
    PM__TAG_LAST
};

/* Queues a message; takes the buffer. Thread-safe; never blocks on MPI. */
void pm__comm_send(int dest, int tag, pm__wbuf_t *msg);

/* Handlers, run on the comm thread. */
typedef void (*pm__handler_fn)(int src, pm__rbuf_t *msg);
void pm__proto_on_task(int src, pm__rbuf_t *m);
void pm__proto_on_task_nack(int src, pm__rbuf_t *m);
void pm__proto_on_chunk_done(int src, pm__rbuf_t *m);
void pm__proto_on_steal_req(int src, pm__rbuf_t *m);
void pm__proto_on_steal_reply(int src, pm__rbuf_t *m);
void pm__proto_on_drained(int src, pm__rbuf_t *m);
void pm__proto_on_task_end(int src, pm__rbuf_t *m);
void pm__proto_on_copy_req(int src, pm__rbuf_t *m);
void pm__proto_on_copy_reply(int src, pm__rbuf_t *m);
void pm__data_on_req(int src, pm__rbuf_t *m);
void pm__data_on_reply(int src, pm__rbuf_t *m);
void pm__data_on_mem_release(int src, pm__rbuf_t *m);


/* proto.c */
void pm__proto_poll(void);
void pm__proto_free_pending(void);

/* data.c */
struct pm__accset;
pm__memory_t *pm__data_mirror(uint64_t handle, size_t bytes, uint64_t version);
void pm__data_free_mirrors(void);
int pm__data_fetch(pm__task_t *t, uint64_t chunk);
void pm__data_put_writes(pm__wbuf_t *b, pm__task_t *t, uint64_t chunk);
void pm__data_get_writes(pm__rbuf_t *m, pm__task_t *t, int src);
void pm__data_put_accset(pm__wbuf_t *b, pm__task_t *t, const struct pm__accset *acc);
struct pm__accset *pm__data_get_accset(pm__rbuf_t *m, pm__task_t *t);

#endif /* PMLIB_COMM_COMM_H */
