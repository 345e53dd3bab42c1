/*
 * The GPU stub. A memory that fits is mirrored whole on the device: each
 * subtask's read parts are copied in where the mirror lacks them, the
 * task's cuda callback runs on the mirror in place on one of the stub's
 * streams, and its written parts go home right behind it, staying valid on
 * the device for the next task. Larger memories get a device buffer for
 * the hull of each subtask's subscriptions (read-only ones cached by
 * range). Subtasks go round-robin over SLOTS streams and retire in id
 * order one round later, so one's copy in, another's kernel and a third's
 * copy out overlap. Built-in reduces merge on the device into one
 * accumulator per chunk, which crosses PCIe once.
 *
 * Host copies go through two pinned staging halves per stream (gather into
 * one half while the other is in flight) rather than cudaHostRegister: the
 * stub is never told when a memory or a comm mirror is freed, and a
 * registration that outlived its buffer would send later copies of a
 * reused address to stale pinned pages. Buffers that are already page-
 * locked (cudaHostAlloc'd memories) are copied directly.
 */
#include "exec/cuda_int.h"
#include "reduce/tree.h"
#include "trace/trace.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error behind the last failed check on this thread (exec/cuda_int.h). */
PM__TLS cudaError_t pm__cuda_last_error;

int pm__cuda_status(cudaError_t e, int level, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return 0;
    pm__cuda_last_error = e;
    const char *base = strrchr(file, '/');
    pm__log(level, "%s failed (exec/%s:%d): %s: %s", call, base != NULL ? base + 1 : file, line,
            cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? PM_ENOMEM : PM_ECUDA;
}

/* ---- failures ----------------------------------------------------------- */

static void fail(const run_t *r, uint64_t id, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void check_device(const run_t *r);

/* Fails subtask id naming the GPU and, if one failed, the CUDA call's
 * message. A CUDA error on a GPU whose context a kernel fault has lost
 * (maybe another subtask's, in flight or earlier) is a callback's failure,
 * as when a sync finds the fault: whichever subtask meets it first. */
static void fail(const run_t *r, uint64_t id, int status, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (status == PM_ECUDA && !r->p->broken && pm__cuda_last_error != cudaSuccess)
        check_device(r);
    cudaError_t e = pm__cuda_last_error;
    bool lost = status == PM_ECUDA && r->p->faulted;
    pm__task_fail(r->t, lost ? PM_ECALLBACK : status, id, "subtask %llu: %s on host %d, gpu %d (%s)%s%s%s",
                  (unsigned long long)id, what, pm__rt.host, r->p->gpu.ordinal, r->p->gpu.name,
                  e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "",
                  lost ? "; a cuda callback's kernel fault lost the gpu's context" : "");
}

static const char *open_failure(int rc)
{
    if (rc == PM_ENOMEM)
        return "out of device memory for its buffers even after evicting the gpu cache, and "
               "it cannot run on a cpu instead (no cpu callback, cpus excluded, or a reduced memory)";
    return "setting up its device buffers failed";
}

/*
 * Out of device memory even after eviction: the subtask runs with its cpu
 * callback, on this thread, over the host copies. Only for tasks without
 * reduced memories (their accumulator for this chunk lives on the GPU).
 * Returns 0 when it ran (a failing callback is then recorded as usual).
 */
static int run_on_cpu(const run_t *r, uint64_t id)
{
    const pm__task_t *t = r->t;
    if (t->cbs->cb.cpu == NULL || t->nred > 0 || !(t->desc.devices & PM_DEVICE_CPU))
        return PM_ENOTSUP;
    pm_subtask_info_t info = r->info;
    info.id = id;
    info.device = PM_DEVICE_CPU;
    info.device_index = -1;
    for (int m = 0; m < t->desc.nmem; m++)
        info.mem[m] = t->mems[m]->data;
    pm__info("subtask %llu runs on the cpu: gpu %d is out of memory", (unsigned long long)id,
             r->p->gpu.ordinal);
    int rc = t->cbs->cb.cpu(&info);
    if (rc != 0)
        pm__task_fail(r->t, PM_ECALLBACK, id,
                      "subtask %llu: the cpu callback (run because gpu %d was out of memory) returned %d "
                      "on host %d", (unsigned long long)id, r->p->gpu.ordinal, rc, pm__rt.host);
    return 0;
}

static const char *close_failure(int rc)
{
    if (rc == PM_ECALLBACK)
        return "the reduce callback failed";
    if (rc == PM_ENOMEM)
        return "out of memory merging its reduce output";
    return "copying its outputs from the gpu failed";
}

/* After a failed sync: a sticky error (a kernel fault) loses the context
 * for the rest of the process; anything else leaves the GPU usable. */
static void check_device(const run_t *r)
{
    if (r->p->broken)
        return; /* said once, when it broke */
    cudaError_t e = pm__cuda_last_error;
    PM__CUDA(QUIET, cudaGetLastError());
    if (PM__CUDA(QUIET, cudaDeviceSynchronize()) == 0) {
        pm__cuda_last_error = e;
        return;
    }
    r->p->broken = true;
    r->p->faulted = true;
    pm__cu_peer_leave(r->p); /* other GPUs copy nothing more from it */
    pm__error("gpu %d (%s) of host %d is unusable after %s; its stub fails the rest of its "
              "subtasks", r->p->gpu.ordinal, r->p->gpu.name, pm__rt.host, cudaGetErrorName(e));
    pm__cuda_last_error = e;
}

/* ---- chunks --------------------------------------------------------------- */

/* A device accumulator over the hull of each built-in reduced memory's
 * subscriptions in the chunk, filled fresh. Merging per chunk rather than
 * per task keeps the result independent of which device ran which chunk:
 * the chunk outputs then meet in the task's fixed merge tree. */
static int setup_accumulators(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    const pm__task_t *t = r->t;
    pm__subs_view_t all = {NULL, 0};
    if (t->chunk_subs != NULL)
        all = (pm__subs_view_t){t->chunk_subs[cs->chunk].recs, t->chunk_subs[cs->chunk].n};
    int rc = 0;
    for (int m = 0; m < t->desc.nmem && rc == 0; m++) {
        pm_reduce_op_t op = t->desc.mem[m].reduce;
        uint64_t lo = 0, hi = 0;
        if (op == PM_REDUCE_NONE || op == PM_REDUCE_CUSTOM || !pm__subs_hull(all, m, &lo, &hi))
            continue;
        cs->dlo[m] = lo;
        rc = pm__cu_pool_get(r->p, hi - lo, &cs->dacc[m]);
        if (rc == 0)
            rc = pm__cu_fresh_fill(r, sl, m, pm__natural(cs->dacc[m].ptr, lo), lo, hi);
    }
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(cs->merged, sl->stream));
}

static void chunk_close(run_t *r, chunk_state_t *cs);

/* Enqueues the written bytes of every device accumulator, back to back,
 * into the chunk's pinned `home` buffer behind the chunk's last merge. */
static int send_home(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    size_t need = 0, pos = 0;
    for (int m = 0; m < r->t->desc.nmem; m++)
        for (uint32_t i = 0; i < cs->dcov[m].ncov; i++)
            need += cs->dcov[m].cov[i].hi - cs->dcov[m].cov[i].lo;
    if (need > cs->home_cap) {
        if (cs->home != NULL)
            PM__CUDA(PM__LOG_WARN, cudaFreeHost(cs->home));
        cs->home = NULL;
        cs->home_cap = 0;
        int rc = PM__CUDA(QUIET, cudaHostAlloc((void **)&cs->home, need, cudaHostAllocDefault));
        if (rc != 0)
            return rc;
        cs->home_cap = need;
    }
    int rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        const void *dev = pm__natural(cs->dacc[m].ptr, cs->dlo[m]);
        for (uint32_t i = 0; i < cs->dcov[m].ncov && rc == 0; i++) {
            uint64_t lo = cs->dcov[m].cov[i].lo, n = cs->dcov[m].cov[i].hi - lo;
            rc = PM__CUDA(QUIET, cudaMemcpyAsync(cs->home + pos, at(dev, lo), n,
                                                 cudaMemcpyDeviceToHost, sl->stream));
            pos += n;
            r->cnt->bytes_from_gpu += n;
        }
    }
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(cs->home_done, sl->stream));
}

