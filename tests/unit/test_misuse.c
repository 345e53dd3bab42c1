/*
 * Proves that misuse is refused with a code and one line saying why:
 * - more than 2^62 subtasks: PM_ERANGE at submit; a grain of UINT64_MAX
 *   runs each of 10 subtasks once;
 * - pm_task_wait, pm_task_wait_all and pm_finalize from a cpu callback:
 *   PM_EDEADLK; with one stub, a callback that submits a task and waits for
 *   it gets PM_EDEADLK instead of hanging, and both tasks complete;
 * - a device filter that changes its mind after its first answer is asked
 *   once per task and cannot strand the task;
 * - pm_task_release of a task another thread waits on, and pm_finalize
 *   while another thread waits: PM_EBUSY, then both work once the waiter
 *   returned; the same after threads that made calls came and went;
 * - pm_init from two threads at once: one succeeds, the other gets
 *   PM_EINIT; pm_init twice: PM_EINIT; pm_finalize twice, and calls before
 *   pm_init: PM_ENOTINIT.
 *
 * The lines pmlib writes to stderr are captured in a temporary file and
 * checked. Tests wait on gates and on threads, never on durations.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Capturing stderr                                                          */
/* ------------------------------------------------------------------------ */

typedef struct capture {
    FILE *file;
    int saved_fd;
    char text[8192];
} capture_t;

static void capture_start(capture_t *c)
{
    fflush(stderr);
    c->file = tmpfile();
    ck_assert_ptr_nonnull(c->file);
    c->saved_fd = dup(STDERR_FILENO);
    ck_assert_int_ge(c->saved_fd, 0);
    ck_assert_int_eq(dup2(fileno(c->file), STDERR_FILENO), STDERR_FILENO);
}

/* Restores stderr, reads what was written meanwhile and shows it again. */
static const char *capture_end(capture_t *c)
{
    size_t n;

    fflush(stderr);
    ck_assert_int_eq(dup2(c->saved_fd, STDERR_FILENO), STDERR_FILENO);
    close(c->saved_fd);
    rewind(c->file);
    n = fread(c->text, 1, sizeof(c->text) - 1, c->file);
    c->text[n] = '\0';
    fclose(c->file);
    fputs(c->text, stderr);
    return c->text;
}

/* Lines of `text` that contain `needle`. */
static int lines_with(const char *text, const char *needle)
{
    int count = 0;

    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *hit = strstr(line, needle);

        count += hit != NULL && hit + strlen(needle) <= line + len;
        line += len + (end != NULL);
    }
    return count;
}

/* The captured text holds exactly one error line, and it mentions `what`. */
static void expect_one_error(const char *text, const char *what)
{
    ck_assert_msg(lines_with(text, "error: ") == 1, "want one error line, got:\n%s", text);
    ck_assert_msg(lines_with(text, what) == 1, "no line mentions '%s' in:\n%s", what, text);
    ck_assert_msg(lines_with(text, "error: ") == lines_with(text, "pmlib[0]: error: "),
                  "error line without the host prefix:\n%s", text);
}

/* ------------------------------------------------------------------------ */
/* Subtask counts and grain                                                  */
/* ------------------------------------------------------------------------ */

#define COUNT_MAX 16
static atomic_int runs[COUNT_MAX];

static int count_cpu(const pm_subtask_info_t *info)
{
    tu_note(info->id >= COUNT_MAX);
    if (info->id < COUNT_MAX)
        atomic_fetch_add(&runs[info->id], 1);
    return 0;
}

static const uint64_t too_many[] = {UINT64_MAX, (1ull << 62) + 1, 1ull << 63};

START_TEST(test_subtasks_over_2_62)
{
    pm_task_desc_t desc;
    pm_task_t t = {12345};
    capture_t cap;
    const char *text;
    int rc;

    tu_register("count", NULL, count_cpu);
    tu_desc(&desc, "count", too_many[_i]);
    capture_start(&cap);
    rc = pm_task_submit(&desc, &t);
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_ERANGE);
    ck_assert_uint_eq(t.id, 0);
    expect_one_error(text, "at most 2^62 subtasks");
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
}
END_TEST

