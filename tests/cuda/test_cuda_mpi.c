/*
 * GPUs on several hosts: run under mpiexec (each rank drives its share of
 * the node's GPUs). Proves that a GPU-only task spread over hosts writes
 * the serial result, that the read-only input stays cached on the GPUs of
 * every host (second task copies less, hits counted), that a sum reduce on
 * GPUs equals the CPU one bit for bit, and that a task co-scheduled on CPUs
 * and GPUs is right. With PMLIB_CHECK=1 the same tasks run checked, and
 * stray writes on the GPUs of both hosts fail a task with PM_ESTRAY. Host
 * 0 exits 0 only if all pass; exits 77 when no host 0 GPU exists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "pmlib.h"

static int failures;

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            failures++;                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                         \
            fputc('\n', stderr);                                  \
        }                                                         \
    } while (0)

static void slice_of(const pm_subtask_info_t *info, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = n * info->id / info->count;
    *hi = n * (info->id + 1) / info->count;
}

/* ---- out[i] = f(i) ---- */

static int fill_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    slice_of(info, n, &lo, &hi);
    return pm_subscribe(sub, 0, PM_WRITE, lo * 8, (hi - lo) * 8);
}

static int fill_cuda(const pm_subtask_info_t *info, void *stream)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    slice_of(info, n, &lo, &hi);
    return tk_fill_f(info->mem[0], lo, hi, stream);
}

/* Like fill_cuda, but each subtask but the last writes one element more. */
static int stray_cuda(const pm_subtask_info_t *info, void *stream)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    slice_of(info, n, &lo, &hi);
    return tk_fill_f(info->mem[0], lo, hi < n ? hi + 1 : hi, stream);
}

static int fill_cpu(const pm_subtask_info_t *info)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    double *out = info->mem[0];
    slice_of(info, n, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        out[i] = (double)i * 0.5 + 3.0;
    return 0;
}

/* ---- out[i] = 2 in[i] + in[7i mod n], every subtask reads all of in ---- */

static int combine_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    slice_of(info, n, &lo, &hi);
    int rc = pm_subscribe(sub, 0, PM_READ, 0, n * 8);
    return rc ? rc : pm_subscribe(sub, 1, PM_WRITE, lo * 8, (hi - lo) * 8);
}

static int combine_cuda(const pm_subtask_info_t *info, void *stream)
{
    uint64_t lo, hi, n = *(const uint64_t *)info->conf;
    slice_of(info, n, &lo, &hi);
    return tk_combine(info->mem[1], info->mem[0], n, lo, hi, stream);
}

/* ---- sum reduce: every subtask adds into s[lo, hi) ---- */

#define RN 4096

static void range_of(uint64_t id, uint64_t *lo, uint64_t *hi)
{
    *lo = (id * 389) % (RN / 2);
    *hi = *lo + RN / 2 - (id % 5) * 64;
}

static int sum_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    uint64_t lo, hi;
    range_of(info->id, &lo, &hi);
    return pm_subscribe(sub, 0, PM_WRITE, lo * 8, (hi - lo) * 8);
}

static int sum_cuda(const pm_subtask_info_t *info, void *stream)
{
    uint64_t lo, hi;
    range_of(info->id, &lo, &hi);
    return tk_contrib(info->mem[0], NULL, NULL, lo, hi, info->id, stream);
}

static int sum_cpu(const pm_subtask_info_t *info)
{
    uint64_t lo, hi;
    int64_t *s = info->mem[0];
    range_of(info->id, &lo, &hi);
    for (uint64_t j = lo; j < hi; j++)
        s[j] += (int64_t)(info->id * 1000003u + j * 7919u) - 5000000;
    return 0;
}

static void reg(const char *name, pm_subscribe_fn sub, pm_cpu_fn cpu, pm_cuda_fn cuda)
{
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = sub;
    cb.cpu = cpu;
    cb.cuda = cuda;
    if (pm_callbacks_register(name, &cb) != 0)
        exit(1);
}

static pm_task_stats_t run(const char *name, int devices, uint64_t subtasks, uint64_t *conf,
                           int nmem, const pm_memory_t *mem, const pm_access_t *acc, int reduce)
{
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    memset(&st, 0, sizeof st);
    pm_task_desc_init(&d);
    d.callbacks = name;
    d.subtasks = subtasks;
    d.devices = devices;
    if (conf) {
        d.conf = conf;
        d.conf_bytes = sizeof *conf;
    }
    for (int i = 0; i < nmem; i++)
        pm_task_desc_add(&d, mem[i], acc[i]);
    if (reduce)
        pm_task_desc_reduce(&d, 0, PM_REDUCE_SUM, PM_INT64);
    int rc = pm_task_submit(&d, &t);
    CHECK(rc == 0, "%s: submit: %s", name, pm_strerror(rc));
    if (rc == 0) {
        rc = pm_task_wait(t);
        CHECK(rc == 0, "%s: wait: %s", name, pm_strerror(rc));
        pm_task_stats(t, &st);
        pm_task_release(t);
    }
    return st;
}

