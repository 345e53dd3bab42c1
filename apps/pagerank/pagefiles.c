/* pagerank's files; see pagefiles.h. */
#define _GNU_SOURCE /* getline, strcasecmp */

#include "pagefiles.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------ */
/* Graphs                                                                    */
/* ------------------------------------------------------------------------ */

static int push_edge(struct edge_list *el, uint64_t u, uint64_t v)
{
    if (el->n == el->cap) {
        uint64_t cap = el->cap ? 2 * el->cap : 1 << 16;
        uint32_t *s = realloc(el->src, cap * sizeof *s);
        uint32_t *d = s ? realloc(el->dst, cap * sizeof *d) : NULL;

        if (s != NULL)
            el->src = s;
        if (d == NULL)
            return -1;
        el->dst = d;
        el->cap = cap;
    }
    el->src[el->n] = (uint32_t)u;
    el->dst[el->n++] = (uint32_t)v;
    if (u >= el->pages || v >= el->pages)
        el->pages = (u > v ? u : v) + 1;
    return 0;
}

/* Reads a whole number after spaces; NULL when there is none or it does
 * not fit, else the character after it. */
static char *read_uint(char *p, uint64_t *v)
{
    char *end;

    p += strspn(p, " \t");
    if (*p < '0' || *p > '9') /* strtoull would take "-1" and "+1" */
        return NULL;
    errno = 0;
    *v = strtoull(p, &end, 10);
    return errno == 0 ? end : NULL;
}

/* Whether only spaces and the line's end remain. */
static int at_end(const char *p)
{
    return p[strspn(p, " \t\r\n")] == '\0';
}

/* Whether the line has nothing to read: blank, or a comment. */
static int skipped(const char *line, const char *comments)
{
    const char *p = line + strspn(line, " \t\r\n");

    return *p == '\0' || strchr(comments, *p) != NULL;
}

/* Parses "src dst": 0, or -1 when malformed. */
static int parse_link(char *line, uint64_t *u, uint64_t *v)
{
    char *p = read_uint(line, u);

    if (p == NULL || (*p != ' ' && *p != '\t') || (p = read_uint(p, v)) == NULL)
        return -1;
    return at_end(p) && *u < PAGE_LIMIT && *v < PAGE_LIMIT ? 0 : -1;
}

/* What a reader needs to report a line. */
struct reader {
    const char *prog, *path;
    FILE *f;
    char *line;
    size_t cap;
    uint64_t lineno;
};

/* The next line that is not skipped, or NULL at the end. */
static char *next_line(struct reader *r, const char *comments)
{
    while (getline(&r->line, &r->cap, r->f) >= 0) {
        r->lineno++;
        if (!skipped(r->line, comments))
            return r->line;
    }
    return NULL;
}

static int line_error(const struct reader *r, const char *what)
{
    fprintf(stderr, "%s: %s:%" PRIu64 ": %s\n", r->prog, r->path, r->lineno,
            what);
    return -1;
}

static int no_memory(const struct reader *r)
{
    fprintf(stderr, "%s: no memory for the links of '%s'\n", r->prog, r->path);
    return -1;
}

/* "src dst" lines, the first already read; # and % start comments. */
static int read_edge_list(struct reader *r, struct edge_list *el, char *line)
{
    uint64_t u, v;

    for (; line != NULL; line = next_line(r, "#%")) {
        if (parse_link(line, &u, &v) != 0) {
            fprintf(stderr, "%s: %s:%" PRIu64 ": expected 'src dst', two page "
                    "numbers from 0 to %u\n", r->prog, r->path, r->lineno,
                    PAGE_LIMIT - 1);
            return -1;
        }
        if (push_edge(el, u, v) != 0)
            return no_memory(r);
    }
    return 0;
}

/* The banner's words; -1 after one line when it is not a square sparse
 * matrix of pattern, real or integer entries. */