/* After the chunk's last subtask retired: its accumulators start home. The
 * chunk closes later (chunk_close), when its state is next needed or the
 * run ends, so the pipeline never stops to wait for them. */
static void chunk_end(run_t *r, slot_t *sl, chunk_state_t *cs)
{
    bool send = cs->acc != NULL && cs->setup_rc == 0 && !r->p->broken;
    cs->home_rc = send ? send_home(r, sl, cs) : 0;
    if (cs->home_rc != 0)
        fail(r, cs->first, cs->home_rc, "copying its chunk's reduce output from the gpu failed");
    cs->closing = true;
    if (!send)
        chunk_close(r, cs);
}

/* The chunk's accumulators are home: their outputs go up the merge tree. */
static void chunk_close(run_t *r, chunk_state_t *cs)
{
    int rc = cs->home_rc;
    bool sent = rc == 0 && cs->acc != NULL && cs->setup_rc == 0 && !r->p->broken;
    if (sent)
        rc = PM__CUDA(QUIET, cudaEventSynchronize(cs->home_done));
    size_t pos = 0;
    for (int m = 0; m < r->t->desc.nmem && sent && rc == 0; m++) {
        const pm__acc_t *d = &cs->dcov[m];
        pm__acc_t *a = &cs->acc->acc[m];
        if (d->ncov == 0)
            continue;
        rc = pm__acc_reserve(r->t, m, a, d->cov[0].lo, d->cov[d->ncov - 1].hi);
        for (uint32_t i = 0; i < d->ncov && rc == 0; i++) {
            uint64_t lo = d->cov[i].lo, n = d->cov[i].hi - lo;
            memcpy(a->data + (lo - a->lo), cs->home + pos, n);
            pos += n;
            rc = pm__acc_cover(a, lo, lo + n);
        }
    }
    if (rc != 0 && cs->home_rc == 0)
        fail(r, cs->first, rc, "copying its chunk's reduce output from the gpu failed");
    if (cs->acc != NULL) {
        rc = pm__reduce_tree_push(r->t, 0, cs->chunk, cs->acc);
        if (rc != 0)
            fail(r, cs->first, rc, "%s", close_failure(rc));
    }
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        pm__cu_pool_put(r->p, &cs->dacc[m]);
        pm__acc_free(&cs->dcov[m]);
    }
    cs->acc = NULL;
    cs->closing = false;
    cs->busy = false;
    if (r->feed != NULL) /* the last thing done with the task: it may end here */
        r->feed->done(r->feed, cs->chunk, cs->since);
}

