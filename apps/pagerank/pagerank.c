/*
 * pagerank: iterative PageRank (damping 0.85) of a web graph, one pmlib task
 * per iteration, until --iters iterations or an L1 change below --tol.
 *
 * Formulation: pull, with disjoint writes. The graph is stored as in-edges in
 * CSR form (the pages linking to v are src[off[v] .. off[v + 1])) plus
 * inv_deg[u] = 1 / out-degree of u (0 for a dangling page, one with no
 * out-links). Besides its rank, every page keeps its share: what it gives
 * each of its out-links, share[u] = rank[u] * inv_deg[u]. Subtask k owns a
 * block of destination pages and writes only their next ranks and shares:
 *     next[v] = (1 - d) / N + d * (D / N + sum over u -> v of share[u])
 * where D is the rank held by dangling pages, spread over every page. The
 * shares cost one multiply per page and save a read per link: the sum over
 * in-links, where the time goes, reads one array at random instead of two.
 * No rank contribution needs a reduce; only two numbers are summed
 * (PM_REDUCE_SUM): the next rank of dangling pages (D of the next iteration)
 * and the L1 change (the stopping test).
 *
 * The three graph memories are only read and never change, so their version
 * stays the same and pmlib sends them to each host (and GPU) once, in the
 * first iteration; later iterations move only the ranks and shares, which
 * are double-buffered: two memories of each swap roles after every
 * iteration.
 * Blocks are cut so that each holds about the same pages + edges; the cuts
 * travel in the task's config blob, because a subscribe callback cannot read
 * off[] to find which slice of src[] its pages use.
 *
 * The graph comes from a seedable generator (power-law out-degrees and
 * in-degrees) or from an edge-list file ("src dst" per line).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "pagefiles.h"
#include "pmlib.h"
#if PMLIB_HAVE_CUDA
#include "pagerank.h"
#endif

#define DEFAULT_PAGES 1000000u
#define VERIFY_PAGES 10000u
#define MAX_PAGES PAGE_LIMIT /* page ids are uint32_t */
#define DEFAULT_ITERS 100u
#define DEFAULT_TOL 1e-10
#define DAMPING 0.85
/*
 * Both versions add the same terms in the same order; only the two sums
 * (merged in a different order) and the GPU's fused multiply-adds differ,
 * by about 1e-16 of a rank. Ranks sum to 1, so 1e-12 is far above rounding
 * and far below any real error.
 */
#define MAX_ABS_DIFF 1e-12
/* Generator: out-degrees >= MIN_DEGREE with P(deg >= k) = (MIN_DEGREE/k)^2. */
#define MIN_DEGREE 5.0
#define MAX_DEGREE 100000u

/* The graph, built by host 0 straight into pmlib memories. */
struct graph {
    uint64_t pages, edges;
    unsigned base; /* the first page id in the user's files: 0 or 1 */
    pm_memory_t off_mem, src_mem, inv_mem;
    uint64_t *off; /* pages + 1 entries */
    uint32_t *src; /* edges entries */
    double *inv;   /* 1 / out-degree, 0 for dangling pages */
};

/* The rank held by dangling pages. */
static double dangling_mass(const double *inv, const double *rank,
                            uint64_t pages)
{
    double sum = 0;

    for (uint64_t v = 0; v < pages; v++)
        if (inv[v] == 0)
            sum += rank[v];
    return sum;
}

/* The ranks and shares of one iteration. */
struct state {
    double *rank, *share;
};

/*
 * The loop body, over pages [first, last): pull each page's rank from the
 * shares of its in-links into `to`, from the ranks and shares in `from`.
 * Adds to stats[0] the next rank of dangling pages and to stats[1] the L1
 * change.
 */
static void pull(const struct graph *g, struct state from, struct state to,
                 uint64_t first, uint64_t last, double base, double stats[2])
{
    for (uint64_t v = first; v < last; v++) {
        double sum = 0;

        for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
            sum += from.share[g->src[e]];
        to.rank[v] = base + DAMPING * sum;
        to.share[v] = to.rank[v] * g->inv[v];
        if (g->inv[v] == 0)
            stats[0] += to.rank[v];
        stats[1] += fabs(to.rank[v] - from.rank[v]);
    }
}

