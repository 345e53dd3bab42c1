/*
 * Inside the transport: what comm.c (the comm thread, control messages) and
 * bulk.c (payloads) share. Nothing else includes this header.
 */
#ifndef PMLIB_COMM_TRANSPORT_H
#define PMLIB_COMM_TRANSPORT_H

#include <mpi.h>

#include "comm/comm.h"

/* One send: a control message, or one fragment of a payload. */
typedef struct pm__out {
    struct pm__out *next;
    int dest, tag;
    bool on_bulk;          /* on the payload communicator */
    void *owned;           /* freed once sent */
    const void *addr;      /* contiguous bytes to send ... */
    uint64_t count;
    struct pm__bulk_out *bo; /* ... or fragment `frag` of this payload's segments */
    uint32_t frag;
    MPI_Datatype type;     /* built on the comm thread */
    MPI_Request req;
} pm__out_t;

/* Payloads travel on their own communicator so that probes for control
 * messages never see them. */
extern MPI_Comm pm__bulk_comm;

/* Queues sends in order (thread-safe) and wakes the comm thread. */
void pm__tx_queue(pm__out_t *first, pm__out_t *last);
/* A control message as a send (takes the buffer). */
pm__out_t *pm__tx_control(int dest, int tag, pm__wbuf_t *b);

/* bulk.c, on the comm thread */
int pm__bulk_start(void);
/* Host 0 measures the link to every host once (collective, before the comm
 * thread starts). */
void pm__bulk_probe(void);
void pm__bulk_stop(void);
/* Whether the hosts share memories in place (shm.c; collective, start-up). */
void pm__shm_probe(void);
/* Prepares a fragment's address, count and datatype before MPI_Isend. */
void pm__bulk_frag_prepare(pm__out_t *o);
/* A fragment (or a header of a payload) has been sent. */
void pm__bulk_frag_sent(pm__out_t *o);
/* Splits a payload's trailer off a received message: r->bulk, r->n. */
int pm__bulk_take_trailer(pm__rbuf_t *r, int src);
/* After the handler: drops a payload nobody claimed. */
void pm__bulk_after_handler(pm__rbuf_t *r);
/* Progresses payloads being received; returns how many steps it made. */
int pm__bulk_progress(void);
/* Whether payloads are in flight or waiting to be compressed. */
bool pm__bulk_busy(void);

#endif /* PMLIB_COMM_TRANSPORT_H */
