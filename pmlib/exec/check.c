/*
 * The checking mode (PMLIB_CHECK=1). Each memory of a task gets a view the
 * size of the memory, all PM_CHECK_POISON, so that info->mem[m] + offset is
 * the same byte as in serial code. Before the callback the subscribed bytes
 * are copied in from where the subtask would have worked (the memory, a
 * host's mirror, a private reduce output); afterwards the view is scanned:
 * outside the subscriptions every byte must still be poison, and bytes
 * subscribed for reading only must be unchanged. Then the written bytes go
 * back and the subscribed bytes are poisoned again. The cost is a scan of
 * every task memory per subtask, and one view per memory per stub (GPU
 * stubs copy each view whole to the device and back: exec/cuda.c).
 */
#include "exec/check.h"

#include <stdlib.h>
#include <string.h>


typedef struct check_mem {
    unsigned char *view; /* cap bytes, all poison between subtasks */
    size_t cap;
    pm__acc_t sub, wr, ro; /* subscribed, written, read only (no data) */
    unsigned char *saved;  /* the read-only bytes as they were copied in */
    size_t capsaved;
    void *target;          /* where info->mem[m] pointed */
    bool used;
} check_mem_t;

struct pm__check {
    check_mem_t mem[PM_MAX_TASK_MEMORIES];
};

static unsigned char poison_block[4096];

void pm__check_init(void)
{
    const char *v = getenv("PMLIB_CHECK");
    pm__check_mode = 0;
    if (v == NULL || *v == '\0' || strcmp(v, "0") == 0)
        return;
    if (strcmp(v, "1") != 0) {
        pm__warn("PMLIB_CHECK=%s is not 0 or 1; checking mode off", v);
        return;
    }
    memset(poison_block, PM_CHECK_POISON, sizeof poison_block);
    pm__check_mode = 1;
    for (int i = 0; i < pm__rt.nstubs; i++) {
        if (pm__rt.stubs[i].ops->kind != PM_DEVICE_CPU) {
            pm__info("PMLIB_CHECK=1: GPU subtasks run one at a time, each over whole copies of "
                     "the task's memories");
            break;
        }
    }
}

pm__check_t *pm__check_new(void)
{
    return calloc(1, sizeof(pm__check_t));
}

void pm__check_free(pm__check_t *c)
{
    if (c == NULL)
        return;
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        free(c->mem[m].view);
        free(c->mem[m].saved);
        pm__acc_free(&c->mem[m].sub);
        pm__acc_free(&c->mem[m].wr);
        pm__acc_free(&c->mem[m].ro);
    }
    free(c);
}

static int reserve_view(check_mem_t *cm, size_t bytes)
{
    if (cm->cap >= bytes && cm->view != NULL)
        return 0;
    free(cm->view);
    cm->cap = 0;
    cm->view = malloc(bytes ? bytes : 1);
    if (cm->view == NULL)
        return PM_ENOMEM;
    memset(cm->view, PM_CHECK_POISON, bytes ? bytes : 1);
    cm->cap = bytes ? bytes : 1;
    return 0;
}

/* The subscribed, written and read-only byte sets of memory m. */
static int build_sets(check_mem_t *cm, pm__subs_view_t v, int m)
{
    int rc = 0;
    cm->sub.ncov = cm->wr.ncov = cm->ro.ncov = 0;
    for (uint32_t i = 0; i < v.n && rc == 0; i++) {
        const pm__sub_t *r = &v.r[i];
        if (r->mem != m)
            continue;
        rc = pm__acc_apply_rows(&cm->sub, r->offset, r->block, r->stride, r->count, true);
        if (rc == 0 && (r->access & PM_WRITE))
            rc = pm__acc_apply_rows(&cm->wr, r->offset, r->block, r->stride, r->count, true);
    }
    for (uint32_t i = 0; i < cm->sub.ncov && rc == 0; i++)
        rc = pm__acc_cover(&cm->ro, cm->sub.cov[i].lo, cm->sub.cov[i].hi);
    for (uint32_t i = 0; i < cm->wr.ncov && rc == 0; i++)
        rc = pm__acc_apply_rows(&cm->ro, cm->wr.cov[i].lo, cm->wr.cov[i].hi - cm->wr.cov[i].lo,
                                cm->wr.cov[i].hi - cm->wr.cov[i].lo, 1, false);
    return rc;
}

