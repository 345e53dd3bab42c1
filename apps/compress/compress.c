/*
 * compress: gzip a file in blocks, on every core of every host.
 *
 * Host 0 reads the file into a memory. Subtask k deflates block k with its
 * own raw-deflate stream and emits the bytes with pm_redistribute (key k),
 * so that pmlib gathers every block's output on host 0, in block order.
 * The streams are made to concatenate into ONE valid deflate stream: every
 * block but the last ends with Z_SYNC_FLUSH (its deflate blocks are not
 * final, and an empty stored block pads it to a byte boundary), only the
 * last uses Z_FINISH. Each stream is primed with the 32 KiB before its block
 * (deflateSetDictionary), so matches may reach back across block starts as
 * in one serial stream; a decoder's window holds those bytes anyway.
 *
 * Each subtask also writes its block's crc32 into a 4-byte slot of a small
 * memory; host 0 joins them with crc32_combine and writes the gzip header,
 * the gathered stream and the trailer (crc32, size mod 2^32).
 *
 * CPU only: zlib has no GPU version here, so there is no cuda callback.
 * The serial reference is plain zlib (deflateInit2 with a gzip wrapper) over
 * the whole file in one stream.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "appcommon.h"
#include "appdevice.h"
#include "appio.h"
#include "pmlib.h"

#define DEFAULT_LEVEL 6
#define DEFAULT_BLOCK (1u << 20)
#define MAX_BLOCK (1u << 30) /* a subtask holds its block and its output */
#define WINDOW 32768u        /* deflate's window: the most a match reaches back */
#define CHUNK (1u << 30)     /* the most handed to one zlib call */

/* A growing output buffer. */
struct buffer {
    unsigned char *data;
    size_t len, cap;
};

/* Makes room for at least `more` bytes after len; -1 when out of memory. */
static int reserve(struct buffer *b, size_t more)
{
    size_t cap = b->cap ? b->cap : 4096;
    unsigned char *p;

    while (cap - b->len < more)
        cap *= 2;
    if (cap == b->cap)
        return 0;
    if ((p = realloc(b->data, cap)) == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

/*
 * Runs deflate with `flush` until it has taken all of its input and, for
 * Z_FINISH, ended the stream; appends the output to out.
 */
static int drain(z_stream *z, int flush, struct buffer *out)
{
    int rc;

    do {
        if (reserve(out, 65536) != 0)
            return Z_MEM_ERROR;
        z->next_out = out->data + out->len;
        z->avail_out = (uInt)(out->cap - out->len < CHUNK ? out->cap - out->len
                                                           : CHUNK);
        rc = deflate(z, flush);
        out->len = (size_t)(z->next_out - out->data);
        if (rc == Z_STREAM_ERROR)
            return rc;
    } while (z->avail_out == 0 || z->avail_in > 0 ||
             (flush == Z_FINISH && rc != Z_STREAM_END));
    return Z_OK;
}

/* Feeds in[0..len) to deflate in CHUNK pieces; the last piece with `flush`. */
static int deflate_all(z_stream *z, const unsigned char *in, size_t len,
                       int flush, struct buffer *out)
{
    int rc = Z_OK;

    do {
        size_t n = len < CHUNK ? len : CHUNK;

        z->next_in = (unsigned char *)in; /* zlib's API is not const */
        z->avail_in = (uInt)n;
        in += n;
        len -= n;
        rc = drain(z, len == 0 ? flush : Z_NO_FLUSH, out);
    } while (rc == Z_OK && len > 0);
    return rc;
}

/* Serial reference: the whole file as one gzip stream, on one core. */
static int compress_serial(const unsigned char *in, size_t len, int level,
                           struct buffer *out)
{
    z_stream z = {0};
    int rc = deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8,
                          Z_DEFAULT_STRATEGY);

    if (rc != Z_OK)
        return rc;
    rc = deflate_all(&z, in, len, Z_FINISH, out);
    deflateEnd(&z);
    return rc;
}

/*
 * Block k of the parallel version: one raw-deflate segment of in[0..len),
 * primed with the dict_len bytes before it; `last` ends the whole stream.
 * Shared by the subtasks and by host 0 for an empty file.
 */
static int deflate_segment(const unsigned char *in, size_t len,
                           size_t dict_len, int level, int last,
                           struct buffer *out)
{
    z_stream z = {0};
    int rc = deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);

    if (rc != Z_OK)
        return rc;
    if (dict_len > 0)
        rc = deflateSetDictionary(&z, in - dict_len, (uInt)dict_len);
    if (rc == Z_OK)
        rc = deflate_all(&z, in, len, last ? Z_FINISH : Z_SYNC_FLUSH, out);
    deflateEnd(&z);
    return rc;
}

