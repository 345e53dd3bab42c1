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
    PM__TAG_ABORT,        /* 0 -> all: a host died; exit nonzero now (reason) */
    PM__TAG_COPY_REQ,     /* host -> host: a running chunk I may run too? */
    PM__TAG_COPY_REPLY,   /* host -> host: a chunk id, or none */
    PM__TAG_PING,         /* free for tools and benchmarks (pm__comm_handle) */
    PM__TAG_PONG,
    PM__TAG_LAST
};

/* Queues a message; takes the buffer. Thread-safe; never blocks on MPI. */
void pm__comm_send(int dest, int tag, pm__wbuf_t *msg);

/*
 * Payloads. A message may carry a payload: a byte stream sent straight from
 * the sender's memory and received straight into the receiver's, in
 * fragments under 2 GiB, beside the control message and never through a
 * message buffer. Each side names its bytes as segments; the two lists may
 * differ in shape but not in total length. With compression the sender
 * deflates fragments on a codec thread while earlier ones are on the wire.
 */
typedef struct pm__seg {
    void *p;
    uint64_t n;
} pm__seg_t;

enum { PM__BULK_ZLIB = 1, PM__BULK_ZLIB_AUTO = 2 };

/* Runs on the comm thread when a payload has left or landed: status 0 or
 * a PM_E* code; raw bytes and bytes on the wire. */
typedef void (*pm__bulk_done_fn)(void *arg, int status, uint64_t raw, uint64_t wire);

/* Queues a message (takes hdr) with a payload of the segments' bytes,
 * which must stay unchanged until done runs (done may be NULL; for a small
 * payload, copied into the message, it runs before this returns). */
void pm__comm_send_bulk(int dest, int tag, pm__wbuf_t *hdr, const pm__seg_t *segs, int nseg,
                        unsigned flags, pm__bulk_done_fn done, void *arg);
/* In a handler: the payload's length, 0 when the message has none. */
uint64_t pm__comm_bulk_bytes(const pm__rbuf_t *m);
/* In a handler: receives the payload into the segments (their total must be
 * pm__comm_bulk_bytes(m), else done gets PM_EINVAL); done runs once it
 * has landed. A payload not claimed by its handler is dropped. */
void pm__comm_recv_bulk(pm__rbuf_t *m, const pm__seg_t *segs, int nseg, pm__bulk_done_fn done,
                        void *arg);

/* The comm thread never sleeps while replies are awaited (expect) or a task
 * spanning hosts runs here (active); counters, thread-safe. */
void pm__comm_expect(int delta);
void pm__comm_active(int delta);

/* Handlers, run on the comm thread. */
typedef void (*pm__handler_fn)(int src, pm__rbuf_t *msg);
/* Sets the handler of a tag (the table starts with those below). */
void pm__comm_handle(int tag, pm__handler_fn fn);
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
struct pm__holders;
/* Other hosts: the mirror of a memory at `version`, holding valid what
 * host 0's directory `away` says this host holds; `away` also says which
 * host to ask for what it lacks. */
pm__memory_t *pm__data_mirror(uint64_t handle, size_t bytes, uint64_t version,
                              const struct pm__holders *away);
/* Host 0 writes a memory's directory into a task message; other hosts read
 * it (checked against the memory's size and the hosts). */
void pm__data_put_away(pm__wbuf_t *b, pm__memory_t *m);
int pm__data_get_away(pm__rbuf_t *m, uint64_t bytes, struct pm__holders *away);
void pm__data_free_mirrors(void);
/* Host 0: forgets which hosts asked for ranges of a released memory
 * (handle) or of every memory (0, at pm_finalize). */
void pm__data_relay_forget(uint64_t handle);
/* Host 0 appends to a task message for host h the inputs of h's share when
 * they are small; host h reads them into its mirrors (after the task's
 * memories are set up), so its chunks need not ask for them. */
void pm__data_put_push(pm__wbuf_t *b, const pm__task_t *t, int h);
int pm__data_take_push(pm__rbuf_t *m, pm__task_t *t);
/* Starts fetching a chunk's missing inputs (NULL: nothing to fetch). */
int pm__data_prefetch(pm__task_t *t, uint64_t chunk, pm__fetch_t **f);
/* Waits for a started fetch (or none), then fetches what is still missing. */
int pm__data_fetch(pm__task_t *t, uint64_t chunk, pm__fetch_t *started);
/* Remote: appends the chunk's written ranges to b; *segs are their bytes in
 * the mirrors (caller frees the array); returns the payload's flags. */
int pm__data_put_writes(pm__wbuf_t *b, pm__task_t *t, uint64_t chunk, pm__seg_t **segs, int *nseg);
/* Host 0: reads a chunk's written ranges; returns where their bytes go in
 * the memories (NULL when they cannot be taken: the task has failed). */
pm__seg_t *pm__data_get_writes(pm__rbuf_t *m, pm__task_t *t, int src, int *nseg);
/* Counts a payload this host received from host src for task t. */
void pm__data_count(pm__task_t *t, int src, uint64_t raw, uint64_t wire);
void pm__data_put_accset(pm__wbuf_t *b, pm__task_t *t, const struct pm__accset *acc);
struct pm__accset *pm__data_get_accset(pm__rbuf_t *m, pm__task_t *t, int src);

#endif /* PMLIB_COMM_COMM_H */