static int mtx_banner(const struct reader *r, const char *line, int *values,
                      int *symmetric)
{
    char object[32], format[32], field[32], sym[32];

    if (sscanf(line, "%%%%MatrixMarket %31s %31s %31s %31s", object, format,
               field, sym) != 4 || strcasecmp(object, "matrix") != 0)
        return line_error(r, "expected '%%MatrixMarket matrix coordinate "
                          "FIELD SYMMETRY'");
    if (strcasecmp(format, "coordinate") != 0)
        return line_error(r, "Matrix Market format is not 'coordinate' (a "
                          "sparse matrix of links)");
    *values = strcasecmp(field, "pattern") != 0;
    if (*values && strcasecmp(field, "real") != 0 &&
        strcasecmp(field, "integer") != 0)
        return line_error(r, "Matrix Market field is not pattern, real or "
                          "integer");
    *symmetric = strcasecmp(sym, "symmetric") == 0;
    if (!*symmetric && strcasecmp(sym, "general") != 0)
        return line_error(r, "Matrix Market symmetry is not general or "
                          "symmetric");
    return 0;
}

/*
 * Matrix Market coordinate: entry (i, j) is a link from page i to page j,
 * ids from 1; a symmetric matrix links both ways. Values, if any, must be
 * numbers and are otherwise ignored: every entry is one link.
 */
static int read_mtx(struct reader *r, struct edge_list *el)
{
    uint64_t rows, cols, nnz, i, j, seen = 0;
    int values, symmetric;
    char *p, *line;

    if (mtx_banner(r, r->line, &values, &symmetric) != 0)
        return -1;
    if ((line = next_line(r, "%")) == NULL)
        return line_error(r, "no size line 'rows cols entries'");
    if ((p = read_uint(line, &rows)) == NULL || (p = read_uint(p, &cols)) ==
        NULL || (p = read_uint(p, &nnz)) == NULL || !at_end(p))
        return line_error(r, "expected the size line 'rows cols entries'");
    if (rows != cols || rows == 0 || rows > PAGE_LIMIT)
        return line_error(r, "the matrix must be square, from 1 to 2^32 - 1 "
                          "pages");
    el->base = 1;
    while ((line = next_line(r, "%")) != NULL) {
        double value;
        char *end;

        if (seen == nnz)
            return line_error(r, "more entries than the size line says");
        p = read_uint(line, &i);
        p = p != NULL ? read_uint(p, &j) : NULL;
        if (p != NULL && values) {
            value = strtod(p, &end);
            p = end != p && value == value ? end : NULL;
        }
        if (p == NULL || !at_end(p) || i < 1 || i > rows || j < 1 || j > rows)
            return line_error(r, values ? "expected 'row col value', row "
                              "and col from 1 to the order"
                              : "expected 'row col', from 1 to the order");
        if (push_edge(el, i - 1, j - 1) != 0 ||
            (symmetric && i != j && push_edge(el, j - 1, i - 1) != 0))
            return no_memory(r);
        seen++;
    }
    if (seen != nnz) {
        fprintf(stderr, "%s: %s: the size line says %" PRIu64 " entries, the "
                "file has %" PRIu64 "\n", r->prog, r->path, nnz, seen);
        return -1;
    }
    el->pages = rows; /* pages without links count too */
    return 0;
}

int pf_read_graph(const char *prog, const char *path, struct edge_list *el)
{
    struct reader r = {prog, path, fopen(path, "r"), NULL, 0, 0};
    char *first;
    int rc;

    *el = (struct edge_list){0};
    if (r.f == NULL) {
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog, path,
                strerror(errno));
        return -1;
    }
    first = getline(&r.line, &r.cap, r.f) >= 0 ? r.line : NULL;
    r.lineno = first != NULL;
    if (first != NULL && strncmp(first, "%%MatrixMarket", 14) == 0)
        rc = read_mtx(&r, el);
    else
        rc = read_edge_list(&r, el, first == NULL || skipped(first, "#%")
                                        ? next_line(&r, "#%") : first);
    if (rc == 0 && ferror(r.f)) {
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog, path,
                strerror(errno));
        rc = -1;
    } else if (rc == 0 && el->n == 0) {
        fprintf(stderr, "%s: '%s' has no links\n", prog, path);
        rc = -1;
    }
    free(r.line);
    fclose(r.f);
    if (rc != 0)
        pf_free_graph(el);
    return rc;
}