static void test_fill(int devices)
{
    uint64_t n = 1 << 20;
    pm_memory_t m;
    pm_memory_create(n * 8, &m);
    memset(pm_memory_data(m), 0xA5, n * 8);
    pm_access_t a = PM_WRITE;
    pm_task_stats_t st = run("fill", devices, 64, &n, 1, &m, &a, 0);
    const double *out = pm_memory_data(m);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += out[i] != (double)i * 0.5 + 3.0;
    CHECK(bad == 0, "fill (devices %d): %llu wrong elements", devices, (unsigned long long)bad);
    if (devices == PM_DEVICE_GPU)
        CHECK(st.subtasks_gpu == 64, "fill on GPUs ran %llu subtasks on GPUs",
              (unsigned long long)st.subtasks_gpu);
    printf("fill devices=%d: gpu=%llu cpu=%llu remote=%llu\n", devices,
           (unsigned long long)st.subtasks_gpu, (unsigned long long)st.subtasks_cpu,
           (unsigned long long)st.subtasks_remote);
    pm_memory_release(m);
}

static void test_cache(void)
{
    uint64_t n = 1 << 20;
    pm_memory_t mem[2];
    pm_memory_create(n * 8, &mem[0]);
    pm_memory_create(n * 8, &mem[1]);
    double *in = pm_memory_data(mem[0]);
    for (uint64_t i = 0; i < n; i++)
        in[i] = (double)(i % 1000) * 0.25;
    pm_memory_touch(mem[0]);
    pm_access_t a[2] = {PM_READ, PM_WRITE};
    pm_task_stats_t s1 = run("combine", PM_DEVICE_GPU, 32, &n, 2, mem, a, 0);
    pm_task_stats_t s2 = run("combine", PM_DEVICE_GPU, 32, &n, 2, mem, a, 0);
    const double *out = pm_memory_data(mem[1]);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += out[i] != 2.0 * in[i] + in[(i * 7) % n];
    CHECK(bad == 0, "combine: %llu wrong elements", (unsigned long long)bad);
    CHECK(s2.bytes_to_gpu < s1.bytes_to_gpu, "second task copied %llu bytes to GPUs, first %llu",
          (unsigned long long)s2.bytes_to_gpu, (unsigned long long)s1.bytes_to_gpu);
    CHECK(s2.gpu_cache_hits > 0, "second task: no GPU cache hits");
    printf("cache: to_gpu %llu then %llu bytes, hits %llu\n", (unsigned long long)s1.bytes_to_gpu,
           (unsigned long long)s2.bytes_to_gpu, (unsigned long long)s2.gpu_cache_hits);
    pm_memory_release(mem[0]);
    pm_memory_release(mem[1]);
}

/* Steps out = 2 in + in[7i mod n], the two memories swapping roles; host
 * 0 rewrites the first between steps 3 and 4. */
static void test_steps(void)
{
    enum { STEPS = 6 };
    uint64_t n = 1 << 20;
    pm_memory_t mem[2];
    pm_memory_create(n * 8, &mem[0]);
    pm_memory_create(n * 8, &mem[1]);
    double *ref[2] = {malloc(n * 8), malloc(n * 8)}, *a = pm_memory_data(mem[0]);
    CHECK(ref[0] != NULL && ref[1] != NULL, "steps: out of memory");
    if (ref[0] == NULL || ref[1] == NULL)
        goto out;
    for (uint64_t i = 0; i < n; i++)
        ref[0][i] = a[i] = (double)(i % 1000) * 0.25;
    pm_memory_touch(mem[0]);
    uint64_t gpu_gpu = 0, remote = 0;
    for (int s = 0; s < STEPS; s++) {
        int from = s % 2, to = 1 - from;
        if (s == 4) { /* host 0 writes the input the GPUs hold from step 2 */
            for (uint64_t i = 0; i < n; i++)
                ref[0][i] = a[i] = (double)(i % 77) - 3.0;
            pm_memory_touch(mem[0]);
        }
        pm_memory_t m2[2] = {mem[from], mem[to]};
        pm_access_t acc[2] = {PM_READ, PM_WRITE};
        pm_task_stats_t st = run("combine", PM_DEVICE_GPU, 32, &n, 2, m2, acc, 0);
        gpu_gpu += st.bytes_gpu_peer;
        remote += st.subtasks_remote;
        for (uint64_t i = 0; i < n; i++)
            ref[to][i] = 2.0 * ref[from][i] + ref[from][(i * 7) % n];
        const double *out = pm_memory_data(mem[to]);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < n; i++)
            bad += out[i] != ref[to][i];
        CHECK(bad == 0, "steps: step %d, %llu wrong elements", s, (unsigned long long)bad);
    }
    printf("steps: %llu subtasks on other hosts, %.1f MB copied GPU to GPU\n",
           (unsigned long long)remote, (double)gpu_gpu / 1e6);