static chunk_state_t *chunk_begin(run_t *r, slot_t *sl, uint64_t chunk)
{
    cuda_priv_t *p = r->p;
    chunk_state_t *cs = &p->cstate[p->next_cstate];
    p->next_cstate = (p->next_cstate + 1) % CHUNK_STATES;
    if (cs->closing) /* a chunk CHUNK_STATES ago: its copies are long done */
        chunk_close(r, cs);
    assert(!cs->busy); /* CHUNK_STATES covers every chunk that can be in flight */
    cs->busy = true;
    cs->setup_rc = 0;
    cs->chunk = chunk;
    cs->since = pm__now();
    pm__chunk_span(r->t, chunk, &cs->first, &cs->last);
    memset(cs->direct_taken, 0, sizeof cs->direct_taken);
    if (r->t->nred == 0 || p->broken)
        return cs;
    pm__cuda_last_error = cudaSuccess;
    cs->acc = pm__accset_new();
    cs->setup_rc = cs->acc != NULL ? setup_accumulators(r, sl, cs) : PM_ENOMEM;
    return cs;
}

/* Whether the subtask's use of memory m sends written parts home, and
 * from which device buffer (natural view). */
static const void *written_home(const run_t *r, const mem_use_t *u, int m)
{
    if (!(r->t->desc.mem[m].access & PM_WRITE))
        return NULL;
    if (u->kind == USE_PLAIN)
        return pm__natural(u->buf.ptr, u->lo);
    return u->kind == USE_MIRROR ? u->mirror->buf.ptr : NULL;
}

/* Right behind the callback, on its stream: the written parts of page-
 * locked memories start home while the next subtasks copy in and run. */
static int send_early(run_t *r, slot_t *sl, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        mem_use_t *u = &sl->use[m];
        const void *dev = written_home(r, u, m);
        if (dev == NULL || !r->pinned[m])
            continue;
        rc = pm__cu_copy_out(r, sl, dev, r->t->mems[m]->data, true, (parts_t){v.r, v.n, m, PM_WRITE},
                      false);
        u->sent = rc == 0;
    }
    return rc;
}

/* ---- the pipeline ----------------------------------------------------------- */

/* Runs the cuda callback; a failed launch counts as its failure. Launch
 * errors are per CUDA runtime, and a program linked with its own static
 * runtime has one apart from pmlib's: its callbacks must report failed
 * launches by returning nonzero, the check here only sees pmlib's. */
static int invoke_cuda(const run_t *r, const pm_subtask_info_t *info, cudaStream_t stream)
{
    pm__cuda_forget_error(); /* errors already returned */
    int ret = r->t->cbs->cb.cuda(info, (void *)stream);
    int lrc = PM__CUDA(QUIET, cudaGetLastError());
    if (ret == 0 && lrc == 0)
        return 0;
    if (ret != 0)
        fail(r, info->id, PM_ECALLBACK, "the cuda callback returned %d", ret);
    else
        fail(r, info->id, PM_ECALLBACK, "a launch in the cuda callback failed");
    return PM_ECALLBACK;
}

/* The cuda callback on the slot's stream, once its chunk's accumulator is filled. */
static int call_cuda(run_t *r, slot_t *sl, chunk_state_t *cs, const pm_subtask_info_t *info)
{
    int rc = 0;
    for (int m = 0; m < info->nmem && rc == 0; m++)
        if (sl->use[m].kind == USE_DIRECT) /* the accumulator's fill comes first */
            rc = PM__CUDA(QUIET, cudaStreamWaitEvent(sl->stream, cs->merged, 0));
    if (rc != 0) {
        fail(r, info->id, rc, "waiting for its chunk's reduce accumulator failed");
        return rc;
    }
    return invoke_cuda(r, info, sl->stream);
}

/* Starts subtask id on a free slot: buffers, copies in, callback, merges. */
static void issue(run_t *r, slot_t *sl, chunk_state_t *cs, uint64_t id)
{
    sl->busy = true;
    sl->failed = true; /* until the callback and its merges are enqueued */
    sl->id = id;
    sl->cs = cs;
    pm__cuda_last_error = cudaSuccess;
    if (r->p->broken) {
        fail(r, id, PM_ECUDA, "the gpu is unusable after an earlier error");
        return;
    }
    if (cs->setup_rc != 0) {
        fail(r, id, cs->setup_rc, "%s", open_failure(cs->setup_rc));
        return;
    }
    pm__subs_view_t v = pm__subs_of(r->t, cs->chunk, id);
    pm_subtask_info_t info = r->info;
    info.id = id;
    int rc = pm__cu_open_all(r, sl, cs, v, &info);
    if (rc == PM_ENOMEM && run_on_cpu(r, id) == 0)
        return; /* the slot stays marked failed: nothing to bring home from the gpu */
    if (rc != 0) {
        fail(r, id, rc == PM_ENOMEM ? PM_ENOMEM : PM_ECUDA, "%s", open_failure(rc));
        return;
    }
    if (call_cuda(r, sl, cs, &info) != 0)
        return;
    rc = pm__cu_after_callback(r, sl, cs, v);
    if (rc != 0) {
        fail(r, id, rc, "merging its reduce output on the gpu failed");
        return;
    }
    rc = send_early(r, sl, v);
    if (rc != 0) {
        fail(r, id, rc, "%s", close_failure(rc));
        return;
    }
    sl->failed = false;
}

