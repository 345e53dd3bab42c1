/*
 * Copies between host and device for the GPU stub (exec/cuda_int.h):
 * pieces of strided parts, through pinned staging halves, directly from
 * page-locked memories, or by a kernel for narrow rows.
 */
#include "exec/cuda_int.h"

#include <string.h>

/* ---- copies between host and device -------------------------------------- */

/* Cuts part q into pieces of at most `limit` bytes, in order; *pos counts the
 * bytes already handed out. False when none are left. */
static bool next_piece(const pm__sub_t *q, uint64_t limit, uint64_t *pos, piece_t *pc)
{
    if (*pos >= q->block * q->count)
        return false;
    uint64_t row = *pos / q->block, col = *pos % q->block;
    if (q->block > limit) {
        uint64_t n = q->block - col < limit ? q->block - col : limit;
        *pc = (piece_t){q->offset + row * q->stride + col, n, n, 1};
        *pos += n;
        return true;
    }
    uint64_t rows = q->stride > MAX_PITCH ? 1 : limit / q->block;
    if (rows > q->count - row)
        rows = q->count - row;
    *pc = (piece_t){q->offset + row * q->stride, q->block, q->stride, rows};
    *pos += rows * q->block;
    return true;
}

static int copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t rows, enum cudaMemcpyKind kind, cudaStream_t st)
{
    if (rows == 1)
        return PM__CUDA(QUIET, cudaMemcpyAsync(dst, src, width, kind, st));
    return PM__CUDA(QUIET, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, st));
}

/* Gathers a piece into the next staging half (once the copy that used the
 * half last is done) and sends it on the slot's stream. */
static int stage_in(slot_t *sl, void *dev_nat, const void *host_nat, const piece_t *pc)
{
    int h = sl->half;
    sl->half ^= 1;
    int rc = PM__CUDA(QUIET, cudaEventSynchronize(sl->stage_done[h]));
    if (rc != 0)
        return rc;
    for (uint64_t i = 0; i < pc->rows; i++)
        memcpy(sl->stage[h] + i * pc->block, at(host_nat, pc->off + i * pc->stride), pc->block);
    rc = copy_rows(at(dev_nat, pc->off), pc->stride, sl->stage[h], pc->block, pc->block, pc->rows,
                   cudaMemcpyHostToDevice, sl->stream);
    return rc ? rc : PM__CUDA(QUIET, cudaEventRecord(sl->stage_done[h], sl->stream));
}

/* The device's view of host_nat when it is memory m's own page-locked
 * buffer, which is mapped; else NULL. */
static void *mapped_view(const run_t *r, const void *host_nat, bool pinned, int m)
{
    return pinned && host_nat == r->t->mems[m]->data ? r->mapped[m] : NULL;
}

/* Whether a piece moves through the copy kernel: narrow rows, mapped host. */
static bool by_kernel(const run_t *r, const void *mapped_nat, const piece_t *pc)
{
    return mapped_nat != NULL && pc->rows > 1 && pc->block < r->p->narrow_row;
}

/* Copies the parts host -> device (both natural views) on the slot's stream;
 * returns once the host bytes may change. */
int pm__cu_copy_in(run_t *r, slot_t *sl, void *dev_nat, const void *host_nat, bool pinned,
                   parts_t ps)
{
    const void *mapped_nat = mapped_view(r, host_nat, pinned, ps.mem);
    int rc = 0;
    for (uint32_t i = 0; i < ps.n && rc == 0; i++) {
        const pm__sub_t *q = &ps.r[i];
        if (q->mem != ps.mem || !(q->access & ps.access))
            continue;
        uint64_t pos = 0;
        piece_t pc;
        while (rc == 0 && next_piece(q, pinned ? UINT64_MAX : STAGE_BYTES, &pos, &pc)) {
            if (by_kernel(r, mapped_nat, &pc))
                rc = PM__CUDA(QUIET, (cudaError_t)pm__cuda_copy_rows(
                                         at(dev_nat, pc.off), at(mapped_nat, pc.off), pc.block,
                                         pc.stride, pc.rows, sl->stream));
            else if (pinned)
                rc = copy_rows(at(dev_nat, pc.off), pc.stride, at(host_nat, pc.off), pc.stride,
                               pc.block, pc.rows, cudaMemcpyHostToDevice, sl->stream);
            else
                rc = stage_in(sl, dev_nat, host_nat, &pc);
            r->cnt->bytes_to_gpu += pc.block * pc.rows;
        }
    }
    return rc;
}

