/* Cost of placing chunks on other hosts; see hosts.h. */
#include "sched/hosts.h"
#include "comm/comm.h"

#include <math.h>
#include <stdlib.h>

#include "reduce/acc.h"
#include "sched/model.h"

/* Callback sets a host remembers having run (the latest ones). */
#define PM__HOST_SEEN 8

/* Per host (runtime lock): the overhead, the tasks in a row the costs left
 * it out of, and after how many it gets a chunk anyway. */
static struct host_cost {
    double overhead;
    double backlog; /* seconds of placed work of unfinished tasks */
    double per_byte; /* learned seconds per byte moved, beyond the bandwidth */
    uint32_t left_out, probe_after, samples, finishes;
    uint32_t seen[PM__HOST_SEEN]; /* name hashes of callback sets it ran (ring) */
    uint32_t nseen;
} *hc;
static int nhc;

/* Whether host h ran a task of these callbacks before; remembers them. */
static bool seen_before(struct host_cost *c, uint32_t hash)
{
    uint32_t n = c->nseen < PM__HOST_SEEN ? c->nseen : PM__HOST_SEEN;
    for (uint32_t i = 0; i < n; i++)
        if (c->seen[i] == hash)
            return true;
    c->seen[c->nseen++ % PM__HOST_SEEN] = hash;
    return false;
}

/* The first re-measure of a host left out, and the longest wait. */
#define PM__HOST_PROBE_FIRST 16
#define PM__HOST_PROBE_MAX 4096

void pm__hosts_overhead_init(int nhosts)
{
    free(hc);
    hc = calloc((size_t)nhosts, sizeof *hc);
    nhc = hc != NULL ? nhosts : 0;
    for (int h = 0; h < nhc; h++)
        hc[h].probe_after = PM__HOST_PROBE_FIRST;
}

void pm__hosts_overhead_free(void)
{
    free(hc);
    hc = NULL;
    nhc = 0;
}

bool pm__hosts_probe_due(int h, bool fed)
{
    if (h <= 0 || h >= nhc)
        return false;
    if (fed) {
        hc[h].left_out = 0;
        hc[h].probe_after = PM__HOST_PROBE_FIRST;
        return false;
    }
    if (++hc[h].left_out < hc[h].probe_after)
        return false;
    hc[h].left_out = 0;
    if (hc[h].probe_after < PM__HOST_PROBE_MAX)
        hc[h].probe_after *= 2;
    return true;
}

void pm__hosts_seed_overhead(int h, double seconds)
{
    if (h >= 0 && h < nhc && isfinite(seconds) && seconds >= 0)
        hc[h].overhead = seconds;
}

void pm__hosts_note_overhead(int h, double seconds, bool only_lower)
{
    if (h < 0 || h >= nhc || !isfinite(seconds))
        return;
    if (seconds < 0)
        seconds = 0;
    /* About the last 8 samples, but not the first (a host's first task
     * makes its mirrors and wakes its threads: 4 ms where later ones cost
     * 30 us on 2 cores), each counted as at most twice the average: one
     * spike would keep the host out, and a host left out is measured again
     * only rarely (2 ranks x 1 stub on 2 cores, chunks of 26 us: samples of
     * 18 to 36 us and one of 86 us, which as it was moved the average from
     * 22 to 30 us and the host out for the rest of the run). */
    if (hc[h].samples++ == 0)
        return;
    double *o = &hc[h].overhead;
    if (only_lower) /* a host measured after tasks without it: taken as it is when lower */
        *o = fmin(*o, seconds);
    else
        *o += (fmin(seconds, fmax(2 * *o, 1e-6)) - *o) / 8;
}

void pm__hosts_backlog_add(int h, double seconds)
{
    if (h >= 0 && h < nhc && isfinite(seconds))
        hc[h].backlog += seconds;
}

double pm__hosts_backlog(int h)
{
    return h >= 0 && h < nhc && hc[h].backlog > 0 ? hc[h].backlog : 0;
}

double pm__hosts_overhead(int h)
{
    return h >= 0 && h < nhc ? hc[h].overhead : 0;
}

