/* Copies on the GPUs of the other hosts of this machine (data/node.h). */
#define _GNU_SOURCE
#include "data/node.h"
#include "comm/comm.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    ROWS = PM__NODE_ROWS,
    RECS = 64,   /* mirrors a GPU publishes at once */
    RANGES = 48, /* ranges a record names; more are left out (a subset is true) */
};

/* A record's words, read and written word by word under its sequence
 * number: handle (0: free), version, gen, number of ranges, the mirror's
 * handle, then the ranges as [lo, hi) pairs. */
enum { W_HANDLE, W_VERSION, W_GEN, W_N, W_IPC, W_RANGES = W_IPC + PM__NODE_IPC / 8,
       WORDS = W_RANGES + 2 * RANGES };

typedef struct rec {
    uint64_t seq;     /* odd while the owner changes the record */
    uint64_t readers; /* copies from it in flight in other processes */
    uint64_t w[WORDS];
} rec_t;

typedef struct row {
    uint64_t pid;                       /* 0: free */
    uint64_t dev[PM__NODE_DEV / 8];
    rec_t rec[RECS];
} row_t;

typedef struct table {
    uint64_t news; /* mirrors published (pm__node_news) */
    row_t row[ROWS];
} table_t;

_Static_assert(sizeof(table_t) <= PM__SHM_TABLE_BYTES, "the machine's table is too small");

static table_t *test_table;
static int test_pid;

static table_t *table(void)
{
    return test_table != NULL ? test_table : pm__shm_table();
}

static uint64_t self(void)
{
    return test_pid != 0 ? (uint64_t)test_pid : (uint64_t)getpid();
}

void pm__node_use_table(void *t)
{
    test_table = t;
}

void pm__node_as_process(int pid)
{
    test_pid = pid;
}

bool pm__node_on(void)
{
    return table() != NULL;
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void st(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* Opaque bytes (a handle, a UUID) into and out of a record's words. */
static void st_bytes(uint64_t *w, const unsigned char *b, int n)
{
    for (int k = 0; k < n / 8; k++) {
        uint64_t x;
        memcpy(&x, b + 8 * k, 8);
        st(&w[k], x);
    }
}

static void ld_bytes(unsigned char *b, const uint64_t *w, int n)
{
    for (int k = 0; k < n / 8; k++) {
        uint64_t x = ld(&w[k]);
        memcpy(b + 8 * k, &x, 8);
    }
}

int pm__node_join(const unsigned char dev[PM__NODE_DEV])
{
    table_t *t = table();
    if (t == NULL)
        return -1;
    for (int i = 0; i < ROWS; i++) {
        uint64_t free_row = 0;
        row_t *r = &t->row[i];
        if (!__atomic_compare_exchange_n(&r->pid, &free_row, self(), false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_RELAXED))
            continue;
        st_bytes(r->dev, dev, PM__NODE_DEV);
        return i;
    }
    return -1;
}

void pm__node_leave(int row)
{
    table_t *t = table();
    if (t == NULL || row < 0)
        return;
    for (int k = 0; k < RECS; k++)
        pm__node_withdraw(row, k, true);
    __atomic_store_n(&t->row[row].pid, 0, __ATOMIC_SEQ_CST);
}

/* The owner's writes, between an odd and an even sequence number. */
static void begin(rec_t *r)
{
    __atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_SEQ_CST);
}

static void end(rec_t *r)
{
    __atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE);
}

int pm__node_publish(int row, int *rec, uint64_t handle, uint64_t gen,
                     const unsigned char ipc[PM__NODE_IPC], uint64_t version,
                     const pm__acc_t *ranges)
{
    table_t *t = table();
    if (t == NULL || row < 0)
        return -1;
    row_t *rw = &t->row[row];
    if (*rec < 0)
        for (int k = 0; k < RECS && *rec < 0; k++)
            if (ld(&rw->rec[k].w[W_HANDLE]) == 0)
                *rec = k;
    if (*rec < 0)
        return -1;
    rec_t *r = &rw->rec[*rec];
    uint32_t n = ranges != NULL ? ranges->ncov : 0;
    if (n > RANGES)
        n = RANGES;
    const bool news = ld(&r->w[W_HANDLE]) == 0 || ld(&r->w[W_GEN]) != gen;
    begin(r);
    st(&r->w[W_HANDLE], handle);
    st(&r->w[W_VERSION], version);
    st(&r->w[W_GEN], gen);
    st(&r->w[W_N], n);
    st_bytes(&r->w[W_IPC], ipc, PM__NODE_IPC);
    for (uint32_t i = 0; i < n; i++) {
        st(&r->w[W_RANGES + 2 * i], ranges->cov[i].lo);
        st(&r->w[W_RANGES + 2 * i + 1], ranges->cov[i].hi);
    }
    end(r);
    if (news)
        __atomic_add_fetch(&t->news, 1, __ATOMIC_RELEASE);
    return 0;
}

uint64_t pm__node_news(void)
{
    table_t *t = table();
    return t != NULL ? __atomic_load_n(&t->news, __ATOMIC_ACQUIRE) : 0;
}

bool pm__node_read_now(int row, int rec)
{
    table_t *t = table();
    return t != NULL && row >= 0 && rec >= 0 &&
           __atomic_load_n(&t->row[row].rec[rec].readers, __ATOMIC_SEQ_CST) != 0;
}