void pf_free_graph(struct edge_list *el)
{
    free(el->src);
    free(el->dst);
    el->src = el->dst = NULL;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

char **pf_read_names(const char *prog, const char *path, uint64_t pages,
                     unsigned base)
{
    struct reader r = {prog, path, fopen(path, "r"), NULL, 0, 0};
    char **names = calloc(pages, sizeof *names);
    char *line, *p;
    uint64_t id;
    int ok = r.f != NULL && names != NULL;

    if (r.f == NULL)
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog, path,
                strerror(errno));
    else if (names == NULL)
        fprintf(stderr, "%s: no memory for the names of '%s'\n", prog, path);
    while (ok && (line = next_line(&r, "#")) != NULL) {
        size_t len;

        p = read_uint(line, &id);
        if (p == NULL || (*p != ' ' && *p != '\t') || id < base) {
            ok = line_error(&r, base ? "expected 'id name', ids from 1"
                                     : "expected 'id name', ids from 0") == 0;
            break;
        }
        p += strspn(p, " \t");
        len = strcspn(p, "\r\n");
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0) {
            ok = line_error(&r, "a page id without a name") == 0;
        } else if (id - base >= pages) {
            continue; /* a page the graph does not have */
        } else if (names[id - base] != NULL) {
            ok = line_error(&r, "a second name for the same page") == 0;
        } else if ((names[id - base] = strndup(p, len)) == NULL) {
            fprintf(stderr, "%s: no memory for the names of '%s'\n", prog,
                    path);
            ok = 0;
        }
    }
    if (ok && ferror(r.f)) {
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog, path,
                strerror(errno));
        ok = 0;
    }
    free(r.line);
    if (r.f != NULL)
        fclose(r.f);
    if (!ok) {
        pf_free_names(names, pages);
        return NULL;
    }
    return names;
}

void pf_free_names(char **names, uint64_t pages)
{
    if (names == NULL)
        return;
    for (uint64_t v = 0; v < pages; v++)
        free(names[v]);
    free(names);
}

/* ------------------------------------------------------------------------ */
/* Ranks                                                                     */
/* ------------------------------------------------------------------------ */

/* Page v as the user knows it: its name, or its id in the file's numbering. */
static void put_page(FILE *f, uint64_t v, char *const *names, unsigned base)
{
    if (names != NULL && names[v] != NULL)
        fputs(names[v], f);
    else
        fprintf(f, "%" PRIu64, v + base);
}

int pf_write_ranks(FILE *f, const double *rank, uint64_t pages,
                   char *const *names, unsigned base)
{
    for (uint64_t v = 0; v < pages; v++) {
        put_page(f, v, names, base);
        if (fprintf(f, " %.17g\n", rank[v]) < 0)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}

/* Whether page a ranks below page b: lower rank, or equal and higher id. */
static int below(const double *rank, uint32_t a, uint32_t b)
{
    return rank[a] < rank[b] || (rank[a] == rank[b] && a > b);
}

/* Restores the min-heap h[0 .. n) (the lowest page on top) from i down. */
static void sift_down(uint32_t *h, uint64_t n, uint64_t i, const double *rank)
{
    for (;;) {
        uint64_t low = i, l = 2 * i + 1, r = l + 1;
        uint32_t t;

        if (l < n && below(rank, h[l], h[low]))
            low = l;
        if (r < n && below(rank, h[r], h[low]))
            low = r;
        if (low == i)
            return;
        t = h[i], h[i] = h[low], h[low] = t;
        i = low;
    }
}

int pf_print_top(const double *rank, uint64_t pages, uint64_t k,
                 char *const *names, unsigned base)
{
    uint32_t *h;

    k = k < pages ? k : pages;
    if ((h = malloc((k > 0 ? k : 1) * sizeof *h)) == NULL)
        return -1;
    /* keep the k highest seen so far, the lowest of them on top */
    for (uint64_t v = 0; v < pages; v++) {
        if (v < k) {
            h[v] = (uint32_t)v;
            if (v + 1 == k)
                for (uint64_t i = k / 2; i-- > 0;)
                    sift_down(h, k, i, rank);
        } else if (k > 0 && below(rank, h[0], (uint32_t)v)) {
            h[0] = (uint32_t)v;
            sift_down(h, k, 0, rank);
        }
    }
    /* take the lowest off the top: the heap sorts itself, highest first */
    for (uint64_t n = k; n > 1; n--) {
        uint32_t t = h[0];

        h[0] = h[n - 1], h[n - 1] = t;
        sift_down(h, n - 1, 0, rank);
    }
    printf("top %" PRIu64 " pages by rank:\n", k);
    for (uint64_t i = 0; i < k; i++) {
        printf("%6" PRIu64 ". ", i + 1);
        put_page(stdout, h[i], names, base);
        printf(" %.10g\n", rank[h[i]]);
    }
    free(h);
    return 0;
}
