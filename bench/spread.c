/*
 * How evenly the hosts share the traffic of an iterative task, with lazy
 * memories and without.
 *
 * The workload: two vectors A and B of WORDS 64-bit words; iteration k
 * reads all of the previous vector and each subtask writes its own
 * contiguous slice of the next one (A -> B, then B -> A):
 *
 *   next[i] = mix(prev[(7 i + k) % WORDS] ^ prev[(i + 1) % WORDS] ^ k)
 *
 * Subtasks are scheduled with the static equal policy, so each of H hosts
 * writes 1/H of every vector. Without lazy memories ("eager") the slices go
 * home after each iteration and every other host fetches the whole vector
 * from host 0, which sends H - 1 vectors per iteration: it is the hub of all
 * traffic. With lazy memories (the default) each host keeps its slices and
 * sends them to the others itself, so every host sends about the average,
 * (H - 1) / H of a vector.
 *
 * Run under mpiexec with any number of ranks; host 0 prints one header line
 * and one row per mode (lazy; eager with --eager; both with --both): hosts,
 * MB moved between hosts per iteration, MB sent by host 0, by the busiest
 * sender and received by the busiest receiver, the busiest host's bytes over
 * the average (bytes_moved / hosts), seconds per iteration, and for lazy
 * mode the seconds pm_memory_gather then takes to bring both vectors home.
 * Byte and time figures are means over the iterations after the first two.
 * Both vectors are then compared with a serial computation: "verify: ok",
 * or a mismatch and exit status 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "pmlib.h"

/* Iterations left out of the means: the first reads the input host 0 wrote
 * and the first two each write a vector no task has written yet. */
#define WARMUP 2

struct conf {
    uint64_t words, k;
};

enum { MEM_PREV, MEM_NEXT };

static uint64_t mix(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static uint64_t value(const uint64_t *prev, uint64_t n, uint64_t i, uint64_t k)
{
    return mix(prev[(i * 7 + k) % n] ^ prev[(i + 1) % n] ^ k);
}

static void slice_of(uint64_t id, uint64_t count, uint64_t n, uint64_t *lo, uint64_t *hi)
{
    *lo = id * n / count;
    *hi = (id + 1) * n / count;
}

static int subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    const struct conf *c = info->conf;
    uint64_t lo, hi;

    slice_of(info->id, info->count, c->words, &lo, &hi);
    int rc = pm_subscribe(sub, MEM_PREV, PM_READ, 0, c->words * 8);
    return rc ? rc : pm_subscribe(sub, MEM_NEXT, PM_WRITE, lo * 8, (hi - lo) * 8);
}

