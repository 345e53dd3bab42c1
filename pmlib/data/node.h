/*
 * Copies on the GPUs of the other hosts of this machine. When every host
 * runs on one machine (comm/shm.c), the GPUs of all of them say, in a
 * table every host maps, which ranges of which memory their mirrors hold
 * and at which version: a GPU that lacks a range another process's GPU
 * holds copies it from that GPU directly (CUDA IPC, exec/cuda_node.c)
 * instead of from host memory. Each GPU owns a row of the table and is the
 * only writer of its row's records; readers in other processes read a
 * record under its sequence number and count themselves in it while they
 * copy, so that the owner never drops a mirror being read.
 *
 * What a record may say: only ranges its GPU wrote and sent home in the
 * task that made `version` (they stay as they are until a later task
 * writes the memory, which waits for every task reading this version), so
 * a reader needs no event of the owner's. Readers take from it only for
 * tasks that read the memory without writing it. This layer knows nothing
 * of CUDA: the handle of a mirror is 64 opaque bytes.
 */
#ifndef PMLIB_DATA_NODE_H
#define PMLIB_DATA_NODE_H

#include "core/internal.h"
#include "reduce/acc.h"

enum { PM__NODE_IPC = 64, PM__NODE_DEV = 16, PM__NODE_ROWS = 8 /* GPUs of the machine that publish */ };

/* A range held by a record of another process, counted as being read
 * until pm__node_drop. */
typedef struct pm__node_hold {
    int row, rec;
    uint64_t gen;                        /* the mirror's allocation */
    unsigned char ipc[PM__NODE_IPC];     /* its handle */
    unsigned char dev[PM__NODE_DEV];     /* its GPU */
} pm__node_hold_t;

/* Whether the table exists (memories are shared on this machine). */
bool pm__node_on(void);
/* Claims the row of GPU `dev` of this process: its index, or -1 (no table,
 * or every row taken). pm__node_leave gives it back. */
int pm__node_join(const unsigned char dev[PM__NODE_DEV]);
void pm__node_leave(int row);
/* The owner: says that its mirror `gen` (handle ipc) of memory `handle`
 * holds `ranges` (NULL: none) at `version`, in record *rec (-1: takes a
 * free one; stays -1 when the row is full). 0, or -1 when not published. */
int pm__node_publish(int row, int *rec, uint64_t handle, uint64_t gen,
                     const unsigned char ipc[PM__NODE_IPC], uint64_t version,
                     const pm__acc_t *ranges);
/* The owner, before its mirror goes: takes the record back. With `wait`,
 * waits for readers in flight (bounded); without, returns false and keeps
 * the record when any reads it. */
bool pm__node_withdraw(int row, int rec, bool wait);
/* Whether readers of other processes are copying from the record now. */
bool pm__node_read_now(int row, int rec);
/* A reader: a record of another process holding every row of part q of
 * memory `handle` at `version`; true with *h filled and counted as read. */
bool pm__node_take(int self_row, uint64_t handle, uint64_t version, const pm__sub_t *q,
                   pm__node_hold_t *h);
void pm__node_drop(const pm__node_hold_t *h);
/* A reader ahead of need: a record of another process whose mirror
 * seen(ctx, row, gen) says is not opened yet, filled into *h and counted
 * as read like pm__node_take's (pm__node_drop). */
bool pm__node_take_unseen(int self_row, bool (*seen)(void *ctx, int row, uint64_t gen), void *ctx,
                          pm__node_hold_t *h);
/* How many mirrors the machine's GPUs have published (a new one, or a
 * record that names another): nothing to look for while it stays. */
uint64_t pm__node_news(void);
/* Whether row's record still publishes the mirror `gen`. */
bool pm__node_current(int row, int rec, uint64_t gen);

/* Tests: the table on memory of the caller's (NULL: the machine's), and
 * the process the next calls act as (0: this one). */
void pm__node_use_table(void *table);
void pm__node_as_process(int pid);

#endif /* PMLIB_DATA_NODE_H */
