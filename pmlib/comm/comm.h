/*
 * The transport: the only code that calls MPI, and it knows nothing of
 * tasks. One comm thread per host sends queued messages, moves payloads and
 * hands each received message to the handler the layers above registered
 * for its tag; stubs never block on MPI.
 */
#ifndef PMLIB_COMM_COMM_H
#define PMLIB_COMM_COMM_H

#include "comm/buf.h"
#include "core/internal.h"

/* One MPI tag per message kind: the transport's own, then those of the
 * layers above it (from PM__TAG_USER, below PM__TAG_LAST). */
enum pm__tag {
    PM__TAG_HEARTBEAT = 101, /* host <-> 0: still alive */
    PM__TAG_SHUTDOWN,        /* 0 -> all: host 0 finalized */
    PM__TAG_ABORT,           /* 0 -> all: a host died; exit nonzero now (reason) */
    PM__TAG_PING,            /* free for tools and benchmarks (pm__comm_handle) */
    PM__TAG_PONG,
    PM__TAG_USER = 112,
    PM__TAG_LAST = 144
};

/* MPI start-up: this process's host number, the number of hosts, and its
 * place among the ranks of its machine. */
int pm__comm_init(int *argc, char ***argv, int *host, int *nhosts, int *local_rank, int *local_size);
/* How many ranks of this machine, this one included, may run on this
 * rank's cores (1 when the launcher gave each rank cores of its own, or
 * without MPI); known after pm__comm_init. */
int pm__comm_core_sharers(void);
/* Exchanges the host table (pm__hosts) and starts the comm thread. */
int pm__comm_start(const pm__host_info_t *me);
/* Host 0: tells every host to finish. Others: waits until host 0 says so. */
void pm__comm_shutdown(void);
/* Stops the comm thread (what was queued has been sent); then ends MPI. */
void pm__comm_stop(void);
void pm__comm_finalize(void);
/* Payload bytes per second from `host`, as measured (0: not yet known);
 * the round trip of a short message to it measured at start-up (host 0
 * and the host itself; 0: not measured). */
double pm__comm_rate(int host);
double pm__comm_rtt(int host);
/* A stub about to run a chunk on a machine with more busy threads than
 * cores: yields its core until the comm thread has taken up the messages
 * queued so far (at most 50 us), so that a task sent to another host
 * starts there now rather than once the chunk has run (the comm thread
 * may share this core and would get it only then). */
void pm__comm_hand_over(void);
/* Where a rank has one core for its stubs (2 ranks on 2 cores): one round
 * of the comm thread's work (sends, receives and their handlers) run by
 * the calling stub while it waits, unless another thread is at it; the
 * messages that were work. Elsewhere 0 at once: the comm thread alone
 * does it. Call it holding no lock. */
int pm__comm_poll(void);
/* pm__spin_for for a `done` that calls pm__comm_poll: where that makes
 * progress and the caller runs on cores of its rank's alone (the launcher
 * bound the rank, or pmlib bound the thread within the rank's share:
 * pm__own_core), the caller does the comm thread's work and yields the
 * core to it only now and then (pm__spin_self). */
bool pm__comm_spin(bool (*done)(const void *arg), const void *arg, uint64_t ns);
/* Ranks of a machine that the launcher left unbound share out its cores,
 * rank r of n the r-th n-th: this rank's (at most max) into cores, in
 * order, and their count (0 with more ranks than cores); -1 where the
 * launcher bound the ranks, or the rank is alone on its machine. */
int pm__comm_share(int *cores, int max);
/* Ranks of a machine that the launcher left unbound: binds the calling
 * thread to this rank's share of the cores (the stubs' share) and marks
 * it pm__own_core; false where there is no share, PMLIB_BIND=0, or
 * binding fails. */
bool pm__comm_bind_share(void);
/* In a message handler: how long before the round that received the
 * message the one before it ended (0 while rounds follow each other; the
 * length of a nap otherwise): the most the message may have waited here. */
double pm__comm_round_gap(void);

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

/* Handlers, run on the comm thread (or a stub in pm__comm_poll). */
typedef void (*pm__handler_fn)(int src, pm__rbuf_t *msg);
/* Sets the handler of a tag from PM__TAG_PING up (before pm__comm_start
 * for messages that may come at once). */
void pm__comm_handle(int tag, pm__handler_fn fn);
/* Sets a function every round runs after the handlers (NULL: none). */
void pm__comm_on_round(void (*fn)(void));
/* Sets a function host 0 runs when it finds a host dead, before it ends
 * the job (NULL: none): it may say what was lost, and must not block. */
void pm__comm_on_host_lost(void (*fn)(int dead));

/*
 * Memories shared in place (comm/shm.c): when every host runs on this
 * machine and a probe at start-up found that each may map a file host 0
 * made, host 0 may keep a memory's bytes in a memory file and the other
 * hosts map it as their mirror. Host 0: pm__shm_create makes and maps one
 * (NULL when it cannot, or when memories are not shared in this job;
 * *fd then -1). Other hosts: pm__shm_map maps host 0's file fd (NULL when
 * it cannot). pm__shm_free unmaps and closes fd (-1: none).
 */
void *pm__shm_create(size_t bytes, int *fd);
void *pm__shm_map(int fd, size_t bytes);
void pm__shm_free(void *p, size_t bytes, int fd);
/* The machine's table: PM__SHM_TABLE_BYTES, zeroed at start-up, that every
 * host of this machine maps while memories are shared (NULL otherwise);
 * data/node.c keeps what the GPUs' mirrors hold there. Unmapped by
 * pm__shm_fini, after the stubs have stopped. */
enum { PM__SHM_TABLE_BYTES = 1 << 20 };
void *pm__shm_table(void);
void pm__shm_fini(void);

#endif /* PMLIB_COMM_COMM_H */