out:
    free(ref[0]);
    free(ref[1]);
    pm_memory_release(mem[0]);
    pm_memory_release(mem[1]);
}

static void test_reduce(void)
{
    pm_memory_t g, c;
    pm_memory_create(RN * 8, &g);
    pm_memory_create(RN * 8, &c);
    pm_access_t a = PM_WRITE;
    run("sum", PM_DEVICE_GPU, 101, NULL, 1, &g, &a, 1);
    run("sum", PM_DEVICE_CPU, 101, NULL, 1, &c, &a, 1);
    CHECK(memcmp(pm_memory_data(g), pm_memory_data(c), RN * 8) == 0,
          "sum reduce on GPUs differs from the CPU one");
    pm_memory_release(g);
    pm_memory_release(c);
}

/* PMLIB_CHECK=1: stray writes on the GPUs of every host fail the task,
 * and the stray bytes reach no memory. */
static void test_stray(void)
{
    uint64_t n = 1 << 16;
    pm_memory_t m;
    pm_memory_create(n * 8, &m);
    pm_task_desc_t d;
    pm_task_t t;
    pm_task_stats_t st;
    pm_task_desc_init(&d);
    d.callbacks = "stray";
    d.subtasks = 64;
    d.devices = PM_DEVICE_GPU;
    d.conf = &n;
    d.conf_bytes = sizeof n;
    pm_task_desc_add(&d, m, PM_WRITE);
    CHECK(pm_task_submit(&d, &t) == 0, "stray: submit failed");
    int rc = pm_task_wait(t);
    pm_task_stats(t, &st);
    pm_task_release(t);
    CHECK(rc == PM_ESTRAY, "stray: the task returned %s, not PM_ESTRAY", pm_errname(rc));
    CHECK(st.subtasks_remote > 0, "stray: no subtask ran on another host");
    const double *out = pm_memory_data(m);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += out[i] != (double)i * 0.5 + 3.0;
    CHECK(bad == 0, "stray: %llu wrong elements", (unsigned long long)bad);
    printf("stray writes: %s, first failing subtask %llu on host %d, %llu subtasks elsewhere\n",
           pm_errname(rc), (unsigned long long)st.failed_subtask, st.failed_host,
           (unsigned long long)st.subtasks_remote);
    pm_memory_release(m);
}

int main(int argc, char **argv)
{
    const char *check = getenv("PMLIB_CHECK");
    const int checking = check != NULL && strcmp(check, "1") == 0;
    if (pm_init(&argc, &argv) != 0)
        return 1;
    reg("fill", fill_subscribe, fill_cpu, fill_cuda);
    reg("combine", combine_subscribe, NULL, combine_cuda);
    reg("sum", sum_subscribe, sum_cpu, sum_cuda);
    reg("stray", fill_subscribe, NULL, stray_cuda);
    if (pm_host_id() != 0) { /* the stray task's failure is reported on every host */
        int rc = pm_finalize();
        return rc == 0 || (checking && rc == PM_ESTRAY) ? 0 : 1;
    }
    int ngpu = 0;
    pm_device_count(PM_DEVICE_GPU, &ngpu);
    if (ngpu == 0) {
        printf("host 0 has no GPU: skipped\n");
        pm_finalize();
        return 77;
    }
    test_fill(PM_DEVICE_GPU);
    test_fill(PM_DEVICE_ANY);
    if (checking) /* the checking mode keeps no GPU cache */
        test_stray();
    else
        test_cache();
    test_steps();
    test_reduce();
    printf("%s on %d hosts\n", failures ? "FAILED" : "all passed", pm_host_count());
    pm_finalize();
    return failures ? 1 : 0;
}