/* crc32 of any length (crc32 itself takes 32-bit lengths). */
static uLong crc_of(const unsigned char *p, size_t len)
{
    uLong crc = crc32(0, Z_NULL, 0);

    for (size_t n; len > 0; p += n, len -= n) {
        n = len < CHUNK ? len : CHUNK;
        crc = crc32(crc, p, (uInt)n);
    }
    return crc;
}

/* ------------------------------------------------------------------------ */
/* pmlib version                                                             */
/* ------------------------------------------------------------------------ */

struct compress_conf {
    uint64_t size;  /* file bytes */
    uint64_t block; /* bytes per subtask; the last may have fewer */
    int level;
};

enum { MEM_INPUT, MEM_CRC };

/* Subtask k compresses [*lo, *hi), primed with [*dict, *lo). */
static void block_of(const struct compress_conf *cf, uint64_t k, uint64_t *dict,
                     uint64_t *lo, uint64_t *hi)
{
    *lo = k * cf->block;
    *hi = *lo + cf->block < cf->size ? *lo + cf->block : cf->size;
    *dict = *lo > WINDOW ? *lo - WINDOW : 0;
}

static int compress_subscribe(pm_subscription_t *sub,
                              const pm_subtask_info_t *info)
{
    uint64_t dict, lo, hi;
    int rc;

    block_of(info->conf, info->id, &dict, &lo, &hi);
    rc = pm_subscribe(sub, MEM_INPUT, PM_READ, dict, hi - dict);
    if (rc == 0)
        rc = pm_subscribe(sub, MEM_CRC, PM_WRITE, info->id * sizeof(uint32_t),
                          sizeof(uint32_t));
    return rc;
}

