/* Files the sample apps read and write; see appio.h. */
#define _POSIX_C_SOURCE 200809L /* fsync, link, sigaction under -std=c11 */

#include "appio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __GNUC__
#define IO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define IO_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------------ */
/* Temporary files removed on a fatal signal                                 */
/* ------------------------------------------------------------------------ */

#define MAX_PENDING 8

/* The temporary files being written; a handler may read them at any time. */
static char *volatile pending[MAX_PENDING];

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous[NFATAL];
static int handlers_installed;

/* Removes the pending files, then does what the signal did before. */
static void on_fatal_signal(int sig)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i] != NULL)
            unlink(pending[i]); /* async-signal-safe */
    for (size_t i = 0; i < NFATAL; i++) {
        if (fatal_signals[i] != sig)
            continue;
        if (previous[i].sa_handler != SIG_DFL &&
            previous[i].sa_handler != SIG_IGN) {
            previous[i].sa_handler(sig); /* pmlib's SIGTERM message, say */
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    struct sigaction sa;

    if (handlers_installed)
        return;
    handlers_installed = 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFATAL; i++) {
        if (sigaction(fatal_signals[i], NULL, &previous[i]) != 0 ||
            previous[i].sa_handler == SIG_IGN)
            continue; /* nohup: leave it ignored */
        sigaction(fatal_signals[i], &sa, NULL);
    }
    /* Past the file size limit, a write then fails (EFBIG) and the app
     * cleans up, instead of dying with the temporary file left behind. */
    signal(SIGXFSZ, SIG_IGN);
}

/* ------------------------------------------------------------------------ */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------ */

IO_PRINTF(2, 3)
static void out_error(const struct app_out *o, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", o->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/*
 * Whether path exists and, if so, may be written; -1 after one line. An
 * output that is one of the inputs is refused unless `in_place` (the app
 * has read its inputs in full before it commits), and then needs force
 * like any existing file.
 */
static int check_path(const struct app_out *o, const char *const inputs[],
                      int in_place)
{
    struct stat out, in;

    if (stat(o->path, &out) != 0)
        return 0; /* nothing there (or a dangling link): nothing to lose */
    for (int i = 0; inputs != NULL && inputs[i] != NULL; i++) {
        if (stat(inputs[i], &in) != 0 || in.st_dev != out.st_dev ||
            in.st_ino != out.st_ino)
            continue;
        if (!in_place) {
            out_error(o, "output '%s' is the input '%s' (the same file); "
                      "write the output to another file", o->path, inputs[i]);
            return -1;
        }
        if (!o->force) {
            out_error(o, "output '%s' is the input '%s' (the same file); "
                      "use --force to replace it", o->path, inputs[i]);
            return -1;
        }
    }
    if (!S_ISREG(out.st_mode)) {
        out_error(o, "output '%s' exists and is not a regular file", o->path);
        return -1;
    }
    if (!o->force) {
        out_error(o, "output '%s' exists; use --force to replace it", o->path);
        return -1;
    }
    return 0;
}

/* "DIR/.BASE.tmpPID-N", beside path; NULL when out of memory. */
static char *temp_name(const char *path, unsigned n)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    size_t len = strlen(path) + 48;
    char *tmp = malloc(len);

    if (tmp != NULL)
        snprintf(tmp, len, "%.*s.%s.tmp%ld-%u", (int)dir, path, path + dir,
                 (long)getpid(), n);
    return tmp;
}

static int out_open(struct app_out *o, const char *prog, const char *path,
                    int force, const char *const inputs[], int in_place)
{
    int fd = -1;

    *o = (struct app_out){prog, path, NULL, NULL, force, -1};
    if (check_path(o, inputs, in_place) != 0)
        return -1;
    for (unsigned n = 0; fd < 0 && n < 100; n++) {
        free(o->tmp);
        if ((o->tmp = temp_name(path, n)) == NULL)
            break;
        /* 0666: the umask decides, as for any new file */
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0 || (o->f = fdopen(fd, "wb")) == NULL) {
        out_error(o, "cannot write '%s': %s", path,
                  o->tmp != NULL ? strerror(errno) : "out of memory");
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        free(o->tmp);
        o->tmp = NULL;
        return -1;
    }
    install_handlers();
    for (int i = 0; i < MAX_PENDING && o->slot < 0; i++)
        if (pending[i] == NULL)
            pending[o->slot = i] = o->tmp;
    return 0;
}

int app_out_open(struct app_out *o, const char *prog, const char *path,
                 int force, const char *const inputs[])
{
    return out_open(o, prog, path, force, inputs, 0);
}