/* Brings a subtask's outputs home (once its stream is synchronized): the
 * written parts of plain and mirrored memories that are not home yet, and
 * custom-reduced outputs (built-in ones stay in the chunk's accumulator).
 * A mirror's written parts, home now, are valid for the next version. */
static int close_all(run_t *r, slot_t *sl, pm__subs_view_t v)
{
    int rc = 0;
    for (int m = 0; m < r->t->desc.nmem && rc == 0; m++) {
        const mem_use_t *u = &sl->use[m];
        const void *dev = written_home(r, u, m);
        if (dev != NULL && !u->sent)
            rc = pm__cu_copy_out(r, sl, dev, r->t->mems[m]->data, r->pinned[m],
                          (parts_t){v.r, v.n, m, PM_WRITE}, true);
        if (dev != NULL && u->kind == USE_MIRROR) {
            for (uint32_t i = 0; i < v.n && rc == 0; i++)
                if (v.r[i].mem == m && (v.r[i].access & PM_WRITE))
                    rc = pm__cu_mirror_pending(u->mirror, &v.r[i]);
            if (rc == 0) /* the other hosts of this machine may copy them now */
                pm__cu_node_publish(r->p, u->mirror, true);
        }
        if (u->kind == USE_CUSTOM)
            rc = pm__cu_merge_custom(r, sl, v, m);
    }
    return rc;
}

/* Finishes the subtask on a slot: waits for its stream, brings its outputs
 * home, frees its buffers; ends its chunk after the chunk's last subtask. */
static void retire(run_t *r, slot_t *sl)
{
    chunk_state_t *cs = sl->cs;
    pm__cuda_last_error = cudaSuccess;
    pm__cu_node_warm(r, sl);
    const double t0 = pm__trace_on() ? pm__now() : 0;
    int src = PM__CUDA(QUIET, cudaStreamSynchronize(sl->stream));
    if (t0 > 0)
        pm__trace_span(r->s->index, PM__TRACE_GPU_WAIT, r->t->seq, cs->chunk, t0, pm__now());
    if (src != 0) {
        check_device(r);
        /* A lost context fails every stream, so the fault may be another's. */
        if (!sl->failed)
            fail(r, sl->id, PM_ECALLBACK, "%s",
                 r->p->broken ? "the gpu failed while its cuda callback's work (or that of "
                                "another subtask in flight there) ran"
                              : "the work of its cuda callback failed");
        sl->failed = true;
    }
    if (!sl->failed) {
        int rc = close_all(r, sl, pm__subs_of(r->t, cs->chunk, sl->id));
        if (rc != 0)
            fail(r, sl->id, rc, "%s", close_failure(rc));
    }
    pm__cu_release_all(r->p, sl);
    sl->busy = false;
    if (sl->id + 1 == cs->last)
        chunk_end(r, sl, cs);
}

static slot_t *next_slot(cuda_priv_t *p)
{
    slot_t *sl = &p->slot[p->next_slot];
    p->next_slot = (p->next_slot + 1) % SLOTS;
    return sl;
}

static int gpu_setup(cuda_priv_t *p);

/* Stubs are described on the main thread; this one selects its GPU and,
 * the first time, makes what it runs with. */
static void cuda_ready(pm__stub_t *s)
{
    cuda_priv_t *p = s->priv;
    pm__cuda_last_error = cudaSuccess;
    if (!p->broken && PM__CUDA(PM__LOG_ERROR, cudaSetDevice(p->gpu.ordinal)) != 0)
        p->broken = true;
    if (!p->broken && !p->ready && gpu_setup(p) != 0) {
        p->broken = true;
        pm__error("gpu %d (%s) of host %d cannot be set up; its subtasks of this task fail and "
                  "later tasks run without it (PMLIB_NGPU or PMLIB_CUDA_DEVICES leave it out)",
                  p->gpu.ordinal, p->gpu.name, pm__rt.host);
    }
}

static void run_init(run_t *r, pm__stub_t *s, pm__task_t *t)
{
    cuda_priv_t *p = s->priv;
    *r = (run_t){.s = s, .p = p, .t = t, .cnt = pm__counts_own(t, s->index)};
    r->info = (pm_subtask_info_t){.count = t->desc.subtasks, .nmem = t->desc.nmem,
                                  .conf = t->conf, .conf_bytes = t->desc.conf_bytes,
                                  .host = pm__rt.host, .stub = s->index,
                                  .device = PM_DEVICE_GPU, .device_index = p->gpu.ordinal,
                                  .internal = t};
    cuda_ready(s);
    for (int m = 0; m < t->desc.nmem; m++) {
        r->info.mem_bytes[m] = t->mems[m]->bytes;
        r->pinned[m] = !p->broken && pm__cu_host_pinned(t->mems[m]->data, &r->mapped[m]);
    }
}