/* Every page starts with rank 1/N. */
static void first_state(const struct graph *g, struct state s)
{
    for (uint64_t v = 0; v < g->pages; v++) {
        s.rank[v] = 1.0 / (double)g->pages;
        s.share[v] = s.rank[v] * g->inv[v];
    }
}

/* The constant part of every next rank, given the dangling mass D. */
static double base_rank(uint64_t pages, double dangling)
{
    return (1.0 - DAMPING) / (double)pages + DAMPING * dangling / (double)pages;
}

/*
 * Serial reference. s[0] and s[1] hold pages doubles each; returns the
 * iterations run, the result being the ranks of s[iterations % 2].
 */
static uint64_t pagerank_serial(const struct graph *g, struct state s[2],
                                uint64_t iters, double tol)
{
    double dangling, stats[2];
    uint64_t it = 0;

    first_state(g, s[0]);
    dangling = dangling_mass(g->inv, s[0].rank, g->pages);
    while (it < iters) {
        stats[0] = stats[1] = 0;
        pull(g, s[it % 2], s[(it + 1) % 2], 0, g->pages,
             base_rank(g->pages, dangling), stats);
        dangling = stats[0];
        it++;
        if (stats[1] < tol)
            break;
    }
    return it;
}

/* ------------------------------------------------------------------------ */
/* The graph                                                                 */
/* ------------------------------------------------------------------------ */

/* Creates the page-indexed memories (zeroed). */
static void graph_alloc_pages(struct graph *g, uint64_t pages)
{
    g->pages = pages;
    APP_CHECK(pm_memory_create((pages + 1) * sizeof *g->off, &g->off_mem));
    APP_CHECK(pm_memory_create(pages * sizeof *g->inv, &g->inv_mem));
    g->off = pm_memory_data(g->off_mem);
    g->inv = pm_memory_data(g->inv_mem);
}

/* Turns the in-degree counts in off[v + 1] into CSR offsets and creates
 * src[]. */
static void graph_alloc_edges(struct graph *g)
{
    for (uint64_t v = 0; v < g->pages; v++)
        g->off[v + 1] += g->off[v];
    g->edges = g->off[g->pages];
    /* a memory has at least one byte, even for a graph without edges */
    APP_CHECK(pm_memory_create(g->edges > 0 ? g->edges * sizeof *g->src : 1,
                               &g->src_mem));
    g->src = pm_memory_data(g->src_mem);
}

/* Where the next in-edge of each page goes while src[] is filled: a copy
 * of off[0 .. pages), or NULL after printing why not. */
static uint64_t *fill_cursor(const struct graph *g)
{
    uint64_t *cursor = malloc(g->pages * sizeof *cursor);

    if (cursor == NULL)
        fprintf(stderr, "pagerank: no memory to build the graph\n");
    else
        memcpy(cursor, g->off, g->pages * sizeof *cursor);
    return cursor;
}

/* Says that host 0 wrote the graph through the host pointers. */
static void graph_done(struct graph *g)
{
    APP_CHECK(pm_memory_touch(g->off_mem));
    APP_CHECK(pm_memory_touch(g->src_mem));
    APP_CHECK(pm_memory_touch(g->inv_mem));
}

/* splitmix64: small, seedable, and cheap to restart for every page. */
static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) /* [0, 1) */
{
    return (double)(next_random(s) >> 11) * 0x1.0p-53;
}

/* Page u's own stream, so that two passes see the same links without
 * storing them. */
static uint64_t page_stream(uint64_t seed, uint64_t u)
{
    uint64_t s = seed ^ (u * 0xD6E8FEB86659FD93u);

    next_random(&s);
    return s;
}

/* One page in 16 is dangling; the others have a power-law out-degree. */
static uint64_t out_degree(uint64_t *s, uint64_t pages)
{
    uint64_t cap = pages - 1 < MAX_DEGREE ? pages - 1 : MAX_DEGREE;
    double deg;

    if (next_random(s) % 16 == 0)
        return 0;
    deg = MIN_DEGREE / sqrt(1.0 - uniform(s));
    return deg < (double)cap ? (uint64_t)deg : cap;
}