static int cpu(const pm_subtask_info_t *info)
{
    const struct conf *c = info->conf;
    const uint64_t *prev = info->mem[MEM_PREV];
    uint64_t *next = info->mem[MEM_NEXT], lo, hi;

    slice_of(info->id, info->count, c->words, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        next[i] = value(prev, c->words, i, c->k);
    return 0;
}

static void fill_input(uint64_t *a, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        a[i] = mix(i * 0x10001 + 17);
}

/* The serial computation: ref[b] is what memory b holds after `iters`. */
static void serial(uint64_t *ref[2], uint64_t n, uint64_t iters)
{
    fill_input(ref[0], n);
    for (uint64_t k = 0; k < iters; k++) {
        const uint64_t *prev = ref[k % 2];
        uint64_t *next = ref[(k + 1) % 2];
        for (uint64_t i = 0; i < n; i++)
            next[i] = value(prev, n, i, k);
    }
}

static int verify(const char *mode, pm_memory_t mem[2], uint64_t *ref[2], uint64_t n)
{
    for (int b = 0; b < 2; b++) {
        const uint64_t *m = pm_memory_data(mem[b]);
        if (m == NULL) {
            printf("verify: %s: vector %c has no data\n", mode, "AB"[b]);
            return 1;
        }
        for (uint64_t i = 0; i < n; i++)
            if (m[i] != ref[b][i]) {
                printf("verify: %s: vector %c word %llu is %016llx, want %016llx\n", mode,
                       "AB"[b], (unsigned long long)i, (unsigned long long)m[i],
                       (unsigned long long)ref[b][i]);
                return 1;
            }
    }
    return 0;
}

/* Runs one mode and prints its row; returns 0 when its vectors verify. */
static int run(int lazy, uint64_t words, uint64_t iters, uint64_t subtasks, uint64_t *ref[2])
{
    const char *mode = lazy ? "lazy" : "eager";
    int hosts = pm_host_count();
    pm_memory_t mem[2];

    for (int b = 0; b < 2; b++) {
        APP_CHECK(pm_memory_create(words * 8, &mem[b]));
        APP_CHECK(pm_memory_set_lazy(mem[b], lazy));
    }
    fill_input(pm_memory_data(mem[0]), words);
    APP_CHECK(pm_memory_touch(mem[0]));

    double moved = 0, home = 0, sent_max = 0, recv_max = 0, seconds = 0;
    for (uint64_t k = 0; k < iters; k++) {
        struct conf c = {words, k};
        pm_task_desc_t d;
        pm_task_t t;
        pm_task_stats_t st;

        pm_task_desc_init(&d);
        d.callbacks = "spread";
        d.subtasks = subtasks;
        d.conf = &c;
        d.conf_bytes = sizeof c;
        d.sched = PM_SCHED_STATIC_EQUAL;
        APP_CHECK(pm_task_desc_add(&d, mem[k % 2], PM_READ));
        APP_CHECK(pm_task_desc_add(&d, mem[(k + 1) % 2], PM_WRITE));
        double t0 = app_now();
        APP_CHECK(pm_task_submit(&d, &t));
        APP_CHECK(pm_task_wait(t));
        double t1 = app_now();
        memset(&st, 0, sizeof st);
        APP_CHECK(pm_task_stats(t, &st));
        APP_CHECK(pm_task_release(t));
        if (k < WARMUP)
            continue;
        moved += (double)st.bytes_moved;
        home += (double)st.bytes_home_sent;
        sent_max += (double)st.bytes_host_sent_max;
        recv_max += (double)st.bytes_host_received_max;
        seconds += t1 - t0;
    }
    double gather = app_now();
    for (int b = 0; b < 2; b++)
        APP_CHECK(pm_memory_gather(mem[b]));
    gather = app_now() - gather;

    double steady = (double)(iters - WARMUP), avg = moved / hosts;
    double busiest = sent_max > recv_max ? sent_max : recv_max;
    char ratio[32] = "-", gather_s[32] = "-";
    if (avg > 0)
        snprintf(ratio, sizeof ratio, "%.2f", busiest / avg);
    if (lazy)
        snprintf(gather_s, sizeof gather_s, "%.4f", gather);
    printf("%-5s %5d %13.3f %12.3f %13.3f %13.3f %11s %10.5f %9s\n", mode, hosts,
           moved / steady / 1e6, home / steady / 1e6, sent_max / steady / 1e6,
           recv_max / steady / 1e6, ratio, seconds / steady, gather_s);
    fflush(stdout);

    int bad = verify(mode, mem, ref, words);
    for (int b = 0; b < 2; b++)
        APP_CHECK(pm_memory_release(mem[b]));
    return bad;
}

int main(int argc, char **argv)
{
    uint64_t words = UINT64_C(1) << 20, iters = 10, subtasks = 0;
    int eager = 0, both = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: mpiexec -n H spread [--words N] [--iters K] [--subtasks S] "
                   "[--eager | --both]\n\n"
                   "An iterative task over two vectors of N 64-bit words (default 2^20): each\n"
                   "iteration reads all of one and writes the other, S subtasks (default 4 per\n"
                   "host, at least 8) on equal static shares. Prints, per iteration after the\n"
                   "first two (default 10 iterations): MB moved between hosts, MB sent by host 0,\n"
                   "by the busiest sender and received by the busiest receiver, the busiest over\n"
                   "the average (moved / hosts), seconds per iteration, and the seconds\n"
                   "pm_memory_gather takes afterwards. The vectors are lazy unless --eager;\n"
                   "--both runs lazy, then eager. Results are checked against a serial loop.\n");
            return 0;
        } else if (strcmp(argv[i], "--words") == 0 && i + 1 < argc) {
            words = app_size_arg("spread", "--words", argv[++i]);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = app_size_arg("spread", "--iters", argv[++i]);
        } else if (strcmp(argv[i], "--subtasks") == 0 && i + 1 < argc) {
            subtasks = app_size_arg("spread", "--subtasks", argv[++i]);
            if (subtasks == 0)
                app_usage_error("spread", "--subtasks must be at least 1");
        } else if (strcmp(argv[i], "--eager") == 0) {
            eager = 1;
        } else if (strcmp(argv[i], "--both") == 0) {
            both = 1;
        } else {
            app_usage_error("spread", "unknown argument '%s'", argv[i]);
        }
    }
    if (iters < WARMUP + 1)
        app_usage_error("spread", "--iters must be at least %d", WARMUP + 1);
    if (words < 1 || words > (UINT64_C(1) << 32))
        app_usage_error("spread", "--words must be 1 to 2^32");
    if (eager && both)
        app_usage_error("spread", "--eager and --both exclude each other");

    APP_CHECK(pm_init(&argc, &argv));
    pm_callbacks_t cb;
    pm_callbacks_init(&cb);
    cb.subscribe = subscribe;
    cb.cpu = cpu;
    APP_CHECK(pm_callbacks_register("spread", &cb));
    int bad = 0;
    if (pm_host_id() == 0) {
        int hosts = pm_host_count();
        if (subtasks == 0)
            subtasks = 4 * (uint64_t)hosts < 8 ? 8 : 4 * (uint64_t)hosts;
        if (subtasks > words) {
            fprintf(stderr, "spread: %llu subtasks for %llu words; use fewer subtasks\n",
                    (unsigned long long)subtasks, (unsigned long long)words);
            pm_finalize();
            return 2;
        }
        if (hosts < 2)
            fprintf(stderr, "spread: one host only; nothing moves (run under mpiexec -n 2 "
                            "or more)\n");
        uint64_t *ref[2] = {malloc(words * 8), malloc(words * 8)};
        if (ref[0] == NULL || ref[1] == NULL) {
            fprintf(stderr, "spread: out of memory for the serial vectors\n");
            pm_finalize();
            return 1;
        }
        serial(ref, words, iters);
        printf("# spread: %d hosts, %llu words (%.1f MB) per vector, %llu iterations of %llu "
               "subtasks; per iteration after the first %d\n",
               hosts, (unsigned long long)words, words * 8 / 1e6, (unsigned long long)iters,
               (unsigned long long)subtasks, WARMUP);
        printf("%-5s %5s %13s %12s %13s %13s %11s %10s %9s\n", "mode", "hosts", "moved_MB",
               "home_sent_MB", "max_sent_MB", "max_recv_MB", "busiest/avg", "s/iter",
               "gather_s");
        if (!eager)
            bad |= run(1, words, iters, subtasks, ref);
        if (eager || both)
            bad |= run(0, words, iters, subtasks, ref);
        printf(bad ? "verify: MISMATCH\n" : "verify: ok\n");
        fflush(stdout);
        free(ref[0]);
        free(ref[1]);
    }
    if (APP_CHECK(pm_finalize()) != 0)
        bad = 1;
    return bad ? 1 : 0;
}