int app_out_open_in_place(struct app_out *o, const char *prog,
                          const char *path, int force,
                          const char *const inputs[])
{
    return out_open(o, prog, path, force, inputs, 1);
}

/* Forgets the temporary file (already renamed or removed). */
static void out_release(struct app_out *o)
{
    if (o->slot >= 0)
        pending[o->slot] = NULL;
    free(o->tmp);
    o->tmp = NULL;
    o->f = NULL;
}

void app_out_abort(struct app_out *o)
{
    if (o->tmp == NULL)
        return;
    if (o->f != NULL)
        fclose(o->f);
    unlink(o->tmp);
    out_release(o);
}

/* Puts the finished temporary file at the output's name; -1 with errno. */
static int place(struct app_out *o)
{
    struct stat st;

    if (o->force)
        return rename(o->tmp, o->path);
    /* link() fails rather than replace a file that appeared meanwhile */
    if (link(o->tmp, o->path) == 0)
        return unlink(o->tmp), 0;
    if (errno == EEXIST)
        return -1;
    /* a file system without hard links */
    if (stat(o->path, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(o->tmp, o->path);
}

int app_out_commit(struct app_out *o)
{
    int bad = fflush(o->f) != 0 || ferror(o->f);

    /* the bytes on disk before the name points at them */
    bad = bad || (fsync(fileno(o->f)) != 0 && errno != EINVAL);
    if (fclose(o->f) != 0)
        bad = 1;
    o->f = NULL;
    if (bad || place(o) != 0) {
        if (!bad && errno == EEXIST)
            out_error(o, "output '%s' appeared while it was being written; "
                      "kept it (use --force to replace it)", o->path);
        else
            out_error(o, "cannot write '%s': %s", o->path, strerror(errno));
        unlink(o->tmp);
        out_release(o);
        return -1;
    }
    out_release(o);
    return 0;
}

int app_out_finish(struct app_out *o, int written)
{
    if (!written) {
        out_error(o, "cannot write '%s': %s", o->path, strerror(errno));
        app_out_abort(o);
        return 2;
    }
    if (app_out_commit(o) != 0)
        return 2;
    printf("wrote %s\n", o->path);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* .npy: the header                                                          */
/* ------------------------------------------------------------------------ */

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define MAX_HEADER 65536u /* far above any header of a plain array */

IO_PRINTF(2, 3)
static int npy_error(const struct app_npy *a, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: %s: ", a->prog, a->path);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static int host_is_little(void)
{
    const uint16_t one = 1;

    return *(const unsigned char *)&one == 1;
}

/* A cursor over the header's dict literal. */
struct cursor {
    const char *p, *end;
};

static void skip_space(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n'))
        c->p++;
}

/* Takes `ch` after any spaces; 0 when it is not there. */
static int take(struct cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes into buf; 0 when there is none. */
static int take_string(struct cursor *c, char *buf, size_t size)
{
    const char *q;
    char quote;

    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    quote = *c->p++;
    for (q = c->p; q < c->end && *q != quote && *q != '\\'; q++)
        ;
    if (q >= c->end || *q != quote || (size_t)(q - c->p) >= size)
        return 0;
    memcpy(buf, c->p, (size_t)(q - c->p));
    buf[q - c->p] = '\0';
    c->p = q + 1;
    return 1;
}

/* A word made of letters (True, False); 0 when there is none. */
static int take_word(struct cursor *c, const char *word)
{
    size_t n = strlen(word);

    skip_space(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

/* A non-negative integer (Python 2 wrote a trailing L); 0 when none. */
static int take_uint(struct cursor *c, uint64_t *v)
{
    int digits = 0;

    skip_space(c);
    *v = 0;
    for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++, digits++) {
        unsigned d = (unsigned)(*c->p - '0');

        if (*v > (UINT64_MAX - d) / 10)
            return 0;
        *v = *v * 10 + d;
    }
    if (digits > 0 && c->p < c->end && *c->p == 'L')
        c->p++;
    return digits > 0;
}

/* "(3, 4)", "(5,)" or "()"; -1 after one line. */
static int parse_shape(struct app_npy *a, struct cursor *c)
{
    a->ndim = 0;
    if (!take(c, '('))
        return npy_error(a, ".npy header: shape is not a tuple");
    if (take(c, ')'))
        return 0;
    for (;;) {
        if (a->ndim == APP_NPY_MAX_DIMS)
            return npy_error(a, ".npy header: shape has more than %d "
                             "dimensions", APP_NPY_MAX_DIMS);
        if (!take_uint(c, &a->shape[a->ndim++]))
            return npy_error(a, ".npy header: shape holds something other "
                             "than sizes");
        /* "(5)" is a number in Python, not a tuple */
        if (a->ndim > 1 && take(c, ')'))
            return 0;
        if (!take(c, ','))
            return npy_error(a, ".npy header: shape is not a tuple");
        if (take(c, ')'))
            return 0;
    }
}

/* The type `want` ("f4", "c8", "f8") against descr; -1 after one line. */
static int check_descr(struct app_npy *a, const char *descr, const char *want)
{
    static const struct {
        const char *type;
        unsigned item, scalar;
        const char *name;
    } types[] = {{"f4", 4, 4, "float32"}, {"c8", 8, 4, "complex64"},
                 {"f8", 8, 8, "float64"}};
    char order = descr[0];

    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(types[i].type, want) != 0)
            continue;
        if (strlen(descr) != 3 || strcmp(descr + 1, want) != 0 ||
            (order != '<' && order != '>' && order != '='))
            return npy_error(a, ".npy header: descr '%s' is not %s ('<%s')",
                             descr, types[i].name, want);
        a->item = types[i].item;
        a->swap = (order == '<' && !host_is_little()) ||
                  (order == '>' && host_is_little()) ? types[i].scalar : 0;
        return 0;
    }
    return npy_error(a, "no such element type '%s'", want);
}

/* The dict literal: exactly descr, fortran_order and shape, once each. */
static int parse_header(struct app_npy *a, const char *h, size_t len,
                        const char *want)
{
    struct cursor c = {h, h + len};
    char key[32], descr[32];
    int seen[3] = {0, 0, 0};

    if (!take(&c, '{'))
        return npy_error(a, ".npy header: not a dict");
    while (!take(&c, '}')) { /* ends after a trailing comma too */
        int k;

        if (!take_string(&c, key, sizeof key))
            return npy_error(a, ".npy header: a key is not a plain string");
        k = strcmp(key, "descr") == 0           ? 0
            : strcmp(key, "fortran_order") == 0 ? 1
            : strcmp(key, "shape") == 0         ? 2 : -1;
        if (k < 0)
            return npy_error(a, ".npy header: unknown key '%s'", key);
        if (seen[k]++)
            return npy_error(a, ".npy header: key '%s' twice", key);
        if (!take(&c, ':'))
            return npy_error(a, ".npy header: no ':' after '%s'", key);
        if (k == 0 && !take_string(&c, descr, sizeof descr))
            return npy_error(a, ".npy header: descr is not a type string "
                             "(a structured array?)");
        if (k == 0 && check_descr(a, descr, want) != 0)
            return -1;
        if (k == 1 && take_word(&c, "True"))
            return npy_error(a, ".npy header: fortran_order is True; save a "
                             "C-ordered array (numpy.ascontiguousarray)");
        if (k == 1 && !take_word(&c, "False"))
            return npy_error(a, ".npy header: fortran_order is not False");
        if (k == 2 && parse_shape(a, &c) != 0)
            return -1;
        if (take(&c, '}'))
            break;
        if (!take(&c, ','))
            return npy_error(a, ".npy header: no ',' after '%s'", key);
    }
    skip_space(&c);
    if (c.p != c.end)
        return npy_error(a, ".npy header: text after the dict");
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return npy_error(a, ".npy header: no '%s'",
                             k == 0 ? "descr" : k == 1 ? "fortran_order"
                                                       : "shape");
    return 0;
}

/* Reads n header bytes; -1 after one line when the file ends first. */
static int read_exact(struct app_npy *a, void *dst, size_t n, const char *what)
{
    if (fread(dst, 1, n, a->f) == n)
        return 0;
    if (ferror(a->f))
        return npy_error(a, "cannot read: %s", strerror(errno));
    return npy_error(a, "the file ends inside the %s", what);
}

/* Checks the shape against ndim and the file's length. */
static int check_size(struct app_npy *a, int ndim, uint64_t data_at)
{
    struct stat st;
    uint64_t bytes;

    if (ndim > 0 && a->ndim != ndim)
        return npy_error(a, ".npy header: shape has %d dimension%s, "
                         "expected %d", a->ndim, a->ndim == 1 ? "" : "s", ndim);
    a->count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != 0 && a->count > UINT64_MAX / a->shape[i])
            return npy_error(a, ".npy header: shape is too large");
        a->count *= a->shape[i];
    }
    if (a->count > (uint64_t)SIZE_MAX / a->item)
        return npy_error(a, ".npy header: shape is too large");
    bytes = a->count * a->item;
    if (fstat(fileno(a->f), &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size - data_at != bytes)
        return npy_error(a, "shape says %" PRIu64 " bytes of data, the file "
                         "has %" PRIu64, bytes, (uint64_t)st.st_size - data_at);
    return 0;
}

int app_npy_open(struct app_npy *a, const char *prog, const char *path,
                 const char *type, int ndim)
{
    unsigned char pre[12];
    uint32_t hlen;
    size_t lenbytes;
    char *h = NULL;
    int rc = -1;

    *a = (struct app_npy){.prog = prog, .path = path};
    if ((a->f = fopen(path, "rb")) == NULL) {
        fprintf(stderr, "%s: cannot read '%s': %s\n", prog, path,
                strerror(errno));
        return -1;
    }
    if (read_exact(a, pre, 8, "magic string") != 0)
        goto fail;
    if (memcmp(pre, npy_magic, sizeof npy_magic) != 0) {
        npy_error(a, "not a .npy file (no \\x93NUMPY magic string)");
        goto fail;
    }
    if (pre[7] != 0 || pre[6] < 1 || pre[6] > 3) {
        npy_error(a, ".npy version %u.%u; this reader knows 1.0, 2.0 and 3.0",
                  pre[6], pre[7]);
        goto fail;
    }
    lenbytes = pre[6] == 1 ? 2 : 4;
    if (read_exact(a, pre + 8, lenbytes, "header length") != 0)
        goto fail;
    hlen = pre[8] | (uint32_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen == 0 || hlen > MAX_HEADER) {
        npy_error(a, ".npy header length %" PRIu32 " is not from 1 to %u",
                  hlen, MAX_HEADER);
        goto fail;
    }
    if ((h = malloc(hlen)) == NULL) {
        npy_error(a, "out of memory");
        goto fail;
    }
    if (read_exact(a, h, hlen, "header") != 0)
        goto fail;
    if (h[hlen - 1] != '\n' || memchr(h, '\0', hlen) != NULL) {
        npy_error(a, ".npy header does not end with a newline");
        goto fail;
    }
    if (parse_header(a, h, hlen - 1, type) != 0 ||
        check_size(a, ndim, 8 + lenbytes + hlen) != 0)
        goto fail;
    rc = 0;
fail:
    free(h);
    if (rc != 0) {
        fclose(a->f);
        a->f = NULL;
    }
    return rc;
}

/* Reverses each `size`-byte scalar of p[0 .. bytes). */
static void swap_bytes(unsigned char *p, uint64_t bytes, unsigned size)
{
    for (uint64_t i = 0; i + size <= bytes; i += size)
        for (unsigned j = 0; j < size / 2; j++) {
            unsigned char t = p[i + j];

            p[i + j] = p[i + size - 1 - j];
            p[i + size - 1 - j] = t;
        }
}

int app_npy_read(struct app_npy *a, void *dst)
{
    size_t bytes = (size_t)(a->count * a->item);
    int rc = 0;

    if (bytes > 0 && fread(dst, 1, bytes, a->f) != bytes)
        rc = npy_error(a, ferror(a->f) ? "cannot read the data"
                                       : "the file ends inside the data");
    else if (fgetc(a->f) != EOF)
        rc = npy_error(a, "bytes after the data the shape says");
    if (rc == 0 && a->swap)
        swap_bytes(dst, bytes, a->swap);
    app_npy_close(a);
    return rc;
}

void app_npy_close(struct app_npy *a)
{
    if (a->f != NULL)
        fclose(a->f);
    a->f = NULL;
}

int app_npy_write(FILE *f, const char *type, int ndim, const uint64_t *shape,
                  const void *data)
{
    char head[512];
    int len = snprintf(head, sizeof head, "{'descr': '%c%s', 'fortran_order':"
                       " False, 'shape': (", host_is_little() ? '<' : '>',
                       type);
    uint64_t bytes = strcmp(type, "f4") == 0 ? 4 : 8;
    unsigned char pre[10];
    int total;

    for (int i = 0; i < ndim; i++) {
        len += snprintf(head + len, sizeof head - (size_t)len, "%" PRIu64 "%s",
                        shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        bytes *= shape[i];
    }
    len += snprintf(head + len, sizeof head - (size_t)len, "), }");
    /* spaces and a newline so that the data starts 64-byte aligned */
    total = (10 + len + 1 + 63) / 64 * 64;
    memset(head + len, ' ', (size_t)(total - 10 - len - 1));
    head[total - 10 - 1] = '\n';
    memcpy(pre, npy_magic, sizeof npy_magic);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)((total - 10) & 0xff);
    pre[9] = (unsigned char)((total - 10) >> 8);
    if (fwrite(pre, 1, 10, f) != 10 ||
        fwrite(head, 1, (size_t)(total - 10), f) != (size_t)(total - 10) ||
        (bytes > 0 && fwrite(data, 1, (size_t)bytes, f) != bytes))
        return -1;
    return 0;
}
