/*
 * Payloads: byte streams that travel beside control messages, from the
 * sender's memory straight into the receiver's.
 *
 * A payload has a mode, written in a trailer of its control message:
 *   inline  small payloads (up to PM__INLINE_MAX) ride in the message;
 *   raw     fragments of up to PM__RAW_FRAG bytes, each one MPI message
 *           on the payload communicator, described on both sides by a
 *           datatype over the segments, so nothing is copied by pmlib and
 *           counts stay below 2^31;
 *   pieces  a payload of several pieces, large ones (the written ranges of
 *           many chunks) or few bytes in all: a fragment per piece (small
 *           neighbours share one), their lengths in the control message,
 *           so each large piece moves as a contiguous MPI message from
 *           the sender's memory into the receiver's, with no copy by
 *           pmlib;
 *   zlib    fragments of PM__ZFRAG raw bytes, each deflated on the codec
 *           thread while earlier ones are on the wire, and inflated by the
 *           receiver straight into its segments. A byte before each
 *           fragment says whether it shrank (1) or travels raw (0).
 *           Large payloads of small pieces (strided rows) go the same way
 *           uncompressed, packed in fragments of PM__PFRAG;
 *   cma     except to a host on the same machine whose process may read
 *           this one's memory (probed at start-up), payloads of many
 *           small pieces and those of one piece up to PM__CMA_ONE_MAX:
 *           the control message lists the pieces' addresses here, the
 *           receiver copies them into its own pieces with
 *           process_vm_readv (one copy, where packing cost three) and
 *           answers with a byte on the acknowledgement communicator,
 *           after which the pieces are free.
 * Each payload has its own tag on the payload communicator (a counter per
 * destination), so its fragments match only its receives.
 */
#define _GNU_SOURCE
#include "comm/transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#define PM__INLINE_MAX (16 * 1024)
#define PM__RAW_FRAG ((uint64_t)1 << 30)
#define PM__ZFRAG ((uint64_t)1 << 20)
/* Payloads of several pieces are packed by the codec thread into fragments
 * of this size: MPI moves a contiguous message in one copy, while a
 * scattered one crawls through its pipelined protocol. */
#define PM__PFRAG ((uint64_t)4 << 20)
/* The codec stays at most this far ahead of the wire. */
#define PM__CODEC_AHEAD ((uint64_t)64 << 20)
/* The automatic mode compresses when a sample shrinks below this fraction. */
#define PM__ZSAMPLE (256 * 1024)
#define PM__ZGAIN 0.85
#define PM__ZMIN 4096
/* Payloads of pieces this large on average, or of at most PM__PFRAG bytes,
 * go as pieces, others packed; a payload has at most about
 * PM__MAX_PIECE_FRAGS fragments of pieces (small neighbours share one
 * until it is PM__PIECE_MIN long). bench/transport --pieces on 2 ranks of
 * one machine: 32 pieces of 512 KiB at 88 to 100% of MPI's rate (packed:
 * 52%); 4096 pieces of 1 KiB at 47% (packed: 29%); 4096 of 16 KiB at
 * 34% (packed: 79%, where MPI scatters each fragment in small steps). */
#define PM__PIECE_MIN ((uint64_t)64 << 10)
#define PM__MAX_PIECE_FRAGS 1024

/* A receiver copies at most this much of a cma payload per round of the
 * comm thread, which has other messages to move meanwhile (on a crowded
 * machine a round may come milliseconds after the one before: MPI too
 * lands a whole fragment of up to 4 MiB, packed, within one round). */
#define PM__CMA_STEP ((uint64_t)16 << 20)
/* A payload of one piece up to this long goes cma too, where the host can:
 * one copy by the receiver, while MPI, on a machine where it may not read
 * another process's memory itself, copies through shared buffers twice (2
 * ranks of an H200 host, bench/transport: 64 KiB at 125 to 148% of MPI's
 * rate, 256 KiB 156 to 187%, 1 MiB 119 to 156%, against 72 to 99% as a raw
 * fragment; 4 MiB even, and from 16 MiB the kernel's copy fell behind MPI's
 * pipelined one, 59 to 75%). Where MPI reads directly too (cpu2), even. */
#define PM__CMA_ONE_MAX ((uint64_t)1 << 20)
/* The most pieces a cma payload lists (16 bytes each in its message). */
#define PM__CMA_MAX_PIECES (1u << 20)

enum { MODE_RAW = 0, MODE_ZLIB = 1, MODE_INLINE = 2, MODE_PIECES = 3, MODE_CMA = 4 };
#define TRAILER (4 + 4 + 8 + 8 + 1)

typedef struct pm__bulk_out {
    struct pm__bulk_out *next; /* codec queue */
    int dest, tag, mode;
    int ctag; /* the control message's tag */
    unsigned flags;
    pm__wbuf_t hdr;
    pm__seg_t *segs;
    int nseg;
    uint64_t bytes, frag, wire;
    uint64_t *offs; /* pieces: fragment k is [offs[k], offs[k + 1]) */
    uint32_t nfrag, pending; /* sends not yet complete (comm thread) */
    pm__bulk_done_fn done;
    void *arg;
    MPI_Request ack_req; /* cma: the receiver's answer */
    unsigned char ack;
    struct pm__bulk_out *ack_next; /* B.acks */
} pm__bulk_out_t;

/* Walks the stream bytes [lo, lo + n) of the segments, piece by piece. */
typedef struct walk {
    const pm__seg_t *segs;
    int nseg, i;
    uint64_t off; /* within segs[i] */
    uint64_t left;
} walk_t;

typedef struct pm__bulk_in {
    struct pm__bulk_in *next;
    int src, tag, mode;
    uint64_t bytes, frag, wire;
    uint64_t *offs; /* pieces: fragment k is [offs[k], offs[k + 1]) */
    uint32_t nfrag, next_frag;
    const unsigned char *inline_data;
    pm__seg_t *segs;
    int nseg;
    bool claimed;
    void *scratch; /* a payload nobody claimed lands here */
    MPI_Request *reqs;
    MPI_Datatype *types;
    MPI_Request zreq;
    unsigned char *zbuf;
    int zcount;
    bool zposted;
    int status;
    double t0;
    pm__bulk_done_fn done;
    void *arg;
    struct iovec *remote; /* cma: the sender's pieces, bi->frag of them */
    uint64_t cma_at;      /* cma: stream bytes copied so far */
    uint32_t remote_at;   /* cma: the remote piece cma_at lies in ... */
    uint64_t remote_off;  /* ... and where in it */
    walk_t local;         /* cma: cma_at in the segments (left unused) */
} pm__bulk_in_t;

