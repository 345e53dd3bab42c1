/*
 * montecarlo: prices European calls and puts by Monte Carlo simulation of
 * geometric Brownian motion, for many options generated from a seed.
 *
 * Each subtask prices a block of options. An option's random numbers
 * depend only on (seed, option index), so results do not depend on which
 * subtask or core ran it; the CPU uses its own counter-based generator and
 * the GPU cuRAND, so CPU and GPU prices differ, within Monte Carlo error.
 * --verify compares every price with the Black-Scholes formula.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strncasecmp */

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "montecarlo.h" /* struct mc_option, struct mc_price */
#include "pmlib.h"

#define DEFAULT_OPTIONS 1024u
#define DEFAULT_PATHS 262144u
#define VERIFY_OPTIONS 128u
#define VERIFY_PATHS 32768u
#define DEFAULT_SEED 2024u
#define Z_BOUND 4.0 /* standard errors a price may be from Black-Scholes */

/* splitmix64's output function: a strong 64-bit mix of a counter. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9E3779B97F4A7C15u /* splitmix64's counter increment */

/* Uniform in (0, 1]: never 0, so that log() stays finite. */
static double uniform(uint64_t key, uint64_t k)
{
    return (double)((mix64(key + k * GOLDEN) >> 11) + 1) * 0x1p-53;
}

/* Options with spot, moneyness, expiry, rate and volatility in ranges where
 * neither call nor put is so far out of the money that its error is odd. */
static void make_options(struct mc_option *opt, uint64_t count, uint64_t seed)
{
    for (uint64_t i = 0; i < count; i++) {
        uint64_t key = mix64(seed ^ mix64(i + 1));

        opt[i].s = 50.0 + 100.0 * uniform(key, 0);
        opt[i].k = opt[i].s * (0.8 + 0.45 * uniform(key, 1));
        opt[i].t = 0.5 + 1.5 * uniform(key, 2);
        opt[i].r = 0.06 * uniform(key, 3);
        opt[i].sigma = 0.2 + 0.3 * uniform(key, 4);
    }
}

/* Normals z[0], z[1]: Box-Muller on elements 2q, 2q + 1 of the stream. */
static void normal_pair(uint64_t key, uint64_t q, double z[2])
{
    double rad = sqrt(-2.0 * log(uniform(key, 2 * q)));
    double ang = 6.283185307179586 * uniform(key, 2 * q + 1);

    z[0] = rad * cos(ang);
    z[1] = rad * sin(ang);
}

/*
 * One option, the loop body shared by the serial reference and the CPU
 * callback. Its random numbers are a splitmix64 stream keyed by (seed,
 * option): element k is mix64(key + k GOLDEN).
 */
static struct mc_price price_option(const struct mc_option *op, uint64_t index,
                                    uint64_t paths, uint64_t seed)
{
    double drift = (op->r - 0.5 * op->sigma * op->sigma) * op->t;
    double vol = op->sigma * sqrt(op->t), disc = exp(-op->r * op->t);
    double sc = 0, sc2 = 0, sp = 0, sp2 = 0, n = (double)paths, z[2];
    uint64_t key = mix64(seed + GOLDEN * mix64(index + 1));

    for (uint64_t q = 0; q < paths; q++) {
        double st, c, p;

        if (q % 2 == 0)
            normal_pair(key, q / 2, z);
        st = op->s * exp(drift + vol * z[q % 2]);
        c = st > op->k ? st - op->k : 0;
        p = st < op->k ? op->k - st : 0;
        sc += c, sc2 += c * c, sp += p, sp2 += p * p;
    }
    /* fmax: rounding may leave a zero variance slightly negative. */
    return (struct mc_price){
        disc * sc / n, disc * sp / n,
        disc * sqrt(fmax(sc2 - sc * sc / n, 0) / (n - 1) / n),
        disc * sqrt(fmax(sp2 - sp * sp / n, 0) / (n - 1) / n)};
}