static int save_read_only(check_mem_t *cm)
{
    size_t n = 0;
    for (uint32_t i = 0; i < cm->ro.ncov; i++)
        n += cm->ro.cov[i].hi - cm->ro.cov[i].lo;
    if (n > cm->capsaved) {
        free(cm->saved);
        cm->capsaved = 0;
        cm->saved = malloc(n);
        if (cm->saved == NULL)
            return PM_ENOMEM;
        cm->capsaved = n;
    }
    n = 0;
    for (uint32_t i = 0; i < cm->ro.ncov; i++) {
        size_t len = cm->ro.cov[i].hi - cm->ro.cov[i].lo;
        memcpy(cm->saved + n, cm->view + cm->ro.cov[i].lo, len);
        n += len;
    }
    return 0;
}

/* Puts back the views entered so far (out of memory). */
static void abandon(pm__check_t *c, const pm__task_t *t, pm_subtask_info_t *info)
{
    for (int m = 0; m < t->desc.nmem; m++) {
        check_mem_t *cm = &c->mem[m];
        if (!cm->used)
            continue;
        memset(cm->view, PM_CHECK_POISON, info->mem_bytes[m]);
        info->mem[m] = cm->target;
        cm->used = false;
    }
}

int pm__check_enter(pm__check_t *c, const pm__task_t *t, pm__subs_view_t v,
                    pm_subtask_info_t *info)
{
    for (int m = 0; m < t->desc.nmem; m++)
        c->mem[m].used = false;
    for (int m = 0; m < t->desc.nmem; m++) {
        check_mem_t *cm = &c->mem[m];
        int rc = reserve_view(cm, info->mem_bytes[m]);
        if (rc == 0)
            rc = build_sets(cm, v, m);
        if (rc != 0) {
            abandon(c, t, info);
            return rc;
        }
        cm->target = info->mem[m];
        for (uint32_t i = 0; i < cm->sub.ncov; i++)
            memcpy(cm->view + cm->sub.cov[i].lo, (unsigned char *)cm->target + cm->sub.cov[i].lo,
                   cm->sub.cov[i].hi - cm->sub.cov[i].lo);
        cm->used = true;
        info->mem[m] = cm->view;
        if ((rc = save_read_only(cm)) != 0) {
            abandon(c, t, info);
            return rc;
        }
    }
    return 0;
}

/* The first byte of [lo, hi) of the view that is not poison, or hi. */
static uint64_t first_unpoisoned(const unsigned char *p, uint64_t lo, uint64_t hi)
{
    while (lo < hi) {
        size_t n = hi - lo < sizeof poison_block ? hi - lo : sizeof poison_block;
        if (memcmp(p + lo, poison_block, n) != 0) {
            while (p[lo] == PM_CHECK_POISON)
                lo++;
            return lo;
        }
        lo += n;
    }
    return hi;
}

/* The end of the run of changed bytes of [at, hi) that starts at `at`, where
 * byte j was was[j - at] (NULL: poison): changed bytes fewer than 8 apart
 * are one run (a written value may keep a byte). */
static uint64_t run_end(const unsigned char *p, const unsigned char *was, uint64_t at, uint64_t hi)
{
    uint64_t last = at;
    for (uint64_t j = at + 1; j < hi && j - last <= 8; j++)
        if (p[j] != (was ? was[j - at] : PM_CHECK_POISON))
            last = j;
    return last;
}