bool pm__node_withdraw(int row, int rec, bool wait)
{
    table_t *t = table();
    if (t == NULL || row < 0 || rec < 0)
        return true;
    rec_t *r = &t->row[row].rec[rec];
    if (ld(&r->w[W_HANDLE]) == 0)
        return true;
    begin(r); /* a reader counted after this sees the change and lets go */
    /* A reader's copy ends with its subtask; 10 s is far beyond one, and
     * means its process is gone (the job ends then anyway). */
    struct timespec nap = {0, 20000};
    for (int i = 0; wait && i < 500000 && __atomic_load_n(&r->readers, __ATOMIC_SEQ_CST) != 0; i++)
        nanosleep(&nap, NULL);
    if (!wait && __atomic_load_n(&r->readers, __ATOMIC_SEQ_CST) != 0) {
        end(r); /* unchanged, but readers that looked before take it again */
        return false;
    }
    st(&r->w[W_HANDLE], 0);
    st(&r->w[W_N], 0);
    end(r);
    return true;
}

/* Whether every row of part q lies in one of the n sorted ranges lo/hi. */
static bool covers(const uint64_t *w, uint32_t n, const pm__sub_t *q)
{
    uint32_t i = 0;
    for (uint64_t k = 0; k < q->count; k++) {
        uint64_t a = q->offset + k * q->stride, b = a + q->block;
        while (i < n && w[2 * i + 1] <= a)
            i++;
        if (i == n || w[2 * i] > a || w[2 * i + 1] < b)
            return false;
    }
    return true;
}

/* Copies record r into out[] when it is stable and names `handle` at
 * `version`; returns its sequence number, or 0. */
static uint64_t snapshot(rec_t *r, uint64_t handle, uint64_t version, uint64_t *out)
{
    uint64_t s = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
    if ((s & 1) || ld(&r->w[W_HANDLE]) != handle || ld(&r->w[W_VERSION]) != version)
        return 0;
    uint64_t n = ld(&r->w[W_N]);
    if (n > RANGES)
        return 0;
    for (uint64_t k = 0; k < W_RANGES + 2 * n; k++)
        out[k] = ld(&r->w[k]);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return ld(&r->seq) == s && out[W_HANDLE] == handle ? s : 0;
}

/* What a reader looks for: record r of row `row`, copied into w when it
 * is stable and wanted; its sequence number then, else 0. */
typedef uint64_t (*want_fn)(rec_t *r, int row, uint64_t *w, void *arg);

/* The first record of another process that want() takes, counted as read
 * (unless its owner is changing it meanwhile) and filled into *h. */
static bool take_first(int self_row, want_fn want, void *arg, pm__node_hold_t *h)
{
    table_t *t = table();
    if (t == NULL)
        return false;
    uint64_t me = self(), w[WORDS];
    for (int i = 0; i < ROWS; i++) {
        row_t *rw = &t->row[i];
        uint64_t pid = __atomic_load_n(&rw->pid, __ATOMIC_ACQUIRE);
        if (i == self_row || pid == 0 || pid == me)
            continue;
        for (int k = 0; k < RECS; k++) {
            rec_t *r = &rw->rec[k];
            uint64_t s = want(r, i, w, arg);
            if (s == 0)
                continue;
            __atomic_add_fetch(&r->readers, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&r->seq, __ATOMIC_SEQ_CST) != s) { /* the owner is changing it */
                __atomic_sub_fetch(&r->readers, 1, __ATOMIC_SEQ_CST);
                continue;
            }
            h->row = i;
            h->rec = k;
            h->gen = w[W_GEN];
            memcpy(h->ipc, &w[W_IPC], PM__NODE_IPC);
            ld_bytes(h->dev, rw->dev, PM__NODE_DEV);
            return true;
        }
    }
    return false;
}

typedef struct part_want {
    uint64_t handle, version;
    const pm__sub_t *q;
} part_want_t;

/* A record of the memory at the version that holds every row of the part. */
static uint64_t want_part(rec_t *r, int row, uint64_t *w, void *arg)
{
    const part_want_t *a = arg;
    (void)row;
    uint64_t s = snapshot(r, a->handle, a->version, w);
    return s != 0 && covers(w + W_RANGES, (uint32_t)w[W_N], a->q) ? s : 0;
}

bool pm__node_take(int self_row, uint64_t handle, uint64_t version, const pm__sub_t *q,
                   pm__node_hold_t *h)
{
    part_want_t a = {handle, version, q};
    return handle != 0 && take_first(self_row, want_part, &a, h);
}

typedef struct unseen_want {
    bool (*seen)(void *ctx, int row, uint64_t gen);
    void *ctx;
} unseen_want_t;

/* A record of any memory whose mirror the reader has not seen. */
static uint64_t want_unseen(rec_t *r, int row, uint64_t *w, void *arg)
{
    const unseen_want_t *a = arg;
    uint64_t s = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
    if ((s & 1) || ld(&r->w[W_HANDLE]) == 0 || a->seen(a->ctx, row, ld(&r->w[W_GEN])))
        return 0;
    for (int j = 0; j < W_RANGES; j++)
        w[j] = ld(&r->w[j]);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return ld(&r->seq) == s && w[W_HANDLE] != 0 ? s : 0;
}

bool pm__node_take_unseen(int self_row, bool (*seen)(void *ctx, int row, uint64_t gen), void *ctx,
                          pm__node_hold_t *h)
{
    unseen_want_t a = {seen, ctx};
    return take_first(self_row, want_unseen, &a, h);
}

void pm__node_drop(const pm__node_hold_t *h)
{
    table_t *t = table();
    if (t != NULL)
        __atomic_sub_fetch(&t->row[h->row].rec[h->rec].readers, 1, __ATOMIC_SEQ_CST);
}

bool pm__node_current(int row, int rec, uint64_t gen)
{
    table_t *t = table();
    if (t == NULL)
        return false;
    rec_t *r = &t->row[row].rec[rec];
    return ld(&r->w[W_HANDLE]) != 0 && ld(&r->w[W_GEN]) == gen;
}