/* Serial reference. */
static void montecarlo_serial(const struct mc_option *opt,
                              struct mc_price *price, uint64_t count,
                              uint64_t paths, uint64_t seed)
{
    for (uint64_t i = 0; i < count; i++)
        price[i] = price_option(&opt[i], i, paths, seed);
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

struct montecarlo_conf {
    uint64_t count; /* options */
    uint64_t per;   /* options per subtask; the last may get fewer */
    uint64_t paths; /* per option */
    uint64_t seed;
};

enum { MEM_OPTIONS, MEM_PRICES };

static uint64_t subtask_count(const struct montecarlo_conf *cf)
{
    return (cf->count + cf->per - 1) / cf->per;
}

/* Subtask k owns options [begin, end). */
static void option_block(const struct montecarlo_conf *cf, uint64_t k,
                         uint64_t *begin, uint64_t *end)
{
    *begin = k * cf->per;
    *end = *begin + cf->per < cf->count ? *begin + cf->per : cf->count;
}

static int montecarlo_subscribe(pm_subscription_t *sub,
                                const pm_subtask_info_t *info)
{
    uint64_t begin, end;
    int rc;

    option_block(info->conf, info->id, &begin, &end);
    rc = pm_subscribe(sub, MEM_OPTIONS, PM_READ,
                      begin * sizeof(struct mc_option),
                      (end - begin) * sizeof(struct mc_option));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_PRICES, PM_WRITE,
                          begin * sizeof(struct mc_price),
                          (end - begin) * sizeof(struct mc_price));
    return rc;
}

static int montecarlo_cpu(const pm_subtask_info_t *info)
{
    const struct montecarlo_conf *cf = info->conf;
    const struct mc_option *opt = info->mem[MEM_OPTIONS];
    struct mc_price *price = info->mem[MEM_PRICES];
    uint64_t begin, end;

    option_block(cf, info->id, &begin, &end);
    for (uint64_t i = begin; i < end; i++)
        price[i] = price_option(&opt[i], i, cf->paths, cf->seed);
    return 0;
}

#if PMLIB_HAVE_CUDA
static int montecarlo_cuda(const pm_subtask_info_t *info, void *stream)
{
    const struct montecarlo_conf *cf = info->conf;
    uint64_t begin, end;

    option_block(cf, info->id, &begin, &end);
    return montecarlo_gpu(info->mem[MEM_OPTIONS], info->mem[MEM_PRICES],
                          begin, end - begin, cf->paths, cf->seed, stream);
}
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t count, paths, per, seed; /* count, paths, per 0: the defaults */
    int devices, serial, verify, force;
    const char *input, *output; /* CSV files, or NULL */
};