double pm__hosts_bw(int h)
{
    double bw = pm__comm_rate(h);
    return bw > 0 ? bw : PM__HOST_BW_GUESS;
}

static double per_byte(int h)
{
    return h > 0 && h < nhc ? hc[h].per_byte : 0;
}

/* Seconds moving `bytes` to host h takes, each byte costing `pb` beyond the wire. */
static double moving(int h, double bytes, double pb)
{
    return bytes / pm__hosts_bw(h) + bytes * pb;
}

double pm__hosts_moving(int h, double bytes)
{
    return moving(h, bytes, per_byte(h));
}

/* Host h's seconds per chunk of t where its devices take chunk_s: the link
 * carries chunks while the devices run others, and what each byte costs
 * beyond the wire (pb) adds to every chunk's time. */
static double chunk_time(const pm__task_t *t, int h, double chunk_s, double pb)
{
    double bytes = t->xfer_in + t->xfer_out, wire = bytes / pm__hosts_bw(h);
    double chunk = chunk_s + bytes * pb;
    return chunk > wire ? chunk : wire;
}

/* Seconds before host h returns its first chunk of t, as pm__hosts_cost says. */
static double latency(const pm__task_t *t, int h, bool fed, double pb)
{
    return moving(h, t->xfer_in + t->xfer_out, pb) + (fed ? 0 : moving(h, t->xfer_common, pb)) +
           pm__hosts_overhead(h);
}

double pm__hosts_cost(const pm__task_t *t, int h, bool fed, double *rate)
{
    if (*rate > 0)
        *rate = 1 / chunk_time(t, h, 1 / *rate, per_byte(h));
    return latency(t, h, fed, per_byte(h));
}

void pm__hosts_note_finish(const pm__task_t *t, int h, double seconds, unsigned chunks, double chunk_s,
                           bool probe)
{
    double bytes = t->xfer_in + t->xfer_out, moved = t->xfer_common + chunks * bytes;
    if (h <= 0 || h >= nhc || !isfinite(seconds) || seconds <= 0 || moved < (1 << 20))
        return;
    /* What the link and the devices explain: as pm__hosts_cost with
     * nothing learned, the chunks one after the other. */
    double expect = latency(t, h, false, 0) + chunks * chunk_time(t, h, chunk_s, 0);
    double sample = seconds > expect ? (seconds - expect) / moved : 0;
    /* Not the first task of a callback set a host ran: it makes its
     * mirrors and touches their pages, and the other set of an app does so
     * again for ranges of its own (fft2d's first column pass on cpu2: its
     * first 16 MB took host 1 up to 0.35 s, and that one sample kept every
     * later task off host 1). The next sets it and later ones average in. */
    bool first = !seen_before(&hc[h], t->cbs->name_hash);
    double *p = &hc[h].per_byte;
    if (!first) {
        if (probe)
            *p = fmin(*p, sample);
        else if (++hc[h].finishes == 1)
            *p = sample;
        else
            *p += (sample - *p) / 4;
    }
    pm__debug("host %d ran %u chunks in %.3g s, %.3g expected: %.3g ns per byte moved there (now %.3g%s)", h,
              chunks, seconds, expect, sample * 1e9, *p * 1e9, first ? "; its first task of these callbacks" : "");
}