/*
 * PMLIB_CHECK=1: one subtask over device copies of the checking mode's
 * views (exec/check.c). Each whole view goes to the device, the cuda
 * callback runs on the copies, and they come back to be checked like a
 * CPU subtask's: stray writes anywhere in a memory are found, and stray
 * reads see the poison. Slow (whole memories cross PCIe per subtask), and
 * meant for finding such bugs.
 */
static int checked_call(pm__stub_t *s, pm__task_t *t, pm_subtask_info_t *info)
{
    cuda_priv_t *p = s->priv;
    run_t r = {.s = s, .p = p, .t = t, .cnt = pm__counts_own(t, s->index), .info = *info};
    if (p->broken) {
        fail(&r, info->id, PM_ECUDA, "the gpu is unusable after an earlier error");
        return PM__CALL_FAILED;
    }
    cudaStream_t st = p->slot[0].stream;
    pm_subtask_info_t d = *info;
    pm__cuda_last_error = cudaSuccess;
    for (int m = 0; m < info->nmem; m++) {
        size_t n = info->mem_bytes[m];
        if (p->view[m].ptr != NULL && p->view[m].bytes < n)
            pm__cu_dev_free(p, &p->view[m]);
        if (p->view[m].ptr == NULL && pm__cu_dev_alloc(p, n, &p->view[m]) != 0) {
            fail(&r, info->id, PM_ENOMEM, "out of device memory for the checking mode's views");
            return PM__CALL_FAILED;
        }
        d.mem[m] = info->mem[m] == NULL ? NULL : p->view[m].ptr;
        if (d.mem[m] != NULL && n > 0 &&
            PM__CUDA(QUIET, cudaMemcpyAsync(d.mem[m], info->mem[m], n, cudaMemcpyHostToDevice, st)) != 0) {
            fail(&r, info->id, PM_ECUDA, "copying its checking view to the gpu failed");
            return PM__CALL_FAILED;
        }
        r.cnt->bytes_to_gpu += d.mem[m] != NULL ? n : 0; /* what crossed, as the stats count it */
    }
    int crc = invoke_cuda(&r, &d, st);
    if (PM__CUDA(QUIET, cudaStreamSynchronize(st)) != 0) {
        if (crc == 0) /* else already failed: once per subtask */
            fail(&r, info->id, PM_ECUDA, "its kernels failed");
        check_device(&r);
        return PM__CALL_FAILED;
    }
    for (int m = 0; m < info->nmem; m++) {
        if (d.mem[m] != NULL && info->mem_bytes[m] > 0 &&
            PM__CUDA(QUIET, cudaMemcpy(info->mem[m], d.mem[m], info->mem_bytes[m],
                                       cudaMemcpyDeviceToHost)) != 0) {
            fail(&r, info->id, PM_ECUDA, "copying its checking view from the gpu failed");
            return PM__CALL_FAILED;
        }
        r.cnt->bytes_from_gpu += d.mem[m] != NULL ? info->mem_bytes[m] : 0;
    }
    return crc != 0 ? PM__CALL_FAILED : 0;
}

/* Whether the slot's stream has nothing left to run (or failed: retire
 * finds out which). */
static bool slot_idle(const slot_t *sl)
{
    return cudaStreamQuery(sl->stream) != cudaErrorNotReady;
}

/*
 * Waits for the chunk's inputs from other hosts; meanwhile the subtasks in
 * flight whose work is done retire, oldest first, so finished chunks are
 * reported (and their outputs sent) instead of waiting behind the
 * transfer. One still running is left running: retiring it waited for its
 * kernels, so the next chunk was issued only once the GPU had gone idle
 * (2 ranks x 1 H100, nbody: every chunk of host 1 ran alone, 18.3 ms
 * against host 0's 17.5 with three in flight).
 */
static int inputs_here(run_t *r, uint64_t chunk)
{
    int rc = r->feed->ready(r->feed, chunk, false);
    for (int k = 0; rc == PM__FEED_LATER && k < SLOTS; k++) {
        slot_t *sl = &r->p->slot[(r->p->next_slot + k) % SLOTS];
        if (!sl->busy)
            continue;
        if (!slot_idle(sl))
            break; /* the later ones retire after it */
        retire(r, sl);
        rc = r->feed->ready(r->feed, chunk, false);
    }
    return rc == PM__FEED_LATER ? r->feed->ready(r->feed, chunk, true) : rc;
}

/*
 * The feed's next chunk. Unless the feed takes chunks ahead, the oldest
 * subtask in flight retires first (the GPU still has the others): a chunk
 * taken before a slot is free waited there, out of reach of another host
 * that ran dry (PageRank 3e7, 2 ranks x 1 GPU: host 0's GPU idled while
 * host 1 held four chunks). With none left here, the subtasks in flight
 * retire oldest first and the feed is asked again after each: chunks that
 * another host gives meanwhile keep the pipeline full.
 */
static bool holds_chunk(const cuda_priv_t *p)
{
    for (int k = 0; k < CHUNK_STATES; k++)
        if (p->cstate[k].busy)
            return true;
    return false;
}