static void usage(void)
{
    printf(
"usage: montecarlo [--options N | --input OPTIONS.csv] [--output PRICES.csv]\n"
"                  [-f] [--paths P] [--per K] [--seed S]\n"
"                  [--device cpu|gpu|all] [--no-serial] [--verify] [--help]\n"
"\n"
"Prices N European calls and puts, each by P paths of geometric Brownian\n"
"motion S_T = S exp((r - sigma^2/2) T + sigma sqrt(T) Z), Z ~ N(0, 1),\n"
"as discounted mean payoffs with their standard errors. Options come from\n"
"the seed: S in [50, 150), K/S in [0.8, 1.25), T in [0.5, 2) years,\n"
"r in [0, 0.06), sigma in [0.2, 0.5). Each subtask prices K options; on a\n"
"CPU core with a splitmix64 stream per option and Box-Muller, on a GPU with\n"
"cuRAND (Philox) and one block per option.\n"
"\n"
"  --options N      options (default %u; with --verify %u)\n"
"  --input FILE     price these options instead: one per line,\n"
"                   'S, K, T, r, sigma' (spot, strike, years, rate, volatility;\n"
"                   S, K, T, sigma > 0); blank lines, lines starting with #\n"
"                   and a first line 'S,K,T,r,sigma' are skipped\n"
"  --output FILE    write the prices there as CSV, a header line\n"
"                   'call,put,call_se,put_se' then one line per option, in\n"
"                   order; never over the input, nor an existing file\n"
"                   unless -f\n"
"  -f, --force      replace the output if it exists\n"
"  --paths P        paths per option, at least 2 (default %u; with --verify\n"
"                   %u)\n"
"  --per K          options per subtask (default: about 16 subtasks per GPU\n"
"                   in use, else 4 per core)\n"
"  --seed S         seed of the options and the random numbers (default %u)\n"
"  --device D       cpu, gpu or all (default all: CPU cores and GPUs)\n"
"  --no-serial      skip the serial run, so no speedup is printed\n"
"  --verify         every price within %.0f standard errors of Black-Scholes,\n"
"                   and the mean squared error in standard errors within\n"
"                   [0.5, 2] (1 expected); exit 1 if not. A correct run fails\n"
"                   with probability about 6e-5 per price checked.\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host, default one per core),\n"
"PMLIB_SCHED (pull, static or proportional), PMLIB_LOG. Under mpirun every\n"
"host takes part; host 0 owns the options and prints the results.\n",
           DEFAULT_OPTIONS, VERIFY_OPTIONS, DEFAULT_PATHS, VERIFY_PATHS,
           DEFAULT_SEED, Z_BOUND);
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0, 0, 0, DEFAULT_SEED, PM_DEVICE_ANY, 1, 0, 0, NULL,
                          NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(a, "--options") == 0 || strcmp(a, "-n") == 0) {
            o->count = app_size_arg("montecarlo", a, val);
            if (o->count == 0 || o->count > 0x7fffffff)
                app_usage_error("montecarlo", "%s must be 1 to 2^31 - 1", a);
            i++;
        } else if (strcmp(a, "--paths") == 0) {
            o->paths = app_size_arg("montecarlo", a, val);
            if (o->paths < 2)
                app_usage_error("montecarlo", "--paths must be at least 2");
            i++;
        } else if (strcmp(a, "--per") == 0) {
            o->per = app_size_arg("montecarlo", a, val);
            if (o->per == 0)
                app_usage_error("montecarlo", "--per must be at least 1");
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = app_size_arg("montecarlo", a, val);
            i++;
        } else if (strcmp(a, "--device") == 0) {
            o->devices = app_device_arg("montecarlo", a, val);
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else if (strcmp(a, "--input") == 0 || strcmp(a, "--output") == 0) {
            if (val == NULL)
                app_usage_error("montecarlo", "%s needs a file name", a);
            *(a[2] == 'i' ? &o->input : &o->output) = val;
            i++;
        } else {
            app_usage_error("montecarlo", "unknown option '%s'", a);
        }
    }
    if (o->input != NULL && o->count != 0)
        app_usage_error("montecarlo", "--input gives the options; drop "
                        "--options");
    if (o->count == 0)
        o->count = o->verify ? VERIFY_OPTIONS : DEFAULT_OPTIONS;
    if (o->paths == 0)
        o->paths = o->verify ? VERIFY_PATHS : DEFAULT_PATHS;
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and check against Black-Scholes                 */
/* ------------------------------------------------------------------------ */

#define Z2_MIN_OPTIONS 100 /* fewer: the mean of z^2 is too noisy to judge */

static double norm_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

/* The closed form the simulation converges to. */
static void black_scholes(const struct mc_option *op, double *call,
                          double *put)
{
    double vol = op->sigma * sqrt(op->t), disc_k = op->k * exp(-op->r * op->t);
    double d1 = (log(op->s / op->k) + (op->r + 0.5 * op->sigma * op->sigma)
                 * op->t) / vol;
    double d2 = d1 - vol;

    *call = op->s * norm_cdf(d1) - disc_k * norm_cdf(d2);
    *put = disc_k * norm_cdf(-d2) - op->s * norm_cdf(-d1);
}