void pm__split_by_cost(int nhosts, const double *lat, const double *rate, uint64_t n,
                       uint64_t *count)
{
    for (int h = 0; h < nhosts; h++)
        count[h] = 0;
    /* The finishing time T at which the hosts together take n chunks:
     * sum over h of max(0, (T - lat[h]) * rate[h]) = n, by bisection. */
    double lo = 0, hi = 0;
    for (int h = 0; h < nhosts; h++)
        if (rate[h] > 0 && (hi == 0 || lat[h] + (double)n / rate[h] < hi))
            hi = lat[h] + (double)n / rate[h];
    if (hi == 0) {
        count[0] = n;
        return;
    }
    for (int it = 0; it < 100 && hi - lo > 1e-12 * hi; it++) {
        double mid = (lo + hi) / 2, took = 0;
        for (int h = 0; h < nhosts; h++)
            if (rate[h] > 0 && mid > lat[h])
                took += (mid - lat[h]) * rate[h];
        if (took >= (double)n)
            hi = mid;
        else
            lo = mid;
    }
    /* Each host the whole chunks it finishes by T; the few left over (at
     * most one per host) one by one to whichever host then finishes first,
     * host 0 on a tie. */
    uint64_t given = 0;
    for (int h = 0; h < nhosts; h++) {
        if (rate[h] <= 0 || hi <= lat[h])
            continue;
        double k = floor((hi - lat[h]) * rate[h]);
        count[h] = k >= (double)(n - given) ? n - given : (uint64_t)k;
        given += count[h];
    }
    while (given < n) {
        int best = -1;
        double when = 0;
        for (int h = 0; h < nhosts; h++) {
            if (rate[h] <= 0)
                continue;
            double w = lat[h] + (double)(count[h] + 1) / rate[h];
            if (best < 0 || w < when) {
                best = h;
                when = w;
            }
        }
        if (best < 0)
            best = 0;
        uint64_t add = best == 0 && rate[0] <= 0 ? n - given : 1;
        count[best] += add;
        given += add;
    }
}

uint64_t pm__grant_by_cost(double mine, double theirs, double lat, uint64_t left)
{
    if (theirs <= 0 || left == 0)
        return 0;
    if (mine <= 0)
        return left;
    /* lat + k / theirs <= (left - k) / mine */
    double k = ((double)left / mine - lat) / (1.0 / theirs + 1.0 / mine);
    if (!(k >= 1))
        return 0;
    return k >= (double)left ? left : (uint64_t)k;
}

/* The union of the bytes chunk c reads (rd) and writes (wr), per memory. */
static int chunk_sets(const pm__task_t *t, uint64_t c, pm__acc_t *rd, pm__acc_t *wr)
{
    const pm__chunk_subs_t *cs = &t->chunk_subs[c];
    int rc = 0;
    for (uint32_t i = 0; cs->recs != NULL && i < cs->n && rc == 0; i++) {
        const pm__sub_t *r = &cs->recs[i];
        /* A shared memory's bytes do not move: the other hosts map them. */
        bool shared = t->mems[r->mem] != NULL && t->mems[r->mem]->shared;
        if ((r->access & PM_READ) && !shared)
            rc = pm__acc_apply_rows(&rd[r->mem], r->offset, r->block, r->stride, r->count, true);
        /* What a lazy memory's chunk writes stays where it ran (data/data.c). */
        bool stays = t->mems[r->mem] != NULL && (t->mems[r->mem]->lazy || shared) &&
                     t->desc.mem[r->mem].reduce == PM_REDUCE_NONE;
        if (rc == 0 && (r->access & PM_WRITE) && !stays)
            rc = pm__acc_apply_rows(&wr[r->mem], r->offset, r->block, r->stride, r->count, true);
    }
    return rc;
}

static double set_bytes(const pm__acc_t *a)
{
    double n = 0;
    for (uint32_t i = 0; i < a->ncov; i++)
        n += (double)(a->cov[i].hi - a->cov[i].lo);
    return n;
}

/* The bytes of the union of two sets, by one merge of their sorted lists
 * (adding one set's ranges to the other one by one moved the rest of the
 * list each time: 6 ms for the 4096 rows of a 2-D FFT's column blocks). */
static double union_bytes(const pm__acc_t *a, const pm__acc_t *b)
{
    double n = 0;
    uint32_t i = 0, j = 0;
    uint64_t lo = 0, hi = 0;
    bool open = false;
    while (i < a->ncov || j < b->ncov) {
        const pm__range_t *r =
            j >= b->ncov || (i < a->ncov && a->cov[i].lo <= b->cov[j].lo) ? &a->cov[i++] : &b->cov[j++];
        if (open && r->lo <= hi) {
            if (r->hi > hi)
                hi = r->hi;
            continue;
        }
        if (open)
            n += (double)(hi - lo);
        lo = r->lo;
        hi = r->hi;
        open = true;
    }
    return open ? n + (double)(hi - lo) : n;
}