START_TEST(test_grain_uint64_max)
{
    pm_task_desc_t desc;
    pm_task_stats_t st;
    pm_task_t t;

    for (int i = 0; i < COUNT_MAX; i++)
        atomic_store(&runs[i], 0);
    tu_register("count", NULL, count_cpu);
    tu_desc(&desc, "count", 10);
    desc.grain = UINT64_MAX;
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* runs are counted */
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_stats(t, &st), PM_OK);
    ck_assert_int_eq(st.status, 0);
    ck_assert_uint_eq(st.subtasks, 10);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    for (int i = 0; i < COUNT_MAX; i++)
        ck_assert_int_eq(atomic_load(&runs[i]), i < 10 ? 1 : 0);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Blocking calls from callbacks                                             */
/* ------------------------------------------------------------------------ */

enum blocking_call { CALL_WAIT, CALL_WAIT_ALL, CALL_FINALIZE };

typedef struct blocking_conf {
    int call;
    pm_task_t other; /* for CALL_WAIT: a task that has finished */
} blocking_conf_t;

static atomic_int callback_rc;

static int blocking_cpu(const pm_subtask_info_t *info)
{
    blocking_conf_t c;
    int rc;

    memcpy(&c, info->conf, sizeof c);
    rc = c.call == CALL_WAIT       ? pm_task_wait(c.other)
         : c.call == CALL_WAIT_ALL ? pm_task_wait_all()
                                   : pm_finalize();
    atomic_store(&callback_rc, rc);
    return 0;
}

static const char *const call_names[] = {"pm_task_wait", "pm_task_wait_all", "pm_finalize"};

START_TEST(test_blocking_from_callback)
{
    blocking_conf_t c = {_i, PM_TASK_NULL};
    pm_task_desc_t desc;
    pm_task_t t;
    capture_t cap;
    const char *text;
    char what[64];
    int rc;

    tu_register("count", NULL, count_cpu);
    tu_register("blocking", NULL, blocking_cpu);
    /* A finished task to wait for: the call would not even block. */
    tu_desc(&desc, "count", 1);
    ck_assert_int_eq(pm_task_submit(&desc, &c.other), PM_OK);
    ck_assert_int_eq(pm_task_wait(c.other), PM_OK);

    atomic_store(&callback_rc, 1);
    tu_desc(&desc, "blocking", 1);
    desc.conf = &c;
    desc.conf_bytes = sizeof c;
    /* Its error line is counted: no straggler copy may run it again (an
     * idle stub copies a chunk that has run 1 ms, as it may under a
     * sanitizer on a busy machine). */
    desc.flags = PM_TASK_NO_MULTI_ASSIGN;
    capture_start(&cap);
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    rc = pm_task_wait(t);
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_OK);
    ck_assert_int_eq(atomic_load(&callback_rc), PM_EDEADLK);
    snprintf(what, sizeof what, "%s called from a callback", call_names[_i]);
    expect_one_error(text, what);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(pm_task_release(c.other), PM_OK);
}
END_TEST

/* With one stub: the outer callback submits an inner task, which cannot
 * start before the outer one ends, and then waits for it. */
static _Atomic uint64_t inner_id;
static atomic_int inner_submit_rc, inner_wait_rc;
static pm_memory_t inner_mem;

static int inner_cpu(const pm_subtask_info_t *info)
{
    ((uint64_t *)info->mem[0])[info->id] = 1000 + info->id;
    return 0;
}

static int outer_cpu(const pm_subtask_info_t *info)
{
    pm_task_desc_t desc;
    pm_task_t inner = PM_TASK_NULL;
    int rc;

    (void)info;
    pm_task_desc_init(&desc);
    desc.callbacks = "inner";
    desc.subtasks = 4;
    pm_task_desc_add(&desc, inner_mem, PM_WRITE);
    rc = pm_task_submit(&desc, &inner);
    atomic_store(&inner_submit_rc, rc);
    atomic_store(&inner_id, inner.id);
    if (rc == 0)
        atomic_store(&inner_wait_rc, pm_task_wait(inner));
    return 0;
}

static int inner_subscribe(pm_subscription_t *sub, const pm_subtask_info_t *info)
{
    return pm_subscribe(sub, 0, PM_WRITE, info->id * 8, 8);
}