/* Finds the first stray write in memory m; fills [*a, *b] and returns its code. */
static int scan(const check_mem_t *cm, uint64_t bytes, uint64_t *a, uint64_t *b)
{
    uint64_t pos = 0;
    for (uint32_t i = 0; i <= cm->sub.ncov; i++) {
        uint64_t end = i < cm->sub.ncov ? cm->sub.cov[i].lo : bytes;
        uint64_t at = first_unpoisoned(cm->view, pos, end);
        if (at < end) {
            *a = at;
            *b = run_end(cm->view, NULL, at, end);
            return PM_ESTRAY;
        }
        if (i < cm->sub.ncov)
            pos = cm->sub.cov[i].hi;
    }
    size_t off = 0;
    for (uint32_t i = 0; i < cm->ro.ncov; i++) {
        uint64_t lo = cm->ro.cov[i].lo, len = cm->ro.cov[i].hi - lo;
        const unsigned char *was = cm->saved + off;
        if (memcmp(cm->view + lo, was, len) != 0) {
            uint64_t at = lo;
            while (cm->view[at] == was[at - lo])
                at++;
            *a = at;
            *b = run_end(cm->view, was + (at - lo), at, lo + len);
            return PM_EACCESS;
        }
        off += len;
    }
    return 0;
}

static void report(pm__task_t *t, const pm_subtask_info_t *info, int m, int code, uint64_t a,
                   uint64_t b)
{
    unsigned long long id = (unsigned long long)info->id;
    const char *kind = info->device == PM_DEVICE_GPU ? "gpu" : "cpu";
    if (code == PM_ESTRAY)
        pm__task_fail(t, code, info->id,
                      "subtask %llu wrote bytes %llu..%llu of memory %d outside its subscriptions "
                      "(host %d, %s stub %d); subscribe them for writing or keep the callback "
                      "inside its subscriptions", id, (unsigned long long)a, (unsigned long long)b,
                      m, info->host, kind, info->stub);
    else if (t->desc.mem[m].access & PM_WRITE)
        pm__task_fail(t, code, info->id,
                      "subtask %llu wrote bytes %llu..%llu of memory %d, which it subscribed for "
                      "reading only (host %d, %s stub %d); subscribe them with PM_READ_WRITE or "
                      "leave them unchanged", id, (unsigned long long)a, (unsigned long long)b,
                      m, info->host, kind, info->stub);
    else
        pm__task_fail(t, code, info->id,
                      "subtask %llu wrote bytes %llu..%llu of memory %d, which the task added as "
                      "PM_READ (host %d, %s stub %d); add it with PM_READ_WRITE and subscribe "
                      "them for writing, or leave them unchanged", id, (unsigned long long)a,
                      (unsigned long long)b, m, info->host, kind, info->stub);
}

int pm__check_leave(pm__check_t *c, pm__task_t *t, pm__subs_view_t v,
                    pm_subtask_info_t *info)
{
    (void)v;
    int first = 0;
    for (int m = 0; m < t->desc.nmem; m++) {
        check_mem_t *cm = &c->mem[m];
        if (!cm->used)
            continue;
        uint64_t a = 0, b = 0, bytes = info->mem_bytes[m];
        int rc = scan(cm, bytes, &a, &b);
        if (rc != 0 && first == 0) {
            report(t, info, m, rc, a, b);
            first = rc;
        }
        for (uint32_t i = 0; i < cm->wr.ncov; i++)
            memcpy((unsigned char *)cm->target + cm->wr.cov[i].lo, cm->view + cm->wr.cov[i].lo,
                   cm->wr.cov[i].hi - cm->wr.cov[i].lo);
        if (rc != 0)
            memset(cm->view, PM_CHECK_POISON, bytes);
        else
            for (uint32_t i = 0; i < cm->sub.ncov; i++)
                memset(cm->view + cm->sub.cov[i].lo, PM_CHECK_POISON,
                       cm->sub.cov[i].hi - cm->sub.cov[i].lo);
        info->mem[m] = cm->target;
        cm->used = false;
    }
    return first;
}