static struct {
    int *next_tag;        /* per destination; under lock */
    int tag_ub;
    pthread_mutex_t lock; /* next_tag and the codec queue */
    pthread_cond_t cv, room;
    pm__bulk_out_t *qhead, *qtail;
    int stop, started;
    pthread_t codec;
    atomic_int codec_jobs;
    atomic_uint_fast64_t ahead;  /* compressed bytes queued, not yet sent */
    pm__bulk_in_t *in;           /* comm thread */
    atomic_uint_fast64_t *rate;  /* bytes per second from each host */
    double *rtt;                 /* a short round trip to each host (host 0) */
    MPI_Comm ack_comm;           /* cma answers (MPI_COMM_NULL: no cma) */
    unsigned char *cma_to;       /* per host: it may read this process's memory */
    pid_t *pid;                  /* per host on this machine (0: elsewhere) */
    pm__bulk_out_t *acks;        /* comm thread: cma payloads awaiting their answer */
} B;

/* ---- segments as a stream ------------------------------------------------ */

static pm__seg_t *segs_copy(const pm__seg_t *segs, int nseg)
{
    pm__seg_t *c = malloc((size_t)(nseg > 0 ? nseg : 1) * sizeof *c);
    if (c != NULL && nseg > 0)
        memcpy(c, segs, (size_t)nseg * sizeof *c);
    return c;
}

static uint64_t segs_total(const pm__seg_t *segs, int nseg)
{
    uint64_t n = 0;
    for (int i = 0; i < nseg; i++)
        n += segs[i].n;
    return n;
}

/* The most fragments a payload of pieces of `bytes` bytes may have (see
 * plan_pieces); receivers refuse more. */
static uint64_t piece_frags_max(uint64_t bytes)
{
    return 2 * (uint64_t)PM__MAX_PIECE_FRAGS + bytes / PM__RAW_FRAG + 2;
}

/* Where fragment k of a payload lies in its stream. */
static void frag_range(const uint64_t *offs, uint64_t frag, uint64_t bytes, uint32_t k, uint64_t *lo,
                       uint64_t *n)
{
    if (offs != NULL) {
        *lo = offs[k];
        *n = offs[k + 1] - offs[k];
        return;
    }
    *lo = (uint64_t)k * frag;
    *n = bytes - *lo < frag ? bytes - *lo : frag;
}

static walk_t walk_at(const pm__seg_t *segs, int nseg, uint64_t lo, uint64_t n)
{
    walk_t w = {segs, nseg, 0, 0, n};
    while (w.i < nseg && lo >= segs[w.i].n) {
        lo -= segs[w.i].n;
        w.i++;
    }
    w.off = lo;
    return w;
}

/* The next piece: false at the end. */
static bool walk_next(walk_t *w, unsigned char **p, uint64_t *n)
{
    while (w->left > 0 && w->i < w->nseg) {
        uint64_t avail = w->segs[w->i].n - w->off;
        if (avail == 0) {
            w->i++;
            w->off = 0;
            continue;
        }
        *n = avail < w->left ? avail : w->left;
        *p = (unsigned char *)w->segs[w->i].p + w->off;
        w->off += *n;
        w->left -= *n;
        return true;
    }
    return false;
}

static void stream_copy_in(const pm__seg_t *segs, int nseg, uint64_t lo, const unsigned char *src,
                           uint64_t n)
{
    walk_t w = walk_at(segs, nseg, lo, n);
    unsigned char *p;
    uint64_t k;
    while (walk_next(&w, &p, &k)) {
        memcpy(p, src, k);
        src += k;
    }
}

static void stream_copy_out(const pm__seg_t *segs, int nseg, uint64_t lo, unsigned char *dst, uint64_t n)
{
    walk_t w = walk_at(segs, nseg, lo, n);
    unsigned char *p;
    uint64_t k;
    while (walk_next(&w, &p, &k)) {
        memcpy(dst, p, k);
        dst += k;
    }
}

/* The stream bytes [lo, lo + n) as (address, count, datatype) for MPI;
 * one piece goes as plain bytes, several as an indexed type. */
static int stream_type(const pm__seg_t *segs, int nseg, uint64_t lo, uint64_t n, void **addr, int *count,
                       MPI_Datatype *type)
{
    walk_t w = walk_at(segs, nseg, lo, n);
    unsigned char *p;
    uint64_t k;
    int pieces = 0;
    while (walk_next(&w, &p, &k))
        pieces++;
    w = walk_at(segs, nseg, lo, n);
    if (pieces <= 1) {
        *addr = walk_next(&w, &p, &k) ? (void *)p : (void *)"";
        *count = (int)n;
        *type = MPI_BYTE;
        return 0;
    }
    int *len = malloc((size_t)pieces * sizeof *len);
    MPI_Aint *disp = malloc((size_t)pieces * sizeof *disp);
    if (len == NULL || disp == NULL) {
        free(len);
        free(disp);
        return PM_ENOMEM;
    }
    for (int i = 0; walk_next(&w, &p, &k); i++) {
        len[i] = (int)k;
        MPI_Get_address(p, &disp[i]);
    }
    MPI_Type_create_hindexed(pieces, len, disp, MPI_BYTE, type);
    MPI_Type_commit(type);
    free(len);
    free(disp);
    *addr = MPI_BOTTOM;
    *count = 1;
    return 0;
}

/* ---- sending ---------------------------------------------------------------- */

static void put_trailer(pm__wbuf_t *b, int tag, int mode, uint64_t bytes, uint64_t frag)
{
    pm__wbuf_i32(b, tag);
    pm__wbuf_i32(b, mode);
    pm__wbuf_u64(b, bytes);
    pm__wbuf_u64(b, frag);
    unsigned char one = 1;
    pm__wbuf_put(b, &one, 1);
}