START_TEST(test_wait_for_nested_task_one_stub)
{
    pm_task_desc_t desc;
    pm_task_t outer, inner;
    const uint64_t *p;
    capture_t cap;
    const char *text;
    int rc;

    inner_mem = tu_memory(4 * 8);
    p = pm_memory_data(inner_mem);
    tu_register("inner", inner_subscribe, inner_cpu);
    tu_register("outer", NULL, outer_cpu);
    atomic_store(&inner_submit_rc, 1);
    atomic_store(&inner_wait_rc, 1);
    tu_desc(&desc, "outer", 1);
    capture_start(&cap);
    ck_assert_int_eq(pm_task_submit(&desc, &outer), PM_OK);
    rc = pm_task_wait(outer);
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_OK);
    ck_assert_int_eq(atomic_load(&inner_submit_rc), PM_OK);
    ck_assert_int_eq(atomic_load(&inner_wait_rc), PM_EDEADLK);
    expect_one_error(text, "pm_task_wait called from a callback");

    inner.id = atomic_load(&inner_id);
    ck_assert_uint_ne(inner.id, 0);
    ck_assert_int_eq(pm_task_wait(inner), PM_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(p[i], 1000 + (uint64_t)i);
    ck_assert_int_eq(pm_task_release(inner), PM_OK);
    ck_assert_int_eq(pm_task_release(outer), PM_OK);
    ck_assert_int_eq(pm_task_wait_all(), PM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A device filter that changes its mind                                     */
/* ------------------------------------------------------------------------ */

static atomic_int filter_cpu_calls, filter_gpu_calls;

static int fickle_filter(pm_device_kind_t kind, int major, int minor, const void *conf,
                         size_t conf_bytes)
{
    (void)major;
    (void)minor;
    (void)conf;
    (void)conf_bytes;
    if (kind != PM_DEVICE_CPU) {
        atomic_fetch_add(&filter_gpu_calls, 1);
        return 0;
    }
    return atomic_fetch_add(&filter_cpu_calls, 1) == 0;
}

START_TEST(test_fickle_device_filter)
{
    const uint64_t n = COUNT_MAX;
    pm_callbacks_t cb;
    pm_task_desc_t desc;
    pm_task_t t;

    for (int i = 0; i < COUNT_MAX; i++)
        atomic_store(&runs[i], 0);
    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cpu = count_cpu;
    cb.device_filter = fickle_filter;
    ck_assert_int_eq(pm_callbacks_register("fickle", &cb), PM_OK);

    /* One chunk per subtask, so every stub looks for work many times. */
    tu_desc(&desc, "fickle", n);
    desc.grain = 1;
    desc.flags = PM_TASK_NO_MULTI_ASSIGN; /* runs are counted */
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_OK);
    ck_assert_int_eq(pm_task_wait(t), PM_OK);
    ck_assert_int_eq(pm_task_release(t), PM_OK);
    ck_assert_int_eq(atomic_load(&filter_cpu_calls), 1);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(atomic_load(&runs[i]), 1);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);

    /* Asked again for the next task, it refuses: no device may run it. */
    ck_assert_int_eq(pm_task_submit(&desc, &t), PM_ENODEVICE);
    ck_assert_int_eq(atomic_load(&filter_cpu_calls), 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Calls beside a thread that waits                                          */
/* ------------------------------------------------------------------------ */

static tu_gate_t gate;

static int gated_cpu(const pm_subtask_info_t *info)
{
    (void)info;
    tu_note(tu_gate_wait(&gate, 30.0) != 0);
    return 0;
}

typedef struct waiter {
    pthread_t thread;
    pm_task_t task;
    atomic_int tid;
    atomic_int rc;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;

    atomic_store(&w->tid, (int)syscall(SYS_gettid));
    atomic_store(&w->rc, pm_task_wait(w->task));
    return NULL;
}

/* The state letter of a thread of this process, '?' if unknown. */
static char thread_state(int tid)
{
    char path[64], buf[256], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    f = fopen(path, "r");
    if (f == NULL)
        return '?';
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : '?';
}

/* Starts a thread that waits for a gated task and returns once that thread
 * sleeps: the only place it can sleep is inside pm_task_wait. */
static void start_waiter(waiter_t *w)
{
    pm_task_desc_t desc;
    double end;

    tu_gate_close(&gate);
    tu_register("gated", NULL, gated_cpu);
    tu_desc(&desc, "gated", 1);
    ck_assert_int_eq(pm_task_submit(&desc, &w->task), PM_OK);
    atomic_store(&w->tid, 0);
    atomic_store(&w->rc, 1);
    ck_assert_int_eq(pthread_create(&w->thread, NULL, waiter_main, w), 0);
    end = tu_now() + 30.0;
    while (atomic_load(&w->tid) == 0 || thread_state(atomic_load(&w->tid)) != 'S') {
        ck_assert_msg(tu_now() < end, "the waiting thread never blocked");
        tu_sleep_us(200);
    }
}

static void finish_waiter(waiter_t *w)
{
    tu_gate_open(&gate);
    ck_assert_int_eq(pthread_join(w->thread, NULL), 0);
    ck_assert_int_eq(atomic_load(&w->rc), PM_OK);
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
}

START_TEST(test_release_while_waited_on)
{
    waiter_t w;
    capture_t cap;
    const char *text;
    int rc;

    start_waiter(&w);
    capture_start(&cap);
    rc = pm_task_release(w.task);
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_EBUSY);
    expect_one_error(text, "pm_task_wait");
    finish_waiter(&w);
    ck_assert_int_eq(pm_task_release(w.task), PM_OK);
}
END_TEST

/* pm_finalize while another thread waits: PM_EBUSY and one line holding
 * `what`; then the waiter gets its task's status and pm_finalize works. */
static void finalize_beside_waiter(const char *what)
{
    waiter_t w;
    capture_t cap;
    const char *text;
    int rc;

    start_waiter(&w);
    capture_start(&cap);
    rc = pm_finalize();
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_EBUSY);
    expect_one_error(text, what);
    /* pmlib still runs: the waiter gets its task's status. */
    finish_waiter(&w);
    ck_assert_int_eq(pm_task_release(w.task), PM_OK);
    ck_assert_int_eq(pm_finalize(), PM_OK);
}