static bool next_chunk(run_t *r, pm__chunk_feed_t *feed, uint64_t *chunk)
{
    slot_t *sl = &r->p->slot[r->p->next_slot];
    if (sl->busy && (feed->ahead == NULL || !feed->ahead(feed)))
        retire(r, sl);
    /* The feed reads the task: only while a chunk of it is held here (the
     * report of the last one may end it, and the program may free it). */
    if (holds_chunk(r->p) && feed->next(feed, chunk))
        return true;
    for (int k = 0; k < SLOTS; k++) {
        sl = &r->p->slot[(r->p->next_slot + k) % SLOTS];
        if (!sl->busy)
            continue;
        retire(r, sl);
        if (holds_chunk(r->p) && feed->next(feed, chunk))
            return true;
    }
    return false;
}

void pm__cuda_run_chunks(pm__stub_t *s, pm__task_t *t, uint64_t chunk, pm__chunk_feed_t *feed)
{
    run_t r;
    run_init(&r, s, t);
    r.feed = feed;
    if (pm__check_mode) {
        for (bool more = true; more;) {
            double since = pm__now();
            uint64_t next = 0;
            if (feed == NULL || feed->ready == NULL || feed->ready(feed, chunk, true) == 0)
                pm__host_run_chunk(&r.p->host, s, t, chunk, checked_call);
            /* The next chunk is taken before this one is reported: the last
             * report may end the task, and the program may free it. */
            more = feed != NULL && feed->next(feed, &next);
            if (feed != NULL)
                feed->done(feed, chunk, since);
            chunk = next;
        }
        return;
    }
    /* The next chunk is taken once this one's subtasks are issued: with at
     * most SLOTS in flight, the stub holds only a few chunks ahead. */
    for (bool more = true; more; more = feed != NULL && next_chunk(&r, feed, &chunk)) {
        uint64_t first, last;
        if (feed != NULL && feed->ready != NULL && inputs_here(&r, chunk) != 0) {
            feed->done(feed, chunk, pm__now()); /* its inputs never came: the task failed */
            continue;
        }
        pm__chunk_span(t, chunk, &first, &last);
        r.cnt->subtasks += last - first;
        chunk_state_t *cs = NULL;
        for (uint64_t id = first; id < last; id++) {
            slot_t *sl = next_slot(r.p);
            if (sl->busy)
                retire(&r, sl);
            if (cs == NULL)
                cs = chunk_begin(&r, sl, chunk);
            issue(&r, sl, cs, id);
        }
    }
    for (int k = 0; k < SLOTS; k++) {
        slot_t *sl = next_slot(r.p);
        if (sl->busy)
            retire(&r, sl);
    }
    for (int k = 0; k < CHUNK_STATES; k++)
        if (r.p->cstate[k].closing)
            chunk_close(&r, &r.p->cstate[k]);
}

static void cuda_run_chunk(pm__stub_t *s, pm__task_t *t, uint64_t chunk)
{
    pm__cuda_run_chunks(s, t, chunk, NULL);
}

/* ---- set-up and tear-down -------------------------------------------------- */

static int gpu_query(int ordinal, pm__gpu_info_t *g)
{
    struct cudaDeviceProp prop;
    int rc = PM__CUDA(PM__LOG_WARN, cudaGetDeviceProperties(&prop, ordinal));
    if (rc != 0)
        return rc;
    *g = (pm__gpu_info_t){.ordinal = ordinal, .major = prop.major, .minor = prop.minor,
                          .mem_bytes = prop.totalGlobalMem, .sm_count = prop.multiProcessorCount};
    size_t n = strnlen(prop.name, sizeof prop.name);
    if (n >= sizeof g->name)
        n = sizeof g->name - 1;
    memcpy(g->name, prop.name, n);
    g->name[n] = '\0';
    return 0;
}

static int slot_init(slot_t *sl)
{
    int rc = PM__CUDA(PM__LOG_ERROR, cudaStreamCreateWithFlags(&sl->stream, cudaStreamNonBlocking));
    for (int h = 0; h < 2 && rc == 0; h++) {
        rc = PM__CUDA(PM__LOG_ERROR, cudaHostAlloc((void **)&sl->stage[h], STAGE_BYTES,
                                                   cudaHostAllocDefault));
        if (rc == 0)
            rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&sl->stage_done[h],
                                                                  cudaEventDisableTiming));
    }
    return rc;
}

static void slot_fini(slot_t *sl, int level)
{
    for (int h = 0; h < 2; h++) {
        if (sl->stage_done[h] != NULL)
            PM__CUDA(level, cudaEventDestroy(sl->stage_done[h]));
        if (sl->stage[h] != NULL)
            PM__CUDA(level, cudaFreeHost(sl->stage[h]));
    }
    if (sl->stream != NULL)
        PM__CUDA(level, cudaStreamDestroy(sl->stream));
    *sl = (slot_t){0};
}