/* Low page ids are popular: P(target < x) = sqrt(x / pages), which gives
 * power-law in-degrees. A self-link moves to the next page. */
static uint32_t link_target(uint64_t *s, uint64_t pages, uint64_t u)
{
    double x = uniform(s);
    uint64_t v = (uint64_t)(x * x * (double)pages);

    return (uint32_t)(v == u ? (v + 1) % pages : v);
}

/* Generates the graph in two passes over the pages: count, then fill. */
static void generate(struct graph *g, uint64_t pages, uint64_t seed)
{
    uint64_t *cursor;

    graph_alloc_pages(g, pages);
    for (uint64_t u = 0; u < pages; u++) {
        uint64_t s = page_stream(seed, u), deg = out_degree(&s, pages);

        g->inv[u] = deg > 0 ? 1.0 / (double)deg : 0;
        for (uint64_t j = 0; j < deg; j++)
            g->off[link_target(&s, pages, u) + 1]++;
    }
    graph_alloc_edges(g);
    if ((cursor = fill_cursor(g)) == NULL)
        exit(1);
    for (uint64_t u = 0; u < pages; u++) {
        uint64_t s = page_stream(seed, u), deg = out_degree(&s, pages);

        for (uint64_t j = 0; j < deg; j++)
            g->src[cursor[link_target(&s, pages, u)]++] = (uint32_t)u;
    }
    free(cursor);
    graph_done(g);
}

/* Builds the CSR graph from a file; 0, or -1 after printing why not. */
static int load(struct graph *g, const char *path)
{
    struct edge_list el;
    uint64_t *cursor;

    if (pf_read_graph("pagerank", path, &el) != 0)
        return -1;
    g->base = el.base;
    graph_alloc_pages(g, el.pages);
    for (uint64_t i = 0; i < el.n; i++) {
        g->off[el.dst[i] + 1]++;
        g->inv[el.src[i]] += 1; /* out-degree for now */
    }
    for (uint64_t u = 0; u < el.pages; u++)
        g->inv[u] = g->inv[u] > 0 ? 1.0 / g->inv[u] : 0;
    graph_alloc_edges(g);
    if ((cursor = fill_cursor(g)) == NULL)
        goto fail;
    for (uint64_t i = 0; i < el.n; i++) /* in file order within each page */
        g->src[cursor[el.dst[i]]++] = el.src[i];
    free(cursor);
    pf_free_graph(&el);
    graph_done(g);
    return 0;
fail:
    pf_free_graph(&el);
    return -1;
}

static void graph_release(struct graph *g)
{
    APP_CHECK(pm_memory_release(g->off_mem));
    APP_CHECK(pm_memory_release(g->src_mem));
    APP_CHECK(pm_memory_release(g->inv_mem));
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

/* Task memories, in the order submit_iteration adds them. */
enum { MEM_OFF, MEM_SRC, MEM_INV, MEM_RANK, MEM_SHARE, MEM_NEXT_RANK,
       MEM_NEXT_SHARE, MEM_STATS };

/*
 * The config blob: a header and the cuts. Subtask k owns pages
 * [cut[k], cut[k + 1]), whose in-edges are src[cut[S + 1 + k] ..
 * cut[S + 2 + k]) with S = subtasks.
 */
struct pagerank_conf {
    uint64_t pages, subtasks;
    double dangling; /* D of the ranks this iteration reads */
    uint64_t cut[];  /* 2 * (subtasks + 1) entries */
};

static void block_of(const struct pagerank_conf *cf, uint64_t k,
                     uint64_t page[2], uint64_t edge[2])
{
    page[0] = cf->cut[k];
    page[1] = cf->cut[k + 1];
    edge[0] = cf->cut[cf->subtasks + 1 + k];
    edge[1] = cf->cut[cf->subtasks + 2 + k];
}

static int pagerank_subscribe(pm_subscription_t *sub,
                              const pm_subtask_info_t *info)
{
    const struct pagerank_conf *cf = info->conf;
    uint64_t page[2], edge[2];
    size_t at, len; /* my pages' bytes in a page-indexed array */
    int rc;

    block_of(cf, info->id, page, edge);
    at = page[0] * sizeof(double);
    len = (page[1] - page[0]) * sizeof(double);
    rc = pm_subscribe(sub, MEM_OFF, PM_READ, page[0] * sizeof(uint64_t),
                      (page[1] - page[0] + 1) * sizeof(uint64_t));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_SRC, PM_READ, edge[0] * sizeof(uint32_t),
                          (edge[1] - edge[0]) * sizeof(uint32_t));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_INV, PM_READ, at, len);
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_RANK, PM_READ, at, len);
    if (rc == 0) /* in-links may come from any page */
        rc = pm_subscribe(sub, MEM_SHARE, PM_READ, 0,
                          cf->pages * sizeof(double));
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_NEXT_RANK, PM_WRITE, at, len);
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_NEXT_SHARE, PM_WRITE, at, len);
    if (rc == 0) /* every subtask adds to both sums: reduced */
        rc = pm_subscribe(sub, MEM_STATS, PM_WRITE, 0, 2 * sizeof(double));
    return rc;
}