void pm__chunk_bytes(const pm__task_t *t, pm__chunk_bytes_t *b)
{
    *b = (pm__chunk_bytes_t){0, 0, 0};
    if (t->chunk_subs == NULL || t->nchunks == 0)
        return;
    pm__acc_t rd[PM_MAX_TASK_MEMORIES] = {0}, wr[PM_MAX_TASK_MEMORIES] = {0};
    uint64_t last = t->nchunks - 1;
    double in0 = 0, in1 = 0, out0 = 0, out1 = 0, both = 0;
    int rc = chunk_sets(t, 0, rd, wr);
    for (int m = 0; m < t->desc.nmem; m++) {
        in0 += set_bytes(&rd[m]);
        out0 += set_bytes(&wr[m]);
        pm__acc_free(&wr[m]);
    }
    if (rc == 0 && last > 0) {
        /* Read by both ends: |A| + |B| - |A u B|. */
        pm__acc_t rd1[PM_MAX_TASK_MEMORIES] = {0};
        rc = chunk_sets(t, last, rd1, wr);
        for (int m = 0; m < t->desc.nmem && rc == 0; m++) {
            double a = set_bytes(&rd[m]), b1 = set_bytes(&rd1[m]);
            in1 += b1;
            out1 += set_bytes(&wr[m]);
            double u = union_bytes(&rd[m], &rd1[m]);
            if (a + b1 > u)
                both += a + b1 - u;
        }
        for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++)
            pm__acc_free(&rd1[m]);
    } else {
        in1 = in0;
        out1 = out0;
    }
    for (int m = 0; m < PM_MAX_TASK_MEMORIES; m++) {
        pm__acc_free(&rd[m]);
        pm__acc_free(&wr[m]);
    }
    if (rc != 0)
        return; /* out of memory: nothing known, no cost assumed */
    /* Per chunk, by the chunk's share of the subtasks (the last may be short). */
    uint64_t f, l0, l1, l2;
    pm__chunk_span(t, 0, &f, &l0);
    pm__chunk_span(t, last, &l1, &l2);
    double s0 = (double)(l0 - f), s1 = (double)(l2 - l1) > 0 ? (double)(l2 - l1) : 1;
    double per_in = ((in0 - both) / s0 + (in1 - both) / s1) / 2 * (double)t->grain;
    double per_out = (out0 / s0 + out1 / s1) / 2 * (double)t->grain;
    b->common = both;
    b->in = per_in > 0 ? per_in : 0;
    b->out = per_out;
}

/* ---- placing a task among the hosts -------------------------------------- */

/* Host 0 splits the chunks among hosts in contiguous shares by weight. */
static int split_hosts(pm__task_t *t)
{
    int n = pm__rt.nhosts;
    t->host_lo = calloc((size_t)n, sizeof *t->host_lo);
    t->host_hi = calloc((size_t)n, sizeof *t->host_hi);
    t->host_fed = calloc((size_t)n, sizeof *t->host_fed);
    t->host_busy = calloc((size_t)n, sizeof *t->host_busy);
    t->host_run = calloc((size_t)n, sizeof *t->host_run);
    if (t->host_lo == NULL || t->host_hi == NULL || t->host_fed == NULL || t->host_busy == NULL ||
        t->host_run == NULL)
        return PM_ENOMEM;
    double total = 0, acc = 0;
    for (int h = 0; h < n; h++)
        total += pm__host_weight(t, h);
    uint64_t lo = 0;
    for (int h = 0; h < n; h++) {
        acc += pm__host_weight(t, h);
        uint64_t hi = (uint64_t)((double)t->nchunks * (acc / total) + 0.5);
        if (hi > t->nchunks || h == n - 1)
            hi = t->nchunks;
        if (pm__host_weight(t, h) <= 0)
            hi = lo;
        t->host_lo[h] = lo;
        t->host_hi[h] = hi;
        t->host_fed[h] = hi > lo;
        lo = hi;
    }
    t->lo = t->host_lo[0];
    t->hi = t->host_hi[0];
    return 0;
}

/* Chunks per second host h runs, by the performance model, when its
 * devices alike are taken to be as fast as this host's (0: unknown). */