START_TEST(test_finalize_while_waiting)
{
    finalize_beside_waiter("join those threads");
}
END_TEST

/* Public calls from threads that come and go: each thread counts its calls
 * on a line of its own, taken again by later threads; pm_finalize still
 * sees a thread inside a call on a line used before, and none after. */
static void *calls_main(void *arg)
{
    pm_memory_t m;

    (void)arg;
    for (int i = 0; i < 50; i++) {
        if (pm_memory_create(64, &m) != PM_OK || pm_memory_release(m) != PM_OK)
            atomic_fetch_add(&tu_callback_errors, 1);
    }
    return NULL;
}

START_TEST(test_finalize_after_threads)
{
    pthread_t th[8];

    for (int wave = 0; wave < 3; wave++) {
        for (int i = 0; i < 8; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, calls_main, NULL), 0);
        for (int i = 0; i < 8; i++)
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    }
    ck_assert_int_eq(atomic_load(&tu_callback_errors), 0);
    finalize_beside_waiter("1 other call(s)");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* pm_init and pm_finalize                                                   */
/* ------------------------------------------------------------------------ */

/* Under ThreadSanitizer this case reports races inside pmlib today: the
 * refused pm_init logs (pm__log_init, pm__rt.host) while the other one sets
 * the runtime up. */
static pthread_barrier_t init_barrier;

static void *init_main(void *arg)
{
    int *rc = arg;

    pthread_barrier_wait(&init_barrier);
    *rc = pm_init(NULL, NULL);
    return NULL;
}