static int pagerank_cpu(const pm_subtask_info_t *info)
{
    const struct pagerank_conf *cf = info->conf;
    struct graph g = {.pages = cf->pages, .off = info->mem[MEM_OFF],
                      .src = info->mem[MEM_SRC], .inv = info->mem[MEM_INV]};
    struct state from = {info->mem[MEM_RANK], info->mem[MEM_SHARE]};
    struct state to = {info->mem[MEM_NEXT_RANK], info->mem[MEM_NEXT_SHARE]};
    uint64_t page[2], edge[2];

    block_of(cf, info->id, page, edge);
    /* stats is this subtask's private copy, starting at 0 */
    pull(&g, from, to, page[0], page[1], base_rank(cf->pages, cf->dangling),
         info->mem[MEM_STATS]);
    return 0;
}

#if PMLIB_HAVE_CUDA
static int pagerank_cuda(const pm_subtask_info_t *info, void *stream)
{
    const struct pagerank_conf *cf = info->conf;
    uint64_t page[2], edge[2];

    block_of(cf, info->id, page, edge);
    return pagerank_gpu_pull(info->mem[MEM_OFF], info->mem[MEM_SRC],
                             info->mem[MEM_INV], info->mem[MEM_RANK],
                             info->mem[MEM_SHARE], info->mem[MEM_NEXT_RANK],
                             info->mem[MEM_NEXT_SHARE], info->mem[MEM_STATS],
                             page[0], page[1],
                             base_rank(cf->pages, cf->dangling), DAMPING,
                             stream);
}
#endif

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    uint64_t pages, seed, iters, subtasks; /* subtasks 0: the apps' default */
    double tol;
    const char *graph; /* edge-list file, or NULL to generate */
    int devices, compress, serial, verify;
    const char *output, *names; /* files, or NULL */
    uint64_t top;               /* pages to print, 0 for none */
    int force;
};