static void cuda_fini(pm__stub_t *s)
{
    cuda_priv_t *p = s->priv;
    if (p == NULL)
        return;
    pm__cu_peer_leave(p);
    pm__host_run_free(&p->host);
    if (!p->ready) { /* never ran a chunk: nothing made, no CUDA call now either */
        free(p);
        s->priv = NULL;
        return;
    }
    int level = p->broken ? QUIET : PM__LOG_WARN;
    PM__CUDA(level, cudaSetDevice(s->device_index));
    PM__CUDA(level, cudaDeviceSynchronize());
    while (p->oldest != NULL)
        pm__cu_cache_drop(p, p->oldest);
    while (p->mirrors != NULL) {
        mirror_t *mr = p->mirrors;
        p->mirrors = mr->next;
        pm__cu_mirror_free(p, mr);
    }
    pm__cu_node_leave(p);
    for (int i = 0; i < CHUNK_STATES; i++) {
        for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
            pm__cu_dev_free(p, &p->cstate[i].dacc[m]);
            pm__acc_free(&p->cstate[i].dcov[m]);
        }
        if (p->cstate[i].merged != NULL)
            PM__CUDA(level, cudaEventDestroy(p->cstate[i].merged));
        if (p->cstate[i].home_done != NULL)
            PM__CUDA(level, cudaEventDestroy(p->cstate[i].home_done));
        if (p->cstate[i].home != NULL)
            PM__CUDA(level, cudaFreeHost(p->cstate[i].home));
    }
    while (p->npool > 0)
        pm__cu_dev_free(p, &p->pool[--p->npool]);
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++)
        pm__cu_dev_free(p, &p->view[m]);
    for (int i = 0; i < SLOTS; i++)
        slot_fini(&p->slot[i], level);
    free(p->scratch);
    free(p);
    s->priv = NULL;
}

/* PMLIB_CUDA_MEMORY_MB: device memory a stub keeps for its buffers and read
 * cache before it evicts idle ones. The default, three quarters of the GPU,
 * leaves the rest to the callbacks' own allocations. */
static size_t memory_cap(size_t total)
{
    return (size_t)pm__env_uint("PMLIB_CUDA_MEMORY_MB", "a size in MiB", 1, total >> 20,
                                total / 4 * 3 >> 20) << 20;
}

/*
 * PMLIB_CUDA_NARROW_ROW: rows of a strided part narrower than this many
 * bytes move between the GPU and a memory's page-locked buffer through a
 * copy kernel; wider ones, and all rows when it is 0, by 2-D copies. A 2-D
 * copy pays per row: on an H200 it ran at 60 to 90% of a contiguous copy
 * for rows under 32 KiB and at full speed from there (bench/copybw.cu).
 * The kernel runs at about 93% at any width but takes SMs from the
 * callbacks' kernels running beside it, so it only pays for narrow rows.
 */
static uint64_t narrow_row(void)
{
    return pm__env_uint("PMLIB_CUDA_NARROW_ROW", "a byte count", 0, (uint64_t)1 << 30,
                        NARROW_ROW);
}

/* On the stub's thread, its GPU current, before its first chunk: streams,
 * page-locked staging and events. Nothing of it at pm_init, so that a
 * process that never runs a cuda callback never makes a CUDA context (each
 * costs time and device memory, and many processes starting at once, as
 * a test suite does, queue for the driver). */
static int gpu_setup(cuda_priv_t *p)
{
    int rc = 0;
    for (int i = 0; i < SLOTS && rc == 0; i++)
        rc = slot_init(&p->slot[i]);
    for (int i = 0; i < CHUNK_STATES && rc == 0; i++) {
        rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&p->cstate[i].merged,
                                                              cudaEventDisableTiming));
        if (rc == 0)
            rc = PM__CUDA(PM__LOG_ERROR, cudaEventCreateWithFlags(&p->cstate[i].home_done,
                                                                  cudaEventDisableTiming));
    }
    p->ready = true; /* also when it failed: cuda_fini frees what was made */
    if (rc == 0)
        pm__cu_peer_enable(p);
    if (rc == 0)
        pm__cu_node_join(p);
    return rc;
}

static int cuda_init(pm__stub_t *s)
{
    cuda_priv_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory for gpu stub %d", s->index);
    s->priv = p;
    p->node_row = -1;
    pm__cu_peer_join(p);
    p->gpu.ordinal = s->device_index;
    int rc = gpu_query(s->device_index, &p->gpu);
    p->cap = memory_cap(p->gpu.mem_bytes);
    p->narrow_row = narrow_row();
    if (rc != 0)
        cuda_fini(s);
    return rc;
}

/* False once a sticky CUDA error has made the stub's GPU unusable for the
 * rest of the process: the stub takes no more work. */
static bool cuda_usable(const pm__stub_t *s)
{
    const cuda_priv_t *p = s->priv;
    return p != NULL && !p->broken;
}

const pm__device_ops_t pm__cuda_ops = {
    .name = "cuda",
    .kind = PM_DEVICE_GPU,
    .init = cuda_init,
    .ready = cuda_ready,
    .run_chunk = cuda_run_chunk,
    .usable = cuda_usable,
    .fini = cuda_fini,
};

/* ---- discovery ----------------------------------------------------------------- */

/* PMLIB_NGPU: the most GPUs this process drives (default: all, up to 4096). */
static int env_max_gpus(void)
{
    return (int)pm__env_uint("PMLIB_NGPU", "a count", 0, 4096, 4096);
}