static int compress_cpu(const pm_subtask_info_t *info)
{
    const struct compress_conf *cf = info->conf;
    const unsigned char *in = info->mem[MEM_INPUT];
    struct buffer out = {0};
    uint64_t dict, lo, hi;
    int rc;

    block_of(cf, info->id, &dict, &lo, &hi);
    rc = deflate_segment(in + lo, hi - lo, lo - dict, cf->level,
                         info->id + 1 == info->count, &out);
    if (rc == Z_OK) /* pmlib copies the bytes; out is ours to free */
        rc = pm_redistribute(info, info->id, out.data, out.len);
    ((uint32_t *)info->mem[MEM_CRC])[info->id] = (uint32_t)crc_of(in + lo, hi - lo);
    free(out.data);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

struct options {
    const char *in, *out;
    uint64_t level, block;
    int serial, verify, force;
};

static void usage(void)
{
    printf(
"usage: compress FILE -o OUT.gz [-f] [--level L] [--block BYTES]\n"
"                [--device cpu] [--no-serial] [--verify] [--help]\n"
"\n"
"Writes FILE gzip-compressed to OUT.gz, one subtask per block, on every\n"
"core of every host; gunzip restores it byte for byte. Each block is a\n"
"segment of one deflate stream, primed with the 32 KiB before it. The\n"
"serial run is zlib over the whole file in one stream, on one core; both\n"
"times exclude reading FILE and writing OUT.gz.\n"
"\n"
"  -o OUT.gz      the output file; never FILE itself (nor a link to it),\n"
"                 and not an existing file unless -f. Written to a\n"
"                 temporary file beside it, renamed once complete: on\n"
"                 failure (full disk, a signal) no OUT.gz is left\n"
"  -f, --force    replace OUT.gz if it exists\n"
"  --level L      zlib level, 0 (store) to 9 (smallest); default %d\n"
"  --block BYTES  bytes per subtask (default %u, i.e. 1 MiB; 4e6, 4M work\n"
"                 too); at most %u\n"
"  --device cpu   the only choice: zlib runs on CPUs only\n"
"  --no-serial    skip the serial run, so no speedup is printed\n"
"  --verify       decompress OUT.gz in-process and compare it with FILE;\n"
"                 exit 1 if they differ\n"
"\n"
"Exit status: 0, 1 when --verify fails, 2 for bad arguments or files.\n"
"Environment: PMLIB_NCPU (CPU stubs per host). Under mpirun every host\n"
"takes part; host 0 reads FILE, writes OUT.gz and prints the results.\n",
           DEFAULT_LEVEL, DEFAULT_BLOCK, MAX_BLOCK);
}

/* Options with a value; returns 0 when `a` is none of them. */
static int parse_value(const char *a, const char *val, struct options *o)
{
    if (strcmp(a, "-o") == 0) {
        if (val == NULL)
            app_usage_error("compress", "-o needs a file name");
        o->out = val;
    } else if (strcmp(a, "--level") == 0) {
        o->level = app_size_arg("compress", a, val);
        if (o->level > 9)
            app_usage_error("compress", "--level must be from 0 to 9");
    } else if (strcmp(a, "--block") == 0) {
        o->block = app_size_arg("compress", a, val);
        if (o->block == 0 || o->block > MAX_BLOCK)
            app_usage_error("compress", "--block must be from 1 to %u", MAX_BLOCK);
    } else if (strcmp(a, "--device") == 0) {
        if (app_device_arg("compress", a, val) != PM_DEVICE_CPU)
            app_usage_error("compress", "--device %s: compress runs on CPUs "
                            "only (zlib); use --device cpu", val);
    } else {
        return 0;
    }
    return 1;
}

/* Parsed before pm_init, so that --help and typos start no runtime. */
static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){NULL, NULL, DEFAULT_LEVEL, DEFAULT_BLOCK, 1, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            exit(0);
        } else if (parse_value(a, val, o)) {
            i++;
        } else if (strcmp(a, "--no-serial") == 0) {
            o->serial = 0;
        } else if (strcmp(a, "--verify") == 0) {
            o->verify = 1;
        } else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0) {
            o->force = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            app_usage_error("compress", "unknown option '%s'", a);
        } else if (o->in != NULL) {
            app_usage_error("compress", "one input file only ('%s' and '%s')",
                            o->in, a);
        } else {
            o->in = a;
        }
    }
    if (o->in == NULL || o->out == NULL)
        app_usage_error("compress", "give an input FILE and -o OUT.gz");
}

/* ------------------------------------------------------------------------ */
/* Host 0: files, both versions, the gzip wrapper                            */
/* ------------------------------------------------------------------------ */

/* Opens a regular file and gets its size; NULL after printing why not. */
static FILE *open_input(const char *path, uint64_t *size)
{
    FILE *f = fopen(path, "rb");
    struct stat st;

    if (f == NULL || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "compress: cannot read '%s': %s\n", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "compress: '%s' is not a regular file\n", path);
    } else {
        *size = (uint64_t)st.st_size;
        return f;
    }
    if (f != NULL)
        fclose(f);
    return NULL;
}

/* Reads exactly size bytes into dst and closes f; -1 after printing why not. */
static int read_all(FILE *f, const char *path, unsigned char *dst, uint64_t size)
{
    size_t got = size > 0 ? fread(dst, 1, size, f) : 0;
    int bad = got != size || ferror(f);

    if (bad)
        fprintf(stderr, "compress: cannot read '%s': %s\n", path,
                ferror(f) ? strerror(errno) : "it shrank while being read");
    fclose(f);
    return bad ? -1 : 0;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Header (no name, no time; OS Unix), deflate stream, crc32 and size,
 * into the temporary file; renames it onto the output when all is written. */
static int write_gzip(struct app_out *out, const unsigned char *body,
                      size_t len, uint32_t crc, uint64_t size, int level)
{
    FILE *f = out->f;
    unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0,
                              level == 9 ? 2 : level == 1 ? 4 : 0, 3};
    unsigned char tail[8];
    int bad;

    put_le32(tail, crc);
    put_le32(tail + 4, (uint32_t)size); /* ISIZE is the size mod 2^32 */
    bad = fwrite(head, 1, 10, f) != 10 || fwrite(body, 1, len, f) != len ||
          fwrite(tail, 1, 8, f) != 8;
    if (bad) {
        fprintf(stderr, "compress: cannot write '%s': %s\n", out->path,
                strerror(errno));
        app_out_abort(out);
        return -1;
    }
    return app_out_commit(out);
}