static void usage(void)
{
    printf(
"usage: pagerank [--pages N] [--seed S] [--graph FILE] [--iters N] [--tol T]\n"
"                [--output RANKS.txt] [-f] [--top K] [--names FILE]\n"
"                [--subtasks N] [--device cpu|gpu|all] [--compress]\n"
"                [--no-serial] [--verify] [--help]\n"
"\n"
"PageRank with damping %.2f: one pmlib task per iteration, each subtask\n"
"pulling the ranks of a block of pages from their in-links (CSR); dangling\n"
"pages spread their rank over every page. Stops after N iterations or when\n"
"the L1 change of the ranks falls below T.\n"
"\n"
"  --pages N      pages of the generated graph (default %u; with --verify\n"
"                 and no size, %u); out-degrees follow a power law (mean\n"
"                 about 9, one page in 16 dangling), and so do in-degrees\n"
"  --seed S       generator seed (default 1)\n"
"  --graph FILE   read the graph instead: one 'src dst' link per line, page\n"
"                 numbers from 0; blank lines and lines starting with # or %%\n"
"                 are skipped. Or Matrix Market (first line\n"
"                 '%%%%MatrixMarket matrix coordinate pattern|real|integer\n"
"                 general|symmetric'): entry (i, j) is a link from page i\n"
"                 to page j, numbered from 1; symmetric links both ways;\n"
"                 values are ignored\n"
"  --output FILE  write every page's rank there, one 'page rank' line per\n"
"                 page in id order (ids numbered as in --graph); never over\n"
"                 an input, nor an existing file unless -f\n"
"  -f, --force    replace the output if it exists\n"
"  --top K        print the K pages of highest rank\n"
"  --names FILE   'id name' lines (the name is the rest of the line): named\n"
"                 pages appear as 'name rank' in --output and --top\n"
"  --iters N      at most N iterations (default %u)\n"
"  --tol T        stop when the L1 change is below T (default %g)\n"
"  --subtasks N   subtasks per iteration (default: about 16 per GPU in use,\n"
"                 else 4 per core)\n"
"  --device D     cpu, gpu or all (default all: CPU cores and GPUs)\n"
"  --compress     zlib-compress transfers between hosts when it pays\n"
"                 (PM_TASK_COMPRESS_AUTO)\n"
"  --no-serial    skip the serial run, so no speedup is printed\n"
"  --verify       compare with the serial ranks; exit 1 when any differs\n"
"                 by more than %g\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host). Under mpirun every host\n"
"takes part; host 0 owns the graph and prints the results.\n",
           DAMPING, DEFAULT_PAGES, VERIFY_PAGES, DEFAULT_ITERS, DEFAULT_TOL,
           MAX_ABS_DIFF);
}

static double tol_arg(const char *text)
{
    char *end;
    double t;

    if (text == NULL)
        app_usage_error("pagerank", "--tol needs a value");
    errno = 0;
    t = strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !(t >= 0) || isinf(t))
        app_usage_error("pagerank", "--tol '%s': not a number >= 0", text);
    return t;
}

/* Options with a value; returns 0 when `a` is none of them. */
static int parse_value(const char *a, const char *val, struct options *o,
                       int *sized)
{
    if (strcmp(a, "--pages") == 0) {
        o->pages = app_size_arg("pagerank", a, val);
        *sized = 1;
    } else if (strcmp(a, "--seed") == 0) {
        o->seed = app_size_arg("pagerank", a, val);
    } else if (strcmp(a, "--iters") == 0) {
        o->iters = app_size_arg("pagerank", a, val);
    } else if (strcmp(a, "--subtasks") == 0) {
        o->subtasks = app_size_arg("pagerank", a, val);
    } else if (strcmp(a, "--tol") == 0) {
        o->tol = tol_arg(val);
    } else if (strcmp(a, "--device") == 0) {
        o->devices = app_device_arg("pagerank", a, val);
    } else if (strcmp(a, "--top") == 0) {
        o->top = app_size_arg("pagerank", a, val);
    } else if (strcmp(a, "--graph") == 0 || strcmp(a, "--output") == 0 ||
               strcmp(a, "--names") == 0) {
        if (val == NULL)
            app_usage_error("pagerank", "%s needs a file name", a);
        *(a[2] == 'g' ? &o->graph : a[2] == 'o' ? &o->output : &o->names) = val;
    } else {
        return 0;
    }
    return 1;
}