static bool listed(const int *list, int n, long d)
{
    for (int i = 0; i < n; i++)
        if (list[i] == d)
            return true;
    return false;
}

/* The ordinals to consider, in order: PMLIB_CUDA_DEVICES, else 0..n-1. */
static int device_list(int n, int *list)
{
    const char *v = getenv("PMLIB_CUDA_DEVICES");
    int k = 0;
    if (v == NULL || *v == '\0') {
        for (k = 0; k < n; k++)
            list[k] = k;
        return n;
    }
    for (const char *s = v; s != NULL; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL) {
        char *end;
        errno = 0;
        long d = strtol(s, &end, 10);
        if (end != s && errno == 0 && (*end == ',' || *end == '\0') && d >= 0 && d < n &&
            !listed(list, k, d))
            list[k++] = (int)d;
        else
            pm__warn("PMLIB_CUDA_DEVICES=%s: '%.*s' is not a new GPU ordinal of this host "
                     "(0..%d); skipping it", v, (int)strcspn(s, ","), s, n - 1);
    }
    return k;
}

/* Visible GPUs; 0 where there is no driver or device, which is no error. */
static int visible_count(void)
{
    int n = 0;
    if (PM__CUDA(QUIET, cudaGetDeviceCount(&n)) == 0)
        return n;
    cudaError_t e = pm__cuda_last_error;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        pm__info("no usable CUDA driver or GPU on host %d (%s); running without GPUs",
                 pm__rt.host, cudaGetErrorString(e));
    else
        pm__warn("CUDA cannot list the GPUs of host %d (%s: %s); running without GPUs",
                 pm__rt.host, cudaGetErrorName(e), cudaGetErrorString(e));
    PM__CUDA(QUIET, cudaGetLastError());
    return 0;
}

int pm__cuda_discover(pm__gpu_info_t **gpus, int *ngpu, int local_rank, int local_size)
{
    *gpus = NULL;
    *ngpu = 0;
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return PM__FAIL(PM_EINTERNAL, "pm__cuda_discover: local rank %d of %d", local_rank,
                        local_size);
    int max = env_max_gpus();
    int n = max == 0 ? 0 : visible_count();
    if (n <= 0)
        return 0;
    int *list = malloc((size_t)n * sizeof *list);
    pm__gpu_info_t *g = calloc((size_t)n, sizeof *g);
    if (list == NULL || g == NULL) {
        free(list);
        free(g);
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory listing %d GPUs", n);
    }
    int nlist = device_list(n, list), k = 0;
    /* PMLIB_GPU_SHARE=1: every rank of the machine drives every listed GPU
     * (ranks sharing GPUs, e.g. under MPS); by default they are dealt out. */
    if (pm__env_uint("PMLIB_GPU_SHARE", "0 or 1", 0, 1, 0) == 1) {
        local_rank = 0;
        local_size = 1;
    }
    for (int i = local_rank; i < nlist && k < max; i += local_size)
        k += gpu_query(list[i], &g[k]) == 0;
    free(list);
    pm__info("host %d, local rank %d of %d: %d of %d visible GPUs", pm__rt.host, local_rank,
             local_size, k, n);
    if (k == 0) {
        free(g);
        g = NULL;
    }
    *gpus = g;
    *ngpu = k;
    return 0;
}

/* ---- page-locked memories -------------------------------------------------------- */

void *pm__cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    /* Portable: every GPU of the process may copy from it at full speed. */
    if (PM__CUDA(QUIET, cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable)) != 0)
        return NULL;
    return p;
}

void pm__cuda_host_free(void *p)
{
    if (p != NULL)
        PM__CUDA(PM__LOG_WARN, cudaFreeHost(p));
}

/* Registering host memory needs a current GPU. It runs on a thread of its
 * own, current on the first GPU this process drives: the calling thread's
 * current GPU stays as it was, and no context is made on a GPU that
 * another host of the machine drives (GPU 0, a fresh thread's default). */
typedef struct pin_job {
    void *p;
    size_t bytes;
    bool pin;
    int rc;
} pin_job_t;

static void *pin_main(void *arg)
{
    pin_job_t *j = arg;
    for (int i = 0; i < pm__rt.nstubs; i++)
        if (pm__rt.stubs[i].ops->kind == PM_DEVICE_GPU) {
            j->rc = PM__CUDA(QUIET, cudaSetDevice(pm__rt.stubs[i].device_index));
            break;
        }
    if (j->rc == 0 && j->pin)
        j->rc = PM__CUDA(QUIET, cudaHostRegister(j->p, j->bytes ? j->bytes : 1,
                                                 cudaHostRegisterPortable | cudaHostRegisterMapped));
    else if (j->rc == 0)
        j->rc = PM__CUDA(PM__LOG_WARN, cudaHostUnregister(j->p));
    return NULL;
}

static int pin_job(void *p, size_t bytes, bool pin)
{
    pin_job_t j = {p, bytes, pin, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, pin_main, &j) != 0)
        return PM_ENOMEM;
    pthread_join(th, NULL);
    return j.rc;
}

int pm__cuda_host_pin(void *p, size_t bytes)
{
    return pin_job(p, bytes, true);
}

void pm__cuda_host_unpin(void *p)
{
    if (p != NULL)
        (void)pin_job(p, 0, false);
}