static double host_rate(pm__task_t *t, int h)
{
    const double per = (double)t->grain * 1e-9;
    double rate = 0;
    if (pm__cpu_eligible(t) && pm__hosts[h].ncpu > 0) {
        double ns = pm__model_ns_named(t->cbs->model, PM_DEVICE_CPU, NULL);
        if (ns <= 0)
            return 0;
        rate += pm__hosts[h].ncpu / (ns * per);
    }
    for (int g = 0; g < pm__hosts[h].ngpu && g < PM__MAX_GPUS; g++) {
        const pm__gpu_desc_t *d = &pm__hosts[h].gpu[g];
        if (!pm__gpu_eligible(t, d->major, d->minor))
            continue;
        double ns = pm__model_ns_named(t->cbs->model, PM_DEVICE_GPU, d->name);
        if (ns <= 0)
            return 0;
        rate += 1 / (ns * per);
    }
    return rate;
}

/* Speeds unknown but data to move: another host first gets one chunk per
 * stub that may run the task (it may be slower than its data costs, or far
 * faster); by the speeds measured on those, host 0 grants it more when it
 * asks. Host 0 keeps the rest. */
static void probe_split(pm__task_t *t)
{
    if (pm__host_weight(t, 0) <= 0)
        return; /* host 0 may not run it: the shares by stubs stand */
    uint64_t away = 0;
    for (int h = 1; h < pm__rt.nhosts; h++) {
        uint64_t want = (uint64_t)pm__host_weight(t, h), had = t->host_hi[h] - t->host_lo[h];
        away += want < had ? want : had;
    }
    uint64_t lo = t->nchunks - away; /* the stub shares held at least this many */
    t->host_lo[0] = 0;
    t->host_hi[0] = lo;
    t->host_fed[0] = lo > 0;
    for (int h = 1; h < pm__rt.nhosts; h++) {
        uint64_t want = (uint64_t)pm__host_weight(t, h), had = t->host_hi[h] - t->host_lo[h];
        uint64_t k = want < had ? want : had;
        t->host_lo[h] = lo;
        t->host_hi[h] = lo += k;
        t->host_fed[h] = k > 0;
    }
    pm__debug("task %llu: speeds not known yet: %llu of %llu chunks stay on host 0, one per stub elsewhere",
              (unsigned long long)t->seq, (unsigned long long)t->host_hi[0], (unsigned long long)t->nchunks);
}

/*
 * Host 0, as a pull task starts (its subscriptions known): the shares by
 * cost. A host runs its k chunks in lat + k / rate seconds, where lat is
 * moving the bytes every chunk reads and one chunk's own there and back,
 * and rate the slower of its devices' speed and the link's chunks per
 * second. While the model does not yet know every host's devices for these
 * callbacks, a probe split (or, with no data to move, the split by stubs),
 * and stealing, which weighs the same costs with measured speeds.
 */