/* A piece sent to a staging half, still to be scattered to the host. */
typedef struct pending {
    bool any;
    int h;
    piece_t pc;
} pending_t;

static int unstage(slot_t *sl, pending_t *pd, void *host_nat)
{
    if (!pd->any)
        return 0;
    pd->any = false;
    int rc = PM__CUDA(QUIET, cudaEventSynchronize(sl->stage_done[pd->h]));
    for (uint64_t i = 0; i < pd->pc.rows && rc == 0; i++)
        memcpy(at(host_nat, pd->pc.off + i * pd->pc.stride), sl->stage[pd->h] + i * pd->pc.block,
               pd->pc.block);
    return rc;
}

/* Sends one piece device -> host; a staged one is scattered one step later,
 * so each piece's copy overlaps the scatter of the one before. */
static int out_piece(slot_t *sl, const void *dev_nat, void *host_nat, bool pinned,
                     void *mapped_nat, bool kernel, const piece_t *pc, pending_t *pd)
{
    if (kernel)
        return PM__CUDA(QUIET, (cudaError_t)pm__cuda_copy_rows(
                                   at(mapped_nat, pc->off), at(dev_nat, pc->off), pc->block,
                                   pc->stride, pc->rows, sl->stream));
    if (pinned)
        return copy_rows(at(host_nat, pc->off), pc->stride, at(dev_nat, pc->off), pc->stride,
                         pc->block, pc->rows, cudaMemcpyDeviceToHost, sl->stream);
    int h = sl->half;
    sl->half ^= 1;
    int rc = copy_rows(sl->stage[h], pc->block, at(dev_nat, pc->off), pc->stride, pc->block,
                       pc->rows, cudaMemcpyDeviceToHost, sl->stream);
    if (rc == 0)
        rc = PM__CUDA(QUIET, cudaEventRecord(sl->stage_done[h], sl->stream));
    int urc = unstage(sl, pd, host_nat);
    *pd = (pending_t){rc == 0, h, *pc};
    return rc ? rc : urc;
}

/* Copies the parts device -> host and waits until they are there; page-
 * locked ones with `wait` false are only enqueued on the slot's stream. */
int pm__cu_copy_out(run_t *r, slot_t *sl, const void *dev_nat, void *host_nat, bool pinned,
                    parts_t ps, bool wait)
{
    void *mapped_nat = mapped_view(r, host_nat, pinned, ps.mem);
    pending_t pd = {0};
    int rc = 0;
    for (uint32_t i = 0; i < ps.n && rc == 0; i++) {
        const pm__sub_t *q = &ps.r[i];
        if (q->mem != ps.mem || !(q->access & ps.access))
            continue;
        uint64_t pos = 0;
        piece_t pc;
        while (rc == 0 && next_piece(q, pinned ? UINT64_MAX : STAGE_BYTES, &pos, &pc)) {
            rc = out_piece(sl, dev_nat, host_nat, pinned, mapped_nat,
                           by_kernel(r, mapped_nat, &pc), &pc, &pd);
            r->cnt->bytes_from_gpu += pc.block * pc.rows;
        }
    }
    int urc = unstage(sl, &pd, host_nat);
    if (rc == 0)
        rc = urc;
    if (rc == 0 && pinned && wait)
        rc = PM__CUDA(QUIET, cudaStreamSynchronize(sl->stream));
    return rc;
}

/* One contiguous range [lo, hi) of memory m as a parts list. */
parts_t pm__cu_range_parts(pm__sub_t *q, int m, uint64_t lo, uint64_t hi)
{
    *q = (pm__sub_t){.offset = lo, .block = hi - lo, .stride = hi - lo, .count = 1,
                     .mem = (uint8_t)m, .access = PM_READ_WRITE};
    return (parts_t){q, 1, m, PM_READ_WRITE};
}

/* Whether a host buffer is page-locked already, so copies skip the staging;
 * *mapped is then its address for kernels (NULL if it has none). */
bool pm__cu_host_pinned(const void *ptr, void **mapped)
{
    struct cudaPointerAttributes a;
    *mapped = NULL;
    if (ptr == NULL || PM__CUDA(QUIET, cudaPointerGetAttributes(&a, ptr)) != 0)
        return false;
    if (a.type == cudaMemoryTypeHost)
        *mapped = a.devicePointer;
    return a.type == cudaMemoryTypeHost;
}