static void check_options(struct options *o, int sized)
{
    if (!sized && o->verify)
        o->pages = VERIFY_PAGES;
    if (o->graph != NULL && sized)
        app_usage_error("pagerank", "--pages and --graph exclude each other");
    if (o->pages == 0 || o->pages > MAX_PAGES)
        app_usage_error("pagerank", "--pages must be from 1 to %u", MAX_PAGES);
    if (o->iters == 0)
        app_usage_error("pagerank", "--iters must be at least 1");
    if (o->verify && !o->serial)
        app_usage_error("pagerank", "--verify needs the serial run; "
                        "drop --no-serial");
    if (o->devices == PM_DEVICE_GPU && !PMLIB_HAVE_CUDA)
        app_usage_error("pagerank", "--device gpu: this build has no CUDA support; "
                        "use --device cpu");
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    int sized = 0;

    *o = (struct options){DEFAULT_PAGES, 1, DEFAULT_ITERS, 0, DEFAULT_TOL,
                          NULL, PM_DEVICE_ANY, 0, 1, 0, NULL, NULL, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (parse_value(a, val, o, &sized)) {
            i++;
        } else if (strcmp(a, "--compress") == 0) {
            o->compress = 1;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else {
            app_usage_error("pagerank", "unknown option '%s'", a);
        }
    }
    check_options(o, sized);
}

/* ------------------------------------------------------------------------ */
/* Host 0: run both versions and compare                                     */
/* ------------------------------------------------------------------------ */

/* Cuts the pages into blocks of about equal pages + in-edges. */
static void cut_blocks(const struct graph *g, struct pagerank_conf *cf)
{
    uint64_t s = cf->subtasks, total = g->pages + g->edges;

    for (uint64_t k = 0; k <= s; k++) {
        uint64_t target = total / s * k + total % s * k / s, lo = 0,
                 hi = g->pages;

        while (lo < hi) { /* the first page v with v + off[v] >= target */
            uint64_t mid = lo + (hi - lo) / 2;

            if (mid + g->off[mid] >= target)
                hi = mid;
            else
                lo = mid + 1;
        }
        cf->cut[k] = lo;
        cf->cut[s + 1 + k] = g->off[lo];
    }
}

static struct pagerank_conf *make_conf(const struct options *o,
                                       const struct graph *g, size_t *bytes)
{
    uint64_t s = o->subtasks;
    struct pagerank_conf *cf;

    if (s == 0) {
        uint64_t per = app_default_per_subtask_on(g->pages, 1, o->devices);

        s = (g->pages + per - 1) / per;
    }
    s = s < g->pages ? s : g->pages;
    *bytes = sizeof *cf + 2 * (s + 1) * sizeof cf->cut[0];
    if ((cf = malloc(*bytes)) == NULL) {
        fprintf(stderr, "pagerank: no memory for %" PRIu64 " subtasks\n", s);
        exit(1);
    }
    *cf = (struct pagerank_conf){g->pages, s, 0};
    cut_blocks(g, cf);
    return cf;
}

/* Submits one iteration: reads the ranks and shares of `from`, writes those
 * of `to` and the two sums. */
static pm_task_t submit_iteration(const struct options *o, const struct graph *g,
                                  const struct pagerank_conf *cf, size_t bytes,
                                  const pm_memory_t from[2],
                                  const pm_memory_t to[2], pm_memory_t stats)
{
    pm_task_desc_t desc;
    pm_task_t task;

    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "pagerank";
    desc.subtasks = cf->subtasks;
    desc.conf = cf;
    desc.conf_bytes = bytes;
    desc.devices = o->devices;
    desc.flags = o->compress ? PM_TASK_COMPRESS_AUTO : 0;
    APP_CHECK(pm_task_desc_add(&desc, g->off_mem, PM_READ));  /* MEM_OFF */
    APP_CHECK(pm_task_desc_add(&desc, g->src_mem, PM_READ));  /* MEM_SRC */
    APP_CHECK(pm_task_desc_add(&desc, g->inv_mem, PM_READ));  /* MEM_INV */
    APP_CHECK(pm_task_desc_add(&desc, from[0], PM_READ));     /* MEM_RANK */
    APP_CHECK(pm_task_desc_add(&desc, from[1], PM_READ));     /* MEM_SHARE */
    APP_CHECK(pm_task_desc_add(&desc, to[0], PM_WRITE));      /* MEM_NEXT_RANK */
    APP_CHECK(pm_task_desc_add(&desc, to[1], PM_WRITE));      /* MEM_NEXT_SHARE */
    APP_CHECK(pm_task_desc_add(&desc, stats, PM_WRITE));      /* MEM_STATS */
    APP_CHECK(pm_task_desc_reduce(&desc, MEM_STATS, PM_REDUCE_SUM, PM_DOUBLE));
    APP_CHECK(pm_task_submit(&desc, &task));
    return task;
}

static void print_rate(const char *who, double seconds, uint64_t iters,
                       uint64_t edges)
{
    printf("%s %.3f s, %" PRIu64 " iterations: %.2f ms and %.1f Medges/s "
           "per iteration\n", who, seconds, iters, 1e3 * seconds / (double)iters,
           (double)edges * (double)iters / seconds / 1e6);
}

/*
 * Iterates; copies the final ranks into out (pages doubles) when not NULL
 * and the iterations' stats, summed, into *total.
 */
static double run_pmlib(const struct options *o, const struct graph *g,
                        double *out, pm_task_stats_t *total)
{
    size_t bytes;
    struct pagerank_conf *cf = make_conf(o, g, &bytes);
    pm_memory_t s[2][2], stats; /* s[i]: the ranks and shares of state i */
    double seconds = 0, first = 0, *sums;
    uint64_t it = 0;

    for (int i = 0; i < 4; i++)
        APP_CHECK(pm_memory_create(g->pages * sizeof(double), &s[i / 2][i % 2]));
    APP_CHECK(pm_memory_create(2 * sizeof(double), &stats));
    first_state(g, (struct state){pm_memory_data(s[0][0]),
                                  pm_memory_data(s[0][1])});
    APP_CHECK(pm_memory_touch(s[0][0]));
    APP_CHECK(pm_memory_touch(s[0][1]));
    /* Only the final ranks are read here (pm_memory_data gathers them):
     * with several hosts each iteration's ranks stay where computed and
     * each host fetches the others' slices from them. */
    for (int i = 0; i < 4; i++)
        APP_CHECK(pm_memory_set_lazy(s[i / 2][i % 2], 1));
    cf->dangling = dangling_mass(g->inv, pm_memory_data(s[0][0]), g->pages);
    sums = pm_memory_data(stats);
    while (it < o->iters) {
        double t0 = app_now();
        pm_task_t task = submit_iteration(o, g, cf, bytes, s[it % 2],
                                          s[(it + 1) % 2], stats);

        APP_CHECK(pm_task_wait(task));
        seconds += app_now() - t0;
        if (it == 0)
            first = seconds;
        app_add_stats(total, task);
        APP_CHECK(pm_task_release(task));
        cf->dangling = sums[0];
        it++;
        if (sums[1] < o->tol)
            break;
    }
    print_rate("pmlib: ", seconds, it, g->edges);
    /* The first iteration also sends the graph everywhere; later ones find
     * it cached, so they show the rate of a long run. */
    if (it > 1)
        print_rate("        after the first:", seconds - first, it - 1,
                   g->edges);
    app_print_stats(total);
    if (out != NULL)
        memcpy(out, pm_memory_data(s[it % 2][0]), g->pages * sizeof *out);
    APP_CHECK(pm_memory_release(stats));
    for (int i = 0; i < 4; i++)
        APP_CHECK(pm_memory_release(s[i / 2][i % 2]));
    free(cf);
    return seconds;
}

/* Runs the serial reference into ref (pages doubles); returns its seconds. */
static double run_serial(const struct graph *g, const struct options *o,
                         double *ref)
{
    struct state s[2];
    double t0;
    uint64_t iters;

    s[0] = (struct state){ref, malloc(g->pages * sizeof(double))};
    s[1] = (struct state){malloc(g->pages * sizeof(double)),
                          malloc(g->pages * sizeof(double))};
    if (s[0].share == NULL || s[1].rank == NULL || s[1].share == NULL) {
        fprintf(stderr, "pagerank: no memory for the serial run; try "
                "--no-serial\n");
        exit(1);
    }
    t0 = app_now();
    iters = pagerank_serial(g, s, o->iters, o->tol);
    t0 = app_now() - t0;
    if (iters % 2 == 1)
        memcpy(ref, s[1].rank, g->pages * sizeof *ref);
    free(s[0].share);
    free(s[1].rank);
    free(s[1].share);
    print_rate("serial:", t0, iters, g->edges);
    return t0;
}

/* The largest difference of the ranks, with the verdict. */
static const char *compare(const double *x, const double *ref, uint64_t pages)
{
    double worst = 0, sum = 0;

    for (uint64_t v = 0; v < pages; v++) {
        double d = fabs(x[v] - ref[v]);

        worst = d > worst ? d : worst;
        sum += x[v];
    }
    printf("verify: max |pmlib - serial| = %.3g (bound %g), ranks sum to "
           "%.12f\n", worst, MAX_ABS_DIFF, sum);
    return worst <= MAX_ABS_DIFF ? "OK" : "MISMATCH";
}

/* --output and --top from the final ranks x; returns 0 or 2. */
static int report(const struct options *o, const struct graph *g,
                  const double *x, char *const *names, struct app_out *out)
{
    int status = 0;

    if (o->top > 0 && pf_print_top(x, g->pages, o->top, names, g->base) != 0) {
        fprintf(stderr, "pagerank: no memory for --top %" PRIu64 "\n", o->top);
        status = 2;
    }
    if (o->output != NULL) {
        if (app_out_finish(out, pf_write_ranks(out->f, x, g->pages, names,
                                               g->base) == 0) != 0)
            status = 2;
    }
    return status;
}

/* Returns the exit status: 0, 1 when --verify fails, 2 for a file error. */
static int run(const struct options *o)
{
    const char *inputs[] = {o->graph, o->names, NULL};
    struct graph g = {0};
    double t0 = app_now(), serial_s = -1, pmlib_s;
    double *ref = NULL, *x = NULL;
    char **names = NULL;
    int keep = o->verify || o->output != NULL || o->top > 0, status;
    pm_task_stats_t st = {0};
    struct app_out out;
    const char *verdict = "skipped";

    app_require_devices("pagerank", o->devices, PMLIB_HAVE_CUDA);
    if (o->graph == NULL)
        inputs[0] = o->names;
    /* before any work: a bad output fails at once */
    if (o->output != NULL &&
        app_out_open(&out, "pagerank", o->output, o->force, inputs) != 0)
        return 2;
    if (o->graph != NULL && load(&g, o->graph) != 0) {
        if (o->output != NULL)
            app_out_abort(&out);
        return 2;
    }
    if (o->graph == NULL)
        generate(&g, o->pages, o->seed);
    if (o->names != NULL &&
        (names = pf_read_names("pagerank", o->names, g.pages, g.base)) ==
        NULL) {
        if (o->output != NULL)
            app_out_abort(&out);
        graph_release(&g);
        return 2;
    }
    printf("pagerank: %" PRIu64 " pages, %" PRIu64 " links (%s, %.2f s) "
           "device=%s hosts=%d\n", g.pages, g.edges,
           o->graph ? o->graph : "generated", app_now() - t0,
           app_device_name(o->devices), pm_host_count());
    x = keep ? malloc(g.pages * sizeof *x) : NULL;
    if (keep && x == NULL) {
        fprintf(stderr, "pagerank: no memory for the ranks\n");
        exit(1);
    }
    if (o->serial) {
        ref = malloc(g.pages * sizeof *ref);
        if (ref == NULL) {
            fprintf(stderr, "pagerank: no memory for the serial run; try "
                    "--no-serial\n");
            exit(1);
        }
        serial_s = run_serial(&g, o, ref);
    }
    pmlib_s = run_pmlib(o, &g, x, &st);
    if (o->verify)
        verdict = compare(x, ref, g.pages);
    status = strcmp(verdict, "MISMATCH") == 0;
    if ((o->output != NULL || o->top > 0) && report(o, &g, x, names, &out) != 0)
        status = 2;
    app_print_result("pagerank", g.pages, serial_s, pmlib_s, &st, verdict);
    graph_release(&g);
    pf_free_names(names, g.pages);
    free(ref);
    free(x);
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
    cb.subscribe = pagerank_subscribe;
    cb.cpu = pagerank_cpu;
#if PMLIB_HAVE_CUDA
    if (opt.devices & PM_DEVICE_GPU) /* registering it readies the GPUs */
        cb.cuda = pagerank_cuda;
#endif
    APP_CHECK(pm_callbacks_register("pagerank", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