static void print_rate(const char *who, double seconds, uint64_t size,
                       uint64_t out)
{
    printf("%s %.3f s, %.1f MB/s, %" PRIu64 " bytes (%.1f%%)\n", who, seconds,
           (double)size / seconds / 1e6, out,
           size > 0 ? 100.0 * (double)out / (double)size : 100.0);
}

/* Returns the serial run's seconds, or -1 when it is skipped. */
static double run_serial(const struct options *o, const unsigned char *in,
                         uint64_t size)
{
    struct buffer out = {0};
    double t0;

    if (!o->serial)
        return -1;
    t0 = app_now();
    if (compress_serial(in, size, (int)o->level, &out) != Z_OK) {
        fprintf(stderr, "compress: zlib failed in the serial run\n");
        exit(1);
    }
    t0 = app_now() - t0;
    print_rate("serial:", t0, size, out.len);
    free(out.data);
    return t0;
}

/* The whole file's crc32, from the blocks' ones. */
static uint32_t combine_crcs(const uint32_t *crc, const struct compress_conf *cf,
                             uint64_t blocks)
{
    uLong all = crc[0];

    for (uint64_t k = 1; k < blocks; k++) {
        uint64_t dict, lo, hi;

        block_of(cf, k, &dict, &lo, &hi);
        all = crc32_combine(all, crc[k], (z_off_t)(hi - lo));
    }
    return (uint32_t)all;
}

/*
 * The parallel run: leaves the gathered deflate stream in *body (a memory
 * the caller releases), the crc32 in *crc and the task's stats in *total;
 * returns the seconds from submit to the combined crc.
 */
static double run_pmlib(const struct options *o, pm_memory_t input,
                        uint64_t size, pm_memory_t *body, uint32_t *crc,
                        pm_task_stats_t *total)
{
    struct compress_conf cf = {size, o->block, (int)o->level};
    /* an empty file still needs one subtask to end the stream */
    uint64_t blocks = size > 0 ? (size + o->block - 1) / o->block : 1;
    pm_task_desc_t desc;
    pm_memory_t crcs;
    pm_task_t task;
    size_t len;
    double t0;

    APP_CHECK(pm_memory_create(blocks * sizeof(uint32_t), &crcs));
    APP_CHECK(pm_task_desc_init(&desc));
    desc.callbacks = "compress";
    desc.subtasks = blocks;
    desc.conf = &cf;
    desc.conf_bytes = sizeof cf;
    desc.devices = PM_DEVICE_CPU;
    APP_CHECK(pm_task_desc_add(&desc, input, PM_READ)); /* MEM_INPUT */
    APP_CHECK(pm_task_desc_add(&desc, crcs, PM_WRITE)); /* MEM_CRC */
    t0 = app_now();
    APP_CHECK(pm_task_submit(&desc, &task));
    APP_CHECK(pm_task_wait(task));
    APP_CHECK(pm_task_redistributed(task, body));
    *crc = combine_crcs(pm_memory_data(crcs), &cf, blocks);
    t0 = app_now() - t0;
    APP_CHECK(pm_memory_size(*body, &len));
    print_rate("pmlib: ", t0, size, len + 18); /* + gzip header, trailer */
    app_add_stats(total, task);
    APP_CHECK(pm_task_release(task));
    APP_CHECK(pm_memory_release(crcs));
    app_print_stats(total);
    return t0;
}