static void split_hosts_by_cost(pm__task_t *t)
{
    int n = pm__rt.nhosts;
    double few_l[16] = {0}, few_r[16] = {0};
    uint64_t few_c[16];
    double *lat = n <= 16 ? few_l : malloc((size_t)n * sizeof *lat);
    double *rate = n <= 16 ? few_r : malloc((size_t)n * sizeof *rate);
    uint64_t *count = n <= 16 ? few_c : malloc((size_t)n * sizeof *count);
    if (lat == NULL || rate == NULL || count == NULL)
        goto out;
    pm__chunk_bytes_t cb;
    pm__chunk_bytes(t, &cb);
    t->xfer_common = cb.common;
    t->xfer_in = cb.in;
    t->xfer_out = cb.out;
    bool known = true;
    for (int h = 0; h < n; h++) {
        rate[h] = pm__host_weight(t, h) > 0 ? host_rate(t, h) : 0;
        known &= pm__host_weight(t, h) <= 0 || rate[h] > 0;
        t->host_run[h].chunk_s = rate[h] > 0 ? 1 / rate[h] : 0;
    }
    if (!known) {
        if (cb.common + cb.in + cb.out > 0)
            probe_split(t);
        goto out;
    }
    /* Each host starts once the work placed on it before is done: tasks
     * that run at once (independent ones, or one chunk each) spread over
     * the hosts instead of queueing on host 0. */
    lat[0] = pm__hosts_backlog(0);
    for (int h = 1; h < n; h++) {
        t->host_run[h].after = pm__hosts_backlog(h);
        lat[h] = pm__hosts_cost(t, h, false, &rate[h]) + t->host_run[h].after;
    }
    pm__split_by_cost(n, lat, rate, t->nchunks, count);
    t->hosts_by_cost = true;
    uint64_t lo = 0;
    for (int h = 0; h < n; h++) {
        /* A host given a share again after tasks without one was idle: its
         * report is measured as a probe's is. */
        t->host_fed[h] = count[h] == 0 ? 0 : h > 0 && h < nhc && hc[h].left_out > 0 ? 6 : 1;
        /* A host left out for long gets a chunk now and then, so that an
         * overhead measured in a bad moment does not keep it out for good. */
        if (h > 0 && rate[h] > 0 && pm__hosts_probe_due(h, count[h] > 0) && count[0] > 0) {
            count[0]--;
            count[h] = 1;
            t->host_fed[h] = 4;
        }
    }
    /* Host 0 idle and keeping no more chunks than its stubs take at once:
     * none will be left when another host runs dry, so it says so with
     * the task, and that host ends its share without asking (a round
     * trip between hosts per task, before the task could end). */
    t->no_grants = lat[0] <= 0 && (double)count[0] <= pm__host_weight(t, 0);
    for (int h = 0; h < n; h++) {
        t->host_lo[h] = lo;
        t->host_hi[h] = lo += count[h];
        t->host_busy[h] = count[h] > 0 && rate[h] > 0 ? (double)count[h] / rate[h] : 0;
        pm__hosts_backlog_add(h, t->host_busy[h]);
    }
    pm__debug("task %llu: %llu of %llu chunks stay on host 0 (%.3g bytes per chunk, %.3g read by all; "
              "host 0 busy %.3g s, host 1 %.3g s away)", (unsigned long long)t->seq, (unsigned long long)count[0],
              (unsigned long long)t->nchunks, cb.in + cb.out, cb.common, lat[0], lat[1]);
out:
    if (t->host_lo[0] != t->lo || t->host_hi[0] != t->hi) {
        t->policy->fini(t);
        t->lo = t->host_lo[0];
        t->hi = t->host_hi[0];
        if (t->policy->init(t, pm__rt.nstubs) != 0) {
            pm__error("out of memory re-planning task %llu; aborting the job", (unsigned long long)t->seq);
            abort();
        }
    }
    if (lat != few_l)
        free(lat);
    if (rate != few_r)
        free(rate);
    if (count != few_c)
        free(count);
}

double pm__host_speed(pm__task_t *t, int h)
{
    return pm__host_weight(t, h) > 0 ? host_rate(t, h) : 0;
}


/* Host 0, a task ended: the work placed on each host is done, and what it
 * cost there is learned (pm__hosts_note_finish). */
static void release_task(pm__task_t *t)
{
    for (int h = 0; h < pm__rt.nhosts; h++) {
        pm__hosts_backlog_add(h, -t->host_busy[h]);
        t->host_busy[h] = 0;
    }
    if (t->host_run == NULL || t->status != 0 || !t->hosts_by_cost)
        return;
    double here = pm__stubs_rate(t, true), scale = 1;
    if (here > 0 && t->host_run[0].chunk_s > 0)
        scale = 1 / here / t->host_run[0].chunk_s;
    for (int h = 1; h < pm__rt.nhosts; h++) {
        pm__host_ran_t *r = &t->host_run[h];
        unsigned chunks = atomic_load(&r->chunks);
        if (chunks == 0 || r->chunk_s <= 0 || t->host_fed[h] == 3)
            continue;
        pm__hosts_note_finish(t, h, atomic_load(&r->last) - t->t_start - r->after, chunks, r->chunk_s * scale,
                              t->host_fed[h] == 5);
    }
}


void pm__hosts_hooks(void)
{
    pm__hooks.task_split = split_hosts;
    pm__hooks.task_place = split_hosts_by_cost;
    pm__hooks.task_released = release_task;
}