/*
 * z = (price - exact) / standard error is about N(0, 1) for a correct
 * simulation: each |z| must be <= Z_BOUND, and the mean of z^2 near 1, which
 * also catches standard errors that are too large to mean anything.
 */
static int close_enough(const struct mc_option *opt,
                        const struct mc_price *price, uint64_t count)
{
    double worst = 0, sum_z2 = 0, mean_z2;
    uint64_t bad = 0, first = 0;

    for (uint64_t i = 0; i < count; i++) {
        double call, put, z[2];

        black_scholes(&opt[i], &call, &put);
        z[0] = (price[i].call - call) / price[i].call_se;
        z[1] = (price[i].put - put) / price[i].put_se;
        for (int k = 0; k < 2; k++) {
            sum_z2 += z[k] * z[k];
            if (!(fabs(z[k]) <= worst)) /* NaN wins, so that it is reported */
                worst = fabs(z[k]);
            if (!(fabs(z[k]) <= Z_BOUND) && bad++ == 0)
                first = i;
        }
    }
    mean_z2 = sum_z2 / (2.0 * (double)count);
    printf("verify: worst price %.2f standard errors from Black-Scholes "
           "(bound %.0f), mean z^2 %.3f (1 expected)\n", worst, Z_BOUND,
           mean_z2);
    if (bad > 0)
        printf("verify: %" PRIu64 " prices out of bound; first option %"
               PRIu64 ": call %.4f +- %.4f, put %.4f +- %.4f\n", bad, first,
               price[first].call, price[first].call_se, price[first].put,
               price[first].put_se);
    if (count >= Z2_MIN_OPTIONS && !(mean_z2 >= 0.5 && mean_z2 <= 2.0))
        printf("verify: mean z^2 outside [0.5, 2]: the standard errors are "
               "wrong\n");
    return bad == 0 &&
           (count < Z2_MIN_OPTIONS || (mean_z2 >= 0.5 && mean_z2 <= 2.0));
}

static void print_rate(const char *label, const struct montecarlo_conf *cf,
                       double seconds)
{
    printf("%s %.3f s  %.0f options/s  %.3g paths/s\n", label, seconds,
           (double)cf->count / seconds,
           (double)cf->count * (double)cf->paths / seconds);
}

/*
 * Runs the task once; returns the seconds spent in submit + wait and its
 * stats in *st.
 */
static double run_pmlib(const struct options *o,
                        const struct montecarlo_conf *cf, pm_memory_t opt,
                        pm_memory_t price, pm_task_stats_t *st)
{
    pm_task_desc_t desc;
    pm_task_t task;
    double t0, seconds;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "montecarlo";
    desc.subtasks = subtask_count(cf);
    desc.conf = cf;
    desc.conf_bytes = sizeof *cf;
    desc.devices = o->devices;
    APP_CHECK(pm_task_desc_add(&desc, opt, PM_READ));    /* MEM_OPTIONS */
    APP_CHECK(pm_task_desc_add(&desc, price, PM_WRITE)); /* MEM_PRICES */

    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    seconds = app_now() - t0;

    print_rate("pmlib: ", cf, seconds);
    app_add_stats(st, task);
    app_print_stats(st);
    APP_CHECK(pm_task_release(task));
    return seconds;
}

/* Returns the serial run's seconds, or -1 when it is skipped. */
static double run_serial(const struct options *o,
                         const struct montecarlo_conf *cf,
                         const struct mc_option *opt)
{
    struct mc_price *ref;
    double t0, seconds;

    if (!o->serial)
        return -1;
    ref = calloc(cf->count, sizeof *ref);
    if (ref == NULL) {
        fprintf(stderr, "montecarlo: no memory for the serial prices\n");
        exit(1);
    }
    t0 = app_now();
    montecarlo_serial(opt, ref, cf->count, cf->paths, cf->seed);
    seconds = app_now() - t0;
    print_rate("serial:", cf, seconds);
    free(ref);
    return seconds;
}