START_TEST(test_init_from_two_threads)
{
    pthread_t th[2];
    int rc[2] = {1, 1};
    capture_t cap;
    const char *text;

    ck_assert_int_eq(setenv("PMLIB_NCPU", "2", 1), 0);
    ck_assert_int_eq(pthread_barrier_init(&init_barrier, NULL, 2), 0);
    capture_start(&cap);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, init_main, &rc[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    text = capture_end(&cap);
    pthread_barrier_destroy(&init_barrier);
    ck_assert_msg((rc[0] == PM_OK && rc[1] == PM_EINIT) || (rc[0] == PM_EINIT && rc[1] == PM_OK),
                  "pm_init returned %d and %d", rc[0], rc[1]);
    expect_one_error(text, "pm_init called");

    ck_assert_int_eq(pm_finalize(), PM_OK);
    capture_start(&cap);
    ck_assert_int_eq(pm_finalize(), PM_ENOTINIT);
    text = capture_end(&cap);
    expect_one_error(text, "pm_finalize called before pm_init");
}
END_TEST

START_TEST(test_init_twice)
{
    capture_t cap;
    const char *text;
    int rc;

    capture_start(&cap);
    rc = pm_init(NULL, NULL);
    text = capture_end(&cap);
    ck_assert_int_eq(rc, PM_EINIT);
    expect_one_error(text, "called twice");
    /* The first pm_init's runtime still works. */
    tu_register("count", NULL, count_cpu);
}
END_TEST

/* Each call needs the runtime; before pm_init (and after pm_finalize) it
 * returns PM_ENOTINIT and names itself. */
static void expect_not_init(int rc, const char *text, const char *call)
{
    char what[96];

    ck_assert_msg(rc == PM_ENOTINIT, "%s returned %d", call, rc);
    snprintf(what, sizeof what, "%s called before pm_init", call);
    expect_one_error(text, what);
}

#define EXPECT_NOT_INIT(call_expr, name)                                      \
    do {                                                                      \
        capture_t cap_;                                                       \
        int rc_;                                                              \
        capture_start(&cap_);                                                 \
        rc_ = (call_expr);                                                    \
        expect_not_init(rc_, capture_end(&cap_), name);                       \
    } while (0)

static void check_calls_refused(void)
{
    pm_task_desc_t desc;
    pm_callbacks_t cb;
    pm_memory_t m = PM_MEMORY_NULL;
    pm_task_t t = PM_TASK_NULL;
    int done = 0, count = 0;

    ck_assert_int_eq(pm_task_desc_init(&desc), PM_OK);
    desc.callbacks = "count";
    desc.subtasks = 1;
    ck_assert_int_eq(pm_callbacks_init(&cb), PM_OK);
    cb.cpu = count_cpu;
    EXPECT_NOT_INIT(pm_callbacks_register("count", &cb), "pm_callbacks_register");
    EXPECT_NOT_INIT(pm_memory_create(64, &m), "pm_memory_create");
    EXPECT_NOT_INIT(pm_task_submit(&desc, &t), "pm_task_submit");
    EXPECT_NOT_INIT(pm_task_test(t, &done), "pm_task_test");
    EXPECT_NOT_INIT(pm_task_wait(t), "pm_task_wait");
    EXPECT_NOT_INIT(pm_task_wait_all(), "pm_task_wait_all");
    EXPECT_NOT_INIT(pm_task_release(t), "pm_task_release");
    EXPECT_NOT_INIT(pm_device_count(PM_DEVICE_CPU, &count), "pm_device_count");
    EXPECT_NOT_INIT(pm_finalize(), "pm_finalize");
}

START_TEST(test_calls_before_init)
{
    check_calls_refused();
}
END_TEST

START_TEST(test_calls_after_finalize)
{
    tu_init_ncpu("2");
    ck_assert_int_eq(pm_finalize(), PM_OK);
    check_calls_refused();
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *misuse_suite(void)
{
    Suite *s = suite_create("misuse");
    TCase *limits = tcase_create("limits");
    TCase *blocking = tcase_create("blocking_in_callbacks");
    TCase *nested = tcase_create("nested_one_stub");
    TCase *threads = tcase_create("beside_a_waiter");
    TCase *fin = tcase_create("finalize_beside_a_waiter");
    TCase *life = tcase_create("lifecycle");
    TCase *twice = tcase_create("init_twice");

    tcase_add_checked_fixture(limits, tu_setup_ncpu4, tu_teardown);
    tcase_add_checked_fixture(blocking, tu_setup_ncpu4, tu_teardown);
    tcase_add_checked_fixture(nested, tu_setup_ncpu1, tu_teardown);
    tcase_add_checked_fixture(threads, tu_setup_ncpu4, tu_teardown);
    tcase_add_checked_fixture(fin, tu_setup_ncpu4, NULL);
    tcase_add_checked_fixture(twice, tu_setup_ncpu4, tu_teardown);

    tcase_add_loop_test(limits, test_subtasks_over_2_62, 0,
                        (int)(sizeof too_many / sizeof too_many[0]));
    tcase_add_test(limits, test_grain_uint64_max);
    tcase_add_test(limits, test_fickle_device_filter);
    tcase_add_loop_test(blocking, test_blocking_from_callback, CALL_WAIT, CALL_FINALIZE + 1);
    tcase_add_test(nested, test_wait_for_nested_task_one_stub);
    tcase_add_test(threads, test_release_while_waited_on);
    tcase_add_test(fin, test_finalize_while_waiting);
    tcase_add_test(fin, test_finalize_after_threads);
    tcase_add_test(life, test_init_from_two_threads);
    tcase_add_test(life, test_calls_before_init);
    tcase_add_test(life, test_calls_after_finalize);
    tcase_add_test(twice, test_init_twice);

    suite_add_tcase(s, limits);
    suite_add_tcase(s, blocking);
    suite_add_tcase(s, nested);
    suite_add_tcase(s, threads);
    suite_add_tcase(s, fin);
    suite_add_tcase(s, life);
    suite_add_tcase(s, twice);
    return s;
}

int main(void)
{
    return tu_run_suite(misuse_suite());
}