static pm__out_t *frag_out(pm__bulk_out_t *bo, uint32_t k)
{
    pm__out_t *o = calloc(1, sizeof *o);
    if (o == NULL) {
        pm__error("out of memory queueing a payload to host %d; aborting the job", bo->dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    o->dest = bo->dest;
    o->tag = bo->tag;
    o->on_bulk = true;
    o->bo = bo;
    o->frag = k;
    o->type = MPI_BYTE;
    return o;
}

/* The control message of a payload: its header, mode and trailer. */
static pm__out_t *header_out(pm__bulk_out_t *bo)
{
    put_trailer(&bo->hdr, bo->tag, bo->mode, bo->bytes, bo->frag);
    pm__out_t *o = pm__tx_control(bo->dest, bo->ctag, &bo->hdr);
    o->bo = bo;
    o->frag = UINT32_MAX;
    return o;
}

/* Queues the header and every raw fragment (sent from the segments). */
static void send_raw(pm__bulk_out_t *bo)
{
    if (bo->offs == NULL) {
        bo->mode = MODE_RAW;
        bo->frag = PM__RAW_FRAG;
        bo->nfrag = (uint32_t)((bo->bytes + bo->frag - 1) / bo->frag);
    }
    bo->pending = 1 + bo->nfrag;
    bo->wire = bo->bytes;
    pm__out_t *first = header_out(bo), *last = first;
    for (uint32_t k = 0; k < bo->nfrag; k++) {
        pm__out_t *o = frag_out(bo, k);
        last->next = o;
        last = o;
    }
    pm__tx_queue(first, last);
}

/* A payload of `pieces` pieces of PM__PIECE_MIN bytes or more on average,
 * or of at most PM__PFRAG bytes: its fragments (bo->offs), one per piece,
 * none over PM__RAW_FRAG; neighbours shorter than a fragment's least
 * length share one, which ends before a piece of that length (so large
 * pieces always move contiguous). Their lengths go before the trailer.
 * False where packing pays (many bytes in small pieces) or memory is
 * short. */
static bool plan_pieces(pm__bulk_out_t *bo, int pieces)
{
    if (bo->bytes / (uint64_t)pieces < PM__PIECE_MIN && bo->bytes > PM__PFRAG)
        return false;
    uint64_t least = bo->bytes / PM__MAX_PIECE_FRAGS;
    if (least < PM__PIECE_MIN)
        least = PM__PIECE_MIN;
    /* Each fragment but the last is at least `least` long, follows one
     * that is, or is PM__RAW_FRAG long; one offset more than fragments. */
    uint64_t *offs = malloc((size_t)(piece_frags_max(bo->bytes) + 1) * sizeof *offs);
    if (offs == NULL)
        return false;
    uint32_t n = 0;
    uint64_t at = 0, cur = 0;
    offs[0] = 0;
    for (int i = 0; i < bo->nseg; i++) {
        uint64_t left = bo->segs[i].n;
        if (cur > 0 && left >= least) { /* a large piece starts its own */
            offs[++n] = at;
            cur = 0;
        }
        while (left > 0) {
            uint64_t take = left < PM__RAW_FRAG - cur ? left : PM__RAW_FRAG - cur;
            cur += take;
            left -= take;
            at += take;
            if (cur == PM__RAW_FRAG || (left == 0 && cur >= least)) {
                offs[++n] = at;
                cur = 0;
            }
        }
    }
    if (cur > 0) { /* a short tail joins the last fragment where it fits */
        if (n > 0 && offs[n] - offs[n - 1] + cur <= PM__RAW_FRAG)
            offs[n] = at;
        else
            offs[++n] = at;
    }
    bo->offs = offs;
    bo->nfrag = n;
    bo->mode = MODE_PIECES;
    bo->frag = n;
    for (uint32_t k = 0; k < n; k++)
        pm__wbuf_u64(&bo->hdr, offs[k + 1] - offs[k]);
    return true;
}

/* A payload of many small pieces to a host that reads this process's
 * memory itself: the control message lists the pieces (address, length),
 * and the pieces stay as they are until the receiver answers. */
static bool send_cma(pm__bulk_out_t *bo, int pieces)
{
    if (B.cma_to == NULL || !B.cma_to[bo->dest] || (unsigned)pieces > PM__CMA_MAX_PIECES)
        return false;
    bo->mode = MODE_CMA;
    bo->frag = (uint64_t)pieces;
    for (int i = 0; i < bo->nseg; i++) {
        if (bo->segs[i].n == 0)
            continue;
        pm__wbuf_u64(&bo->hdr, (uint64_t)(uintptr_t)bo->segs[i].p);
        pm__wbuf_u64(&bo->hdr, bo->segs[i].n);
    }
    bo->pending = 2; /* the control message, then the answer */
    bo->wire = bo->bytes;
    pm__out_t *h = header_out(bo);
    pm__tx_queue(h, h);
    return true;
}

static int next_tag(int dest)
{
    pthread_mutex_lock(&B.lock);
    int tag = B.next_tag[dest];
    B.next_tag[dest] = tag >= B.tag_ub ? 1 : tag + 1;
    pthread_mutex_unlock(&B.lock);
    return tag;
}

void pm__comm_send_bulk(int dest, int tag, pm__wbuf_t *hdr, const pm__seg_t *segs, int nseg,
                        unsigned flags, pm__bulk_done_fn done, void *arg)
{
    uint64_t bytes = segs_total(segs, nseg);
    if (bytes <= PM__INLINE_MAX) {
        pm__wbuf_t *b = hdr;
        unsigned char *at = pm__wbuf_reserve(b, bytes);
        if (at != NULL)
            stream_copy_out(segs, nseg, 0, at, bytes);
        put_trailer(b, 0, MODE_INLINE, bytes, 0);
        pm__out_t *o = pm__tx_control(dest, tag, b);
        pm__tx_queue(o, o);
        if (done != NULL)
            done(arg, 0, bytes, bytes); /* the bytes are in the message: the segments are free */
        return;
    }
    pm__bulk_out_t *bo = calloc(1, sizeof *bo);
    pm__seg_t *copy = segs_copy(segs, nseg);
    if (bo == NULL || copy == NULL) {
        pm__error("out of memory queueing a payload to host %d; aborting the job", dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    *bo = (pm__bulk_out_t){.dest = dest, .tag = next_tag(dest), .flags = flags, .hdr = *hdr,
                           .segs = copy, .nseg = nseg, .bytes = bytes, .done = done, .arg = arg};
    *hdr = (pm__wbuf_t){0};
    bo->ctag = tag;
    int pieces = 0;
    for (int i = 0; i < nseg; i++)
        pieces += segs[i].n > 0;
    bool plain = !(flags & (PM__BULK_ZLIB | PM__BULK_ZLIB_AUTO)) || bytes < PM__ZMIN;
    if (plain && pieces == 1 && bytes <= PM__CMA_ONE_MAX && send_cma(bo, pieces))
        return;
    if (plain && (pieces < 2 || plan_pieces(bo, pieces))) {
        send_raw(bo);
        return;
    }
    if (plain && send_cma(bo, pieces))
        return;
    atomic_fetch_add(&B.codec_jobs, 1);
    pthread_mutex_lock(&B.lock);
    if (B.qtail)
        B.qtail->next = bo;
    else
        B.qhead = bo;
    B.qtail = bo;
    pthread_cond_signal(&B.cv);
    pthread_mutex_unlock(&B.lock);
}

void pm__bulk_frag_prepare(pm__out_t *o)
{
    pm__bulk_out_t *bo = o->bo;
    uint64_t lo, n;
    frag_range(bo->offs, bo->frag, bo->bytes, o->frag, &lo, &n);
    void *addr;
    int count;
    if (stream_type(bo->segs, bo->nseg, lo, n, &addr, &count, &o->type) != 0) {
        pm__error("out of memory describing a payload to host %d; aborting the job", bo->dest);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    o->addr = addr;
    o->count = (uint64_t)count;
}

static void bulk_out_free(pm__bulk_out_t *bo)
{
    free(bo->segs);
    free(bo->offs);
    free(bo);
}

/* One of a payload's sends (or its answer) is done; after the last, its
 * pieces are free. */
static void bulk_out_step(pm__bulk_out_t *bo)
{
    if (--bo->pending > 0)
        return;
    if (bo->done != NULL)
        bo->done(bo->arg, 0, bo->bytes, bo->wire);
    bulk_out_free(bo);
}

void pm__bulk_frag_sent(pm__out_t *o)
{
    pm__bulk_out_t *bo = o->bo;
    if (bo->mode == MODE_ZLIB && o->frag != UINT32_MAX) {
        bo->wire += o->count - 1; /* the flag byte is framing */
        atomic_fetch_sub(&B.ahead, o->count);
        pthread_mutex_lock(&B.lock);
        pthread_cond_signal(&B.room);
        pthread_mutex_unlock(&B.lock);
    }
    if (bo->mode == MODE_CMA && o->frag == UINT32_MAX) {
        /* The header is out: the receiver's answer will free the pieces. */
        MPI_Irecv(&bo->ack, 1, MPI_BYTE, bo->dest, bo->tag, B.ack_comm, &bo->ack_req);
        bo->ack_next = B.acks;
        B.acks = bo;
    }
    bulk_out_step(bo);
}

/* ---- the codec thread ------------------------------------------------------- */

static bool sample_shrinks(const pm__bulk_out_t *bo)
{
    uint64_t sn = bo->bytes < PM__ZSAMPLE ? bo->bytes : PM__ZSAMPLE;
    unsigned char *raw = malloc(sn);
    uLongf zn = compressBound(sn);
    unsigned char *z = malloc(zn);
    bool pays = false;
    if (raw != NULL && z != NULL) {
        stream_copy_out(bo->segs, bo->nseg, 0, raw, sn);
        pays = compress2(z, &zn, raw, sn, 1) == Z_OK && zn < PM__ZGAIN * sn;
    }
    free(raw);
    free(z);
    return pays;
}

/* Fragment k deflated into a new buffer: a flag byte, then the bytes. */
static unsigned char *deflate_frag(const pm__bulk_out_t *bo, uint32_t k, bool zip, uint64_t *out_n)
{
    uint64_t lo = (uint64_t)k * bo->frag;
    uint64_t n = bo->bytes - lo < bo->frag ? bo->bytes - lo : bo->frag;
    uLong cap = zip ? compressBound(n) : 0;
    unsigned char *buf = malloc(1 + (cap > n ? cap : n));
    if (buf == NULL)
        return NULL;
    if (!zip) {
        buf[0] = 0;
        stream_copy_out(bo->segs, bo->nseg, lo, buf + 1, n);
        *out_n = 1 + n;
        return buf;
    }
    z_stream z = {0};
    bool ok = deflateInit(&z, 1) == Z_OK;
    walk_t w = walk_at(bo->segs, bo->nseg, lo, n);
    unsigned char *p;
    uint64_t len;
    z.next_out = buf + 1;
    z.avail_out = (uInt)cap;
    while (ok && walk_next(&w, &p, &len)) {
        z.next_in = p;
        z.avail_in = (uInt)len;
        ok = deflate(&z, w.left == 0 ? Z_FINISH : Z_NO_FLUSH) != Z_STREAM_ERROR;
    }
    if (ok && n == 0)
        ok = deflate(&z, Z_FINISH) == Z_STREAM_END;
    uint64_t zn = z.total_out;
    deflateEnd(&z);
    if (ok && zn < n) {
        buf[0] = 1;
        *out_n = 1 + zn;
    } else {
        buf[0] = 0;
        stream_copy_out(bo->segs, bo->nseg, lo, buf + 1, n);
        *out_n = 1 + n;
    }
    return buf;
}

/* Fragments deflated (zip) or packed, each sent while the next is made. */
static void send_zlib(pm__bulk_out_t *bo, bool zip)
{
    bo->mode = MODE_ZLIB;
    bo->frag = zip ? PM__ZFRAG : PM__PFRAG;
    bo->nfrag = (uint32_t)((bo->bytes + bo->frag - 1) / bo->frag);
    bo->pending = 1 + bo->nfrag;
    uint32_t nfrag = bo->nfrag;
    pm__out_t *h = header_out(bo);
    pm__tx_queue(h, h);
    for (uint32_t k = 0; k < nfrag; k++) {
        pthread_mutex_lock(&B.lock);
        while (atomic_load(&B.ahead) > PM__CODEC_AHEAD && !B.stop)
            pthread_cond_wait(&B.room, &B.lock);
        pthread_mutex_unlock(&B.lock);
        uint64_t zn = 0;
        unsigned char *z = deflate_frag(bo, k, zip, &zn);
        if (z == NULL) {
            pm__error("out of memory compressing a payload to host %d; aborting the job", bo->dest);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        pm__out_t *o = frag_out(bo, k);
        o->owned = z;
        o->addr = z;
        o->count = zn;
        atomic_fetch_add(&B.ahead, zn);
        /* The comm thread adds up the wire bytes; after the last fragment
         * is queued, bo belongs to it. */
        pm__tx_queue(o, o);
    }
}

static void *codec_main(void *arg)
{
    pm__internal_thread = 1;
    (void)arg;
    pthread_mutex_lock(&B.lock);
    for (;;) {
        while (B.qhead == NULL && !B.stop)
            pthread_cond_wait(&B.cv, &B.lock);
        if (B.qhead == NULL)
            break;
        pm__bulk_out_t *bo = B.qhead;
        B.qhead = bo->next;
        if (B.qhead == NULL)
            B.qtail = NULL;
        pthread_mutex_unlock(&B.lock);
        bool zip = bo->bytes >= PM__ZMIN &&
                   ((bo->flags & PM__BULK_ZLIB) || ((bo->flags & PM__BULK_ZLIB_AUTO) && sample_shrinks(bo)));
        bool pieces = bo->nseg > 1;
        if (zip || pieces)
            send_zlib(bo, zip);
        else
            send_raw(bo);
        atomic_fetch_sub(&B.codec_jobs, 1);
        pthread_mutex_lock(&B.lock);
    }
    pthread_mutex_unlock(&B.lock);
    return NULL;
}

/* ---- receiving -------------------------------------------------------------- */

/* A payload of pieces: the fragments' lengths, which precede the trailer
 * (bi->frag counts them), into bi->offs; PM_EINVAL when they do not add up
 * to the payload or break its bounds. */
static int take_piece_lengths(pm__rbuf_t *r, pm__bulk_in_t *bi)
{
    uint64_t nf = bi->frag;
    if (nf == 0 || nf > piece_frags_max(bi->bytes) || r->n < 8 * nf ||
        (bi->offs = malloc((nf + 1) * sizeof *bi->offs)) == NULL)
        return PM_EINVAL;
    r->n -= 8 * nf;
    pm__rbuf_t l = {.p = r->p + r->n, .n = 8 * nf};
    bi->offs[0] = 0;
    for (uint64_t k = 0; k < nf; k++) {
        uint64_t len = pm__rbuf_u64(&l);
        if (len == 0 || len > PM__RAW_FRAG || bi->offs[k] + len > bi->bytes)
            return PM_EINVAL;
        bi->offs[k + 1] = bi->offs[k] + len;
    }
    if (bi->offs[nf] != bi->bytes)
        return PM_EINVAL;
    bi->nfrag = (uint32_t)nf;
    return 0;
}

/* A cma payload: the sender's pieces, which precede the trailer (bi->frag
 * counts them), into bi->remote; PM_EINVAL when they do not add up. */
static int take_remote_pieces(pm__rbuf_t *r, pm__bulk_in_t *bi)
{
    uint64_t n = bi->frag, sum = 0;
    if (n == 0 || n > PM__CMA_MAX_PIECES || r->n < 16 * n ||
        (bi->remote = malloc(n * sizeof *bi->remote)) == NULL)
        return PM_EINVAL;
    r->n -= 16 * n;
    pm__rbuf_t l = {.p = r->p + r->n, .n = 16 * n};
    for (uint64_t k = 0; k < n; k++) {
        uint64_t at = pm__rbuf_u64(&l), len = pm__rbuf_u64(&l);
        if (len == 0 || len > bi->bytes - sum)
            return PM_EINVAL;
        bi->remote[k] = (struct iovec){(void *)(uintptr_t)at, (size_t)len};
        sum += len;
    }
    if (sum != bi->bytes)
        return PM_EINVAL;
    bi->nfrag = 1; /* landed once every byte is copied */
    return 0;
}

int pm__bulk_take_trailer(pm__rbuf_t *r, int src)
{
    r->bulk = NULL;
    if (r->n < 1)
        return PM_EINVAL;
    if (r->p[r->n - 1] == 0) {
        r->n -= 1;
        return 0;
    }
    if (r->n < TRAILER)
        return PM_EINVAL;
    pm__rbuf_t t = {.p = r->p + r->n - TRAILER, .n = TRAILER};
    pm__bulk_in_t *bi = calloc(1, sizeof *bi);
    if (bi == NULL)
        return PM_ENOMEM;
    bi->src = src;
    bi->tag = pm__rbuf_i32(&t);
    bi->mode = pm__rbuf_i32(&t);
    bi->bytes = pm__rbuf_u64(&t);
    bi->frag = pm__rbuf_u64(&t);
    r->n -= TRAILER;
    if (bi->mode == MODE_INLINE) {
        if (bi->bytes > r->n) {
            free(bi);
            return PM_EINVAL;
        }
        r->n -= bi->bytes;
        bi->inline_data = r->p + r->n;
    } else if (bi->mode == MODE_PIECES) {
        if (take_piece_lengths(r, bi) != 0) {
            free(bi->offs);
            free(bi);
            return PM_EINVAL;
        }
    } else if (bi->mode == MODE_CMA) {
        if (B.pid == NULL || B.pid[src] == 0 || take_remote_pieces(r, bi) != 0) {
            free(bi->remote);
            free(bi);
            return PM_EINVAL;
        }
    } else if ((bi->mode != MODE_RAW && bi->mode != MODE_ZLIB) || bi->frag == 0 ||
               bi->frag > PM__RAW_FRAG || (bi->mode == MODE_ZLIB && bi->frag > PM__PFRAG)) {
        free(bi);
        return PM_EINVAL;
    } else {
        bi->nfrag = (uint32_t)((bi->bytes + bi->frag - 1) / bi->frag);
    }
    r->bulk = bi;
    return 0;
}

uint64_t pm__comm_bulk_bytes(const pm__rbuf_t *m)
{
    return m->bulk != NULL ? m->bulk->bytes : 0;
}

static void bulk_in_free(pm__bulk_in_t *bi)
{
    free(bi->remote);
    free(bi->offs);
    free(bi->segs);
    free(bi->scratch);
    free(bi->reqs);
    free(bi->types);
    free(bi->zbuf);
    free(bi);
}

/* The answer to a cma payload's sender: its pieces are free. */
static void cma_answer(const pm__bulk_in_t *bi)
{
    unsigned char zero = 0;
    MPI_Send(&zero, 1, MPI_BYTE, bi->src, bi->tag, B.ack_comm);
}

/* Iovecs per process_vm_readv. */
#define PM__CMA_IOV 512

/* Copies the next stretch of a cma payload from the sender's pieces into
 * the segments; after the last, answers the sender. */
static void cma_step(pm__bulk_in_t *bi)
{
    struct iovec local[PM__CMA_IOV], remote[PM__CMA_IOV];
    uint64_t want = bi->bytes - bi->cma_at < PM__CMA_STEP ? bi->bytes - bi->cma_at : PM__CMA_STEP;
    int nr = 0, nl = 0;
    uint64_t rsum = 0, lsum = 0, off = bi->remote_off;
    for (uint32_t k = bi->remote_at; nr < PM__CMA_IOV && rsum < want && k < bi->frag;) {
        uint64_t len = bi->remote[k].iov_len - off;
        len = len < want - rsum ? len : want - rsum;
        remote[nr++] = (struct iovec){(char *)bi->remote[k].iov_base + off, (size_t)len};
        rsum += len;
        off += len;
        if (off == bi->remote[k].iov_len) {
            k++;
            off = 0;
        }
    }
    /* From where the last step ended, on both sides: walking from the
     * start at every step made a payload of many pieces quadratic. */
    walk_t w = bi->local;
    w.left = rsum;
    unsigned char *p;
    uint64_t n;
    while (nl < PM__CMA_IOV && walk_next(&w, &p, &n)) {
        local[nl++] = (struct iovec){p, (size_t)n};
        lsum += n;
    }
    for (uint64_t cut = rsum - lsum; cut > 0;) { /* the local side ran out of iovecs first */
        struct iovec *last = &remote[nr - 1];
        if (last->iov_len <= cut) {
            cut -= last->iov_len;
            nr--;
        } else {
            last->iov_len -= cut;
            cut = 0;
        }
    }
    ssize_t got = process_vm_readv(B.pid[bi->src], local, (unsigned long)nl, remote, (unsigned long)nr, 0);
    if (got <= 0) {
        if (got < 0 && errno == EINTR)
            return;
        if (got < 0 && errno == ESRCH) /* the host died: its loss is reported as such */
            pm__error("host %d ended while this host read a payload from its memory", bi->src);
        else
            pm__error("cannot read a payload from host %d's memory (process_vm_readv: %s); "
                      "run with PMLIB_CMA=0", bi->src, got < 0 ? strerror(errno) : "nothing read");
        bi->status = PM_EMPI;
    } else {
        bi->cma_at += (uint64_t)got;
        bi->local.left = (uint64_t)got;
        while (walk_next(&bi->local, &p, &n))
            ;
        for (uint64_t left = (uint64_t)got; left > 0;) {
            uint64_t rest = bi->remote[bi->remote_at].iov_len - bi->remote_off;
            uint64_t take = rest < left ? rest : left;
            bi->remote_off += take;
            left -= take;
            if (bi->remote_off == bi->remote[bi->remote_at].iov_len) {
                bi->remote_at++;
                bi->remote_off = 0;
            }
        }
    }
    if (bi->cma_at == bi->bytes || bi->status != 0) {
        cma_answer(bi);
        bi->next_frag = bi->nfrag;
    }
}

static void landed(pm__bulk_in_t *bi)
{
    if (bi->status == 0 && bi->bytes >= 65536 && bi->mode != MODE_INLINE &&
        (bi->mode != MODE_CMA || bi->cma_at == bi->bytes)) {
        double s = pm__now() - bi->t0;
        if (s > 0) {
            uint64_t rate = (uint64_t)((double)bi->bytes / s), old = atomic_load(&B.rate[bi->src]);
            atomic_store(&B.rate[bi->src], old ? (old + rate) / 2 : rate);
        }
    }
    if (bi->done != NULL)
        bi->done(bi->arg, bi->status, bi->bytes, bi->mode == MODE_ZLIB ? bi->wire : bi->bytes);
    bulk_in_free(bi);
}

/* Posts the receives of every raw fragment. */
static int post_raw(pm__bulk_in_t *bi)
{
    bi->reqs = calloc(bi->nfrag ? bi->nfrag : 1, sizeof *bi->reqs);
    bi->types = calloc(bi->nfrag ? bi->nfrag : 1, sizeof *bi->types);
    if (bi->reqs == NULL || bi->types == NULL)
        return PM_ENOMEM;
    for (uint32_t k = 0; k < bi->nfrag; k++) {
        uint64_t lo, n;
        frag_range(bi->offs, bi->frag, bi->bytes, k, &lo, &n);
        void *addr;
        int count;
        int rc = stream_type(bi->segs, bi->nseg, lo, n, &addr, &count, &bi->types[k]);
        if (rc != 0) {
            pm__error("out of memory receiving a payload from host %d; aborting the job", bi->src);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Irecv(addr, count, bi->types[k], bi->src, bi->tag, pm__bulk_comm, &bi->reqs[k]);
    }
    return 0;
}

void pm__comm_recv_bulk(pm__rbuf_t *m, const pm__seg_t *segs, int nseg, pm__bulk_done_fn done, void *arg)
{
    pm__bulk_in_t *bi = m->bulk;
    if (bi == NULL || bi->claimed) {
        if (done != NULL)
            done(arg, PM_EINVAL, 0, 0);
        return;
    }
    bi->claimed = true;
    bi->done = done;
    bi->arg = arg;
    bi->t0 = pm__now();
    if (bi->mode == MODE_CMA) {
        m->bulk = NULL;
        if (segs == NULL || segs_total(segs, nseg) != bi->bytes) {
            /* Nothing to copy: the sender only waits for the answer. */
            if (segs != NULL || done != NULL)
                bi->status = PM_EINVAL;
            cma_answer(bi);
            landed(bi);
            return;
        }
        if ((bi->segs = segs_copy(segs, nseg)) == NULL) {
            pm__error("out of memory receiving a payload from host %d; aborting the job", bi->src);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        bi->nseg = nseg;
        bi->local = walk_at(bi->segs, nseg, 0, 0);
        bi->next = B.in;
        B.in = bi;
        return;
    }
    if (segs == NULL || segs_total(segs, nseg) != bi->bytes) {
        /* The payload must still be taken off the wire: into scratch. */
        if (segs != NULL || done != NULL)
            bi->status = PM_EINVAL;
        uint64_t cap = 0;
        for (uint32_t k = 0; bi->mode != MODE_INLINE && k < bi->nfrag; k++) {
            uint64_t lo, n;
            frag_range(bi->offs, bi->frag, bi->bytes, k, &lo, &n);
            cap = n > cap ? n : cap;
        }
        bi->scratch = malloc(cap ? cap : 1);
        bi->segs = malloc(sizeof *bi->segs * (bi->nfrag ? bi->nfrag : 1));
        if (bi->scratch == NULL || bi->segs == NULL) {
            pm__error("out of memory dropping a payload from host %d; aborting the job", bi->src);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Every fragment lands on the same scratch bytes. */
        for (uint32_t k = 0; k < bi->nfrag; k++) {
            uint64_t lo, n;
            frag_range(bi->offs, bi->frag, bi->bytes, k, &lo, &n);
            bi->segs[k] = (pm__seg_t){bi->scratch, n};
        }
        bi->nseg = (int)bi->nfrag;
    } else {
        bi->segs = segs_copy(segs, nseg);
        bi->nseg = nseg;
        if (bi->segs == NULL) {
            pm__error("out of memory receiving a payload from host %d; aborting the job", bi->src);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (bi->mode == MODE_INLINE) {
        if (bi->status == 0)
            stream_copy_in(bi->segs, bi->nseg, 0, bi->inline_data, bi->bytes);
        bi->wire = bi->bytes;
        landed(bi);
        m->bulk = NULL;
        return;
    }
    m->bulk = NULL;
    if ((bi->mode == MODE_RAW || bi->mode == MODE_PIECES) && post_raw(bi) != 0) {
        pm__error("out of memory receiving a payload from host %d; aborting the job", bi->src);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    bi->next = B.in;
    B.in = bi;
}

void pm__bulk_after_handler(pm__rbuf_t *r)
{
    if (r->bulk != NULL)
        pm__comm_recv_bulk(r, NULL, 0, NULL, NULL);
    r->bulk = NULL;
}

/* Inflates a received zlib fragment into the stream at its place. */
static int land_zfrag(pm__bulk_in_t *bi)
{
    uint64_t lo = (uint64_t)bi->next_frag * bi->frag;
    uint64_t n = bi->bytes - lo < bi->frag ? bi->bytes - lo : bi->frag;
    bool scratch = bi->scratch != NULL;
    if (scratch)
        lo = 0; /* each scratch segment is one fragment */
    const pm__seg_t *segs = scratch ? &bi->segs[bi->next_frag] : bi->segs;
    int nseg = scratch ? 1 : bi->nseg;
    if (bi->zcount < 1)
        return PM_EINVAL;
    if (bi->zbuf[0] == 0) {
        if ((uint64_t)bi->zcount - 1 != n)
            return PM_EINVAL;
        stream_copy_in(segs, nseg, lo, bi->zbuf + 1, n);
        return 0;
    }
    z_stream z = {0};
    if (inflateInit(&z) != Z_OK)
        return PM_ENOMEM;
    z.next_in = bi->zbuf + 1;
    z.avail_in = (uInt)(bi->zcount - 1);
    walk_t w = walk_at(segs, nseg, lo, n);
    unsigned char *p;
    uint64_t len;
    int zr = Z_OK;
    while (zr == Z_OK && walk_next(&w, &p, &len)) {
        z.next_out = p;
        z.avail_out = (uInt)len;
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr == Z_OK && z.avail_out != 0)
            zr = Z_DATA_ERROR;
    }
    bool ok = (zr == Z_STREAM_END || (zr == Z_OK && inflate(&z, Z_FINISH) == Z_STREAM_END)) &&
              z.total_out == n;
    inflateEnd(&z);
    return ok ? 0 : PM_EINVAL;
}

/* One step of a zlib payload: probe, receive or inflate its next fragment. */
static int zlib_step(pm__bulk_in_t *bi)
{
    if (!bi->zposted) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        MPI_Improbe(bi->src, bi->tag, pm__bulk_comm, &flag, &msg, &st);
        if (!flag)
            return 0;
        MPI_Get_count(&st, MPI_BYTE, &bi->zcount);
        free(bi->zbuf);
        bi->zbuf = malloc(bi->zcount > 0 ? (size_t)bi->zcount : 1);
        if (bi->zbuf == NULL) {
            pm__error("out of memory receiving a payload from host %d; aborting the job", bi->src);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Imrecv(bi->zbuf, bi->zcount, MPI_BYTE, &msg, &bi->zreq);
        bi->zposted = true;
    }
    int done = 0;
    MPI_Test(&bi->zreq, &done, MPI_STATUS_IGNORE);
    if (!done)
        return 0;
    bi->zposted = false;
    bi->wire += (uint64_t)bi->zcount - 1; /* the flag byte is framing */
    int rc = land_zfrag(bi);
    if (rc != 0 && bi->status == 0)
        bi->status = rc;
    bi->next_frag++;
    return 1;
}

int pm__bulk_progress(void)
{
    int work = 0;
    for (pm__bulk_out_t **pp = &B.acks; *pp != NULL;) {
        pm__bulk_out_t *bo = *pp;
        int flag = 0;
        MPI_Test(&bo->ack_req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            pp = &bo->ack_next;
            continue;
        }
        *pp = bo->ack_next;
        bulk_out_step(bo);
        work++;
    }
    for (pm__bulk_in_t **pp = &B.in; *pp != NULL;) {
        pm__bulk_in_t *bi = *pp;
        if (bi->mode == MODE_RAW || bi->mode == MODE_PIECES) {
            int flag = 0;
            MPI_Testall((int)bi->nfrag, bi->reqs, &flag, MPI_STATUSES_IGNORE);
            if (flag) {
                for (uint32_t k = 0; k < bi->nfrag; k++)
                    if (bi->types[k] != MPI_BYTE)
                        MPI_Type_free(&bi->types[k]);
                bi->next_frag = bi->nfrag;
            }
        } else if (bi->mode == MODE_CMA) {
            /* Up to PM__CMA_STEP bytes a round, in calls of PM__CMA_IOV pieces. */
            for (uint64_t from = bi->cma_at; bi->next_frag < bi->nfrag && bi->cma_at - from < PM__CMA_STEP;)
                cma_step(bi);
            work++;
        } else {
            while (bi->next_frag < bi->nfrag && zlib_step(bi))
                work++;
        }
        if (bi->next_frag < bi->nfrag) {
            pp = &bi->next;
            continue;
        }
        *pp = bi->next;
        landed(bi);
        work++;
    }
    return work;
}

bool pm__bulk_busy(void)
{
    return B.in != NULL || B.acks != NULL || atomic_load(&B.codec_jobs) > 0;
}

double pm__comm_rate(int host)
{
    if (B.rate == NULL || host < 0 || host >= pm__rt.nhosts)
        return 0;
    return (double)atomic_load(&B.rate[host]);
}

double pm__comm_rtt(int host)
{
    if (B.rtt == NULL || host < 0 || host >= pm__rt.nhosts)
        return 0;
    return B.rtt[host];
}

/* ---- start and stop ------------------------------------------------------- */

/* Host 0 sends host h `bytes` of buf and waits for a 1-byte answer, three
 * times; host h answers. Host 0 gets the fastest round trip in seconds,
 * others 0. Tag 0 of the payload communicator is never a payload's. */
static double best_round_trip(int h, unsigned char *buf, int bytes)
{
    unsigned char ack = 0;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        if (pm__rt.host == 0) {
            double t0 = pm__now();
            MPI_Send(buf, bytes, MPI_BYTE, h, 0, pm__bulk_comm);
            MPI_Recv(&ack, 1, MPI_BYTE, h, 0, pm__bulk_comm, MPI_STATUS_IGNORE);
            double dt = pm__now() - t0;
            best = best == 0 || dt < best ? dt : best;
        } else if (pm__rt.host == h) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, pm__bulk_comm, MPI_STATUS_IGNORE);
            MPI_Send(&ack, 1, MPI_BYTE, 0, 0, pm__bulk_comm);
        }
    }
    return best;
}

/*
 * Which hosts on this machine may read this process's memory with
 * process_vm_readv (collective, at start-up): each process lets processes
 * of its user trace it (the Yama module otherwise lets only ancestors read
 * its memory, and Open MPI does the same for its own single copies), then
 * reads a number from each peer at the address the peer gave, and the
 * answers are exchanged, so that a sender knows which receivers can.
 * PMLIB_CMA=0 on a host: it neither reads nor is read.
 */
static void cma_probe(void)
{
    static volatile uint64_t magic;
    int n = pm__rt.nhosts, want = pm__env_uint("PMLIB_CMA", "0 or 1", 0, 1, 1) != 0, lsize = 1;
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Comm_split_type(pm__bulk_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &lsize);
    struct peer {
        uint64_t pid, addr, magic, want, host;
    } me, *all = calloc((size_t)lsize, sizeof *all);
    unsigned char *can = calloc((size_t)n, 1);
    B.cma_to = calloc((size_t)n, 1);
    B.pid = calloc((size_t)n, sizeof *B.pid);
    if (all == NULL || can == NULL || B.cma_to == NULL || B.pid == NULL) {
        pm__error("out of memory starting the transport; aborting the job");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    magic = 0x9e3779b97f4a7c15u ^ (uint64_t)getpid() ^ (uint64_t)(pm__now() * 1e9);
    me = (struct peer){(uint64_t)getpid(), (uint64_t)(uintptr_t)&magic, magic, (uint64_t)want,
                       (uint64_t)pm__rt.host};
    if (me.want && lsize > 1)
        (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, local);
    for (int j = 0; j < lsize; j++) {
        if (all[j].host == me.host || all[j].host >= (uint64_t)n)
            continue;
        B.pid[all[j].host] = (pid_t)all[j].pid;
        uint64_t v = 0;
        struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)all[j].addr, sizeof v};
        if (me.want && all[j].want && process_vm_readv((pid_t)all[j].pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof v &&
            v == all[j].magic)
            can[all[j].host] = 1;
    }
    /* Element h of `can` goes to host h: whether this host reads h's memory. */
    MPI_Alltoall(can, 1, MPI_BYTE, B.cma_to, 1, MPI_BYTE, pm__bulk_comm);
    MPI_Comm_dup(pm__bulk_comm, &B.ack_comm);
    MPI_Comm_free(&local);
    int readers = 0;
    for (int h = 0; h < n; h++)
        readers += B.cma_to[h];
    if (readers > 0)
        pm__debug("transport: %d host(s) on this machine read payloads of small pieces from here directly",
                  readers);
    free(all);
    free(can);
}

/* At start-up, before the comm thread: host 0 times a 1 MiB payload to each
 * host, so that the first task already weighs moving data by the link's
 * real speed, and a 1-byte round trip: what a host costs a task beyond its
 * bytes is at least a few of those (sched/hosts.h). */
void pm__bulk_probe(void)
{
    enum { BYTES = 1 << 20 };
    unsigned char *buf = calloc(1, BYTES);
    int ok = buf != NULL, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, pm__bulk_comm);
    for (int h = 1; all && h < pm__rt.nhosts; h++) {
        double payload = best_round_trip(h, buf, BYTES), rtt = best_round_trip(h, buf, 1);
        if (pm__rt.host == 0 && payload > 0)
            atomic_store(&B.rate[h], (uint64_t)(BYTES / payload));
        if (pm__rt.host == 0)
            B.rtt[h] = rtt;
    }
    free(buf);
    cma_probe();
}

int pm__bulk_start(void)
{
    int n = pm__rt.nhosts, flag = 0;
    void *ub = NULL;
    MPI_Comm_get_attr(pm__bulk_comm, MPI_TAG_UB, &ub, &flag);
    B.tag_ub = flag && ub != NULL ? *(int *)ub : 32767;
    B.next_tag = calloc((size_t)n, sizeof *B.next_tag);
    B.rate = calloc((size_t)n, sizeof *B.rate);
    B.rtt = calloc((size_t)n, sizeof *B.rtt);
    if (B.next_tag == NULL || B.rate == NULL || B.rtt == NULL)
        return PM__FAIL(PM_ENOMEM, "pm_init: out of memory for the transport");
    for (int h = 0; h < n; h++)
        B.next_tag[h] = 1;
    pthread_mutex_init(&B.lock, NULL);
    pthread_cond_init(&B.cv, NULL);
    pthread_cond_init(&B.room, NULL);
    if (pthread_create(&B.codec, NULL, codec_main, NULL) != 0)
        return PM__FAIL(PM_ENOMEM, "pm_init: cannot start the codec thread");
    pthread_setname_np(B.codec, "pmlib-codec");
    B.started = 1;
    return 0;
}

void pm__bulk_stop(void)
{
    if (B.started) {
        pthread_mutex_lock(&B.lock);
        B.stop = 1;
        pthread_cond_broadcast(&B.cv);
        pthread_cond_broadcast(&B.room);
        pthread_mutex_unlock(&B.lock);
        pthread_join(B.codec, NULL);
        pthread_mutex_destroy(&B.lock);
        pthread_cond_destroy(&B.cv);
        pthread_cond_destroy(&B.room);
    }
    while (B.in != NULL) {
        pm__bulk_in_t *bi = B.in;
        B.in = bi->next;
        bulk_in_free(bi);
    }
    while (B.acks != NULL) { /* a job ending early: the answers will not come */
        pm__bulk_out_t *bo = B.acks;
        B.acks = bo->ack_next;
        MPI_Cancel(&bo->ack_req);
        MPI_Request_free(&bo->ack_req);
        bulk_out_free(bo);
    }
    if (B.ack_comm != MPI_COMM_NULL && B.ack_comm != 0)
        MPI_Comm_free(&B.ack_comm);
    free(B.cma_to);
    free(B.pid);
    free(B.next_tag);
    free(B.rate);
    free(B.rtt);
    memset(&B, 0, sizeof B);
}