/* Whether gz is one gzip stream that inflates to exactly in[0..size). */
static int gunzip_equals(const unsigned char *gz, uint64_t gz_len,
                         const unsigned char *in, uint64_t size)
{
    unsigned char *out = malloc(size + 1); /* one spare byte shows excess */
    z_stream z = {0};
    int rc = out != NULL ? inflateInit2(&z, 15 + 16) : Z_MEM_ERROR;

    while (rc == Z_OK) {
        uint64_t left_in = gz_len - z.total_in, left_out = size + 1 - z.total_out;

        z.next_in = (unsigned char *)gz + z.total_in;
        z.avail_in = (uInt)(left_in < CHUNK ? left_in : CHUNK);
        z.next_out = out + z.total_out;
        z.avail_out = (uInt)(left_out < CHUNK ? left_out : CHUNK);
        rc = inflate(&z, Z_NO_FLUSH);
    }
    rc = rc == Z_STREAM_END && z.total_in == gz_len && z.total_out == size &&
         (size == 0 || memcmp(out, in, size) == 0);
    inflateEnd(&z);
    free(out);
    return rc;
}

/* Reads OUT.gz back and inflates it; returns "OK" or "MISMATCH". */
static const char *verify(const char *path, const unsigned char *in,
                          uint64_t size)
{
    uint64_t gz_len;
    FILE *f = open_input(path, &gz_len);
    unsigned char *gz = f != NULL ? malloc(gz_len > 0 ? gz_len : 1) : NULL;
    int same = 0;

    if (gz != NULL)
        same = read_all(f, path, gz, gz_len) == 0 &&
               gunzip_equals(gz, gz_len, in, size);
    else if (f != NULL)
        fclose(f);
    free(gz);
    printf("verify: %s, inflated in-process, %s the input\n", path,
           same ? "equals" : "DIFFERS FROM");
    return same ? "OK" : "MISMATCH";
}

/* Returns the exit status: 0, 1 for a verify mismatch, 2 for a file error. */
static int run(const struct options *o)
{
    const char *inputs[] = {o->in, NULL};
    uint64_t size;
    FILE *in = open_input(o->in, &size);
    struct app_out out;
    const char *verdict = "skipped";
    double serial_s, pmlib_s, t0;
    pm_memory_t input, body;
    pm_task_stats_t st = {0};
    uint32_t crc;
    size_t len;

    if (in == NULL)
        return 2;
    /* before any work: a bad output fails at once */
    if (app_out_open(&out, "compress", o->out, o->force, inputs) != 0) {
        fclose(in);
        return 2;
    }
    APP_CHECK(pm_memory_create(size > 0 ? size : 1, &input));
    if (read_all(in, o->in, pm_memory_data(input), size) != 0) {
        app_out_abort(&out);
        APP_CHECK(pm_memory_release(input));
        return 2;
    }
    APP_CHECK(pm_memory_touch(input)); /* written through the host pointer */
    printf("compress: %s, %" PRIu64 " bytes, level %d, %" PRIu64 "-byte "
           "blocks, hosts=%d\n", o->in, size, (int)o->level, o->block,
           pm_host_count());
    serial_s = run_serial(o, pm_memory_data(input), size);
    pmlib_s = run_pmlib(o, input, size, &body, &crc, &st);

    t0 = app_now();
    APP_CHECK(pm_memory_size(body, &len));
    if (write_gzip(&out, pm_memory_data(body), len, crc, size,
                   (int)o->level) != 0) {
        verdict = NULL;
    } else {
        printf("wrote %s in %.3f s\n", o->out, app_now() - t0);
        if (o->verify)
            verdict = verify(o->out, pm_memory_data(input), size);
        app_print_result("compress", size, serial_s, pmlib_s, &st, verdict);
    }
    APP_CHECK(pm_memory_release(body));
    APP_CHECK(pm_memory_release(input));
    return verdict == NULL ? 2 : strcmp(verdict, "MISMATCH") == 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    pm_callbacks_t cb;
    int status = 0;

    parse_options(argc, argv, &opt);
    APP_CHECK(pm_init(&argc, &argv));

    /* Every host registers the callbacks; only host 0 owns data and submits.
     * No cuda callback: the task runs on CPU stubs only. */
    APP_CHECK(pm_callbacks_init(&cb));
    cb.subscribe = compress_subscribe;
    cb.cpu = compress_cpu;
    APP_CHECK(pm_callbacks_register("compress", &cb));
    if (pm_host_id() == 0)
        status = run(&opt);

    APP_CHECK(pm_finalize());
    return status;
}