/* ------------------------------------------------------------------------ */
/* Option and price files                                                    */
/* ------------------------------------------------------------------------ */

#define CSV_FIELDS 5
static const char *const csv_names[CSV_FIELDS] = {"S", "K", "T", "r", "sigma"};

/* Whether line is the header "S,K,T,r,sigma" (any case, any spaces). */
static int is_header(const char *line)
{
    const char *p = line;

    for (int k = 0; k < CSV_FIELDS; k++) {
        size_t n = strlen(csv_names[k]);

        p += strspn(p, " \t");
        if (strncasecmp(p, csv_names[k], n) != 0)
            return 0;
        p += n + strspn(p + n, " \t");
        if (k + 1 < CSV_FIELDS && *p++ != ',')
            return 0;
    }
    return p[strspn(p, " \t\r\n")] == '\0';
}

/*
 * One line "S, K, T, r, sigma" into op; 0, or -1 with *why set and *field
 * the field at fault (-1: the line as a whole).
 */
static int parse_option(const char *line, struct mc_option *op, int *field,
                        const char **why)
{
    double v[CSV_FIELDS];
    const char *p = line;
    char *end;

    for (int k = 0; k < CSV_FIELDS; k++) {
        *field = k;
        p += strspn(p, " \t");
        errno = 0;
        v[k] = strtod(p, &end);
        if (end == p || errno == ERANGE || !isfinite(v[k]))
            return *why = "is not a finite number", -1;
        if (k != 3 && !(v[k] > 0))
            return *why = "must be > 0", -1;
        p = end + strspn(end, " \t");
        if (k + 1 < CSV_FIELDS && *p++ != ',') {
            *field = -1;
            return *why = "has fewer than 5 comma-separated fields", -1;
        }
    }
    if (p[strspn(p, " \t\r\n")] != '\0') {
        *field = -1;
        return *why = "has more than 5 fields, or text after sigma", -1;
    }
    *op = (struct mc_option){v[0], v[1], v[2], v[3], v[4]};
    return 0;
}

/* Reads --input into a new array and its length into *count; NULL after
 * one line naming the file, line and field. */
static struct mc_option *read_options(const char *path, uint64_t *count)
{
    FILE *f = fopen(path, "r");
    struct mc_option *opt = NULL, *more;
    uint64_t n = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t len = 0;
    int ok = f != NULL, field, data_seen = 0;
    const char *why;

    if (f == NULL)
        fprintf(stderr, "montecarlo: cannot read '%s': %s\n", path,
                strerror(errno));
    while (ok && getline(&line, &len, f) >= 0) {
        const char *p = line + strspn(line, " \t\r\n");

        lineno++;
        if (*p == '\0' || *p == '#' || (!data_seen && is_header(line)))
            continue;
        data_seen = 1;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            if ((more = realloc(opt, cap * sizeof *opt)) == NULL) {
                fprintf(stderr, "montecarlo: no memory for the options of "
                        "'%s'\n", path);
                ok = 0;
                break;
            }
            opt = more;
        }
        if (parse_option(line, &opt[n], &field, &why) != 0) {
            fprintf(stderr, "montecarlo: %s:%" PRIu64 ": %s %s; expected "
                    "'S, K, T, r, sigma'\n", path, lineno,
                    field >= 0 ? csv_names[field] : "the line", why);
            ok = 0;
        } else if (++n > 0x7fffffff) {
            fprintf(stderr, "montecarlo: %s: more than 2^31 - 1 options\n",
                    path);
            ok = 0;
        }
    }
    if (ok && ferror(f)) {
        fprintf(stderr, "montecarlo: cannot read '%s': %s\n", path,
                strerror(errno));
        ok = 0;
    } else if (ok && n == 0) {
        fprintf(stderr, "montecarlo: '%s' has no options\n", path);
        ok = 0;
    }
    free(line);
    if (f != NULL)
        fclose(f);
    if (!ok) {
        free(opt);
        return NULL;
    }
    *count = n;
    return opt;
}

/* Writes the prices to the output opened before the work; 0 or 2. */
static int write_prices(struct app_out *out, const struct mc_price *price,
                        uint64_t count)
{
    int bad = fprintf(out->f, "call,put,call_se,put_se\n") < 0;

    for (uint64_t i = 0; i < count && !bad; i++)
        bad = fprintf(out->f, "%.10g,%.10g,%.6g,%.6g\n", price[i].call,
                      price[i].put, price[i].call_se, price[i].put_se) < 0;
    return app_out_finish(out, !bad);
}

/* Returns the exit status: 0, 1 when --verify fails, 2 for a file error. */
static int run(struct options *o)
{
    const char *inputs[] = {o->input, NULL};
    struct mc_option *given = NULL;
    struct montecarlo_conf cf;
    struct app_out out;
    pm_memory_t opt, price;
    pm_task_stats_t st = {0};
    double serial_s, pmlib_s;
    const char *verdict = "skipped";
    int status;

    app_require_devices("montecarlo", o->devices, PMLIB_HAVE_CUDA);
    if (o->input != NULL && (given = read_options(o->input, &o->count)) == NULL)
        return 2;
    /* before any work: a bad output fails at once */
    if (o->output != NULL &&
        app_out_open(&out, "montecarlo", o->output, o->force, inputs) != 0) {
        free(given);
        return 2;
    }
    cf = (struct montecarlo_conf){o->count, o->per, o->paths, o->seed};
    if (cf.per == 0)
        cf.per = app_default_per_subtask_on(cf.count, 1, o->devices);
    if (cf.per > cf.count)
        cf.per = cf.count;
    printf("montecarlo: options=%" PRIu64 " (%s) paths=%" PRIu64 " per=%"
           PRIu64 " subtasks=%" PRIu64 " seed=%" PRIu64 " device=%s "
           "hosts=%d\n", cf.count, o->input != NULL ? o->input : "generated",
           cf.paths, cf.per, subtask_count(&cf), cf.seed,
           app_device_name(o->devices), pm_host_count());

    APP_CHECK(pm_memory_create(cf.count * sizeof(struct mc_option), &opt));
    APP_CHECK(pm_memory_create(cf.count * sizeof(struct mc_price), &price));
    if (given != NULL)
        memcpy(pm_memory_data(opt), given, cf.count * sizeof *given);
    else
        make_options(pm_memory_data(opt), cf.count, cf.seed);
    free(given);
    APP_CHECK(pm_memory_touch(opt)); /* written through the host pointer */

    serial_s = run_serial(o, &cf, pm_memory_data(opt));
    pmlib_s = run_pmlib(o, &cf, opt, price, &st);
    if (o->verify) {
        verdict = close_enough(pm_memory_data(opt), pm_memory_data(price),
                               cf.count) ? "OK" : "MISMATCH";
        printf("verify: %s\n", verdict);
    }
    status = strcmp(verdict, "MISMATCH") == 0;
    if (o->output != NULL &&
        write_prices(&out, pm_memory_data(price), cf.count) != 0)
        status = 2;
    app_print_result("montecarlo", cf.count, serial_s, pmlib_s, &st,
                     verdict);
    APP_CHECK(pm_memory_release(price));
    APP_CHECK(pm_memory_release(opt));
    return status;
}

int main(int argc, char **argv)
{
    struct options opt;
    pm_callbacks_t cb;
    int status = 0;

    parse_options(argc, argv, &opt);
    APP_CHECK(pm_init(&argc, &argv));

    /* Every host registers the callbacks; only host 0 owns data and submits. */
    APP_CHECK(pm_callbacks_init(&cb));
    cb.subscribe = montecarlo_subscribe;
    cb.cpu = montecarlo_cpu;
#if PMLIB_HAVE_CUDA
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = montecarlo_cuda;
#endif
    APP_CHECK(pm_callbacks_register("montecarlo", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
