/*
 * Mirrors shared with the GPUs of the other hosts of this machine (CUDA
 * IPC). Where every host runs on one machine, a GPU says in the machine's
 * table (data/node.h) which parts of a memory its mirror holds, namely
 * what it wrote and sent home in the task that made the memory's version,
 * with the mirror's IPC handle; a GPU of another host that lacks such a
 * part, in a task that only reads the memory, opens that mirror once and
 * copies the part GPU to GPU (NVLink where there is one) instead of from
 * host memory over PCIe. Within one process, the directory of copies does
 * the same with peer copies (exec/cuda_dir.c).
 *
 * PMLIB_CUDA_IPC=0 turns it off.
 */
#include "exec/cuda_int.h"
#include "trace/trace.h"

#include <string.h>
#include <unistd.h>

void pm__cu_node_join(cuda_priv_t *p)
{
    p->node_row = -1;
    for (int i = 0; i < PM__NODE_ROWS; i++)
        p->node_dev[i] = -2;
    if (!pm__node_on() || pm__env_uint("PMLIB_CUDA_IPC", "0 (off) or 1 (on)", 0, 1, 1) == 0)
        return;
    struct cudaDeviceProp prop;
    if (PM__CUDA(QUIET, cudaGetDeviceProperties(&prop, p->gpu.ordinal)) != 0)
        return;
    p->node_row = pm__node_join((const unsigned char *)prop.uuid.bytes);
    pm__debug("gpu %d: %s", p->gpu.ordinal,
              p->node_row >= 0 ? "shares its mirrors with the other hosts of this machine"
                               : "no row in the machine's table: its mirrors stay its own");
}

void pm__cu_node_leave(cuda_priv_t *p)
{
    for (int i = 0; i < NODE_MAPS; i++)
        if (p->node_maps[i].base != NULL)
            PM__CUDA(QUIET, cudaIpcCloseMemHandle(p->node_maps[i].base));
    memset(p->node_maps, 0, sizeof p->node_maps);
    pm__node_leave(p->node_row);
    p->node_row = -1;
}

/* ---- the owner ----------------------------------------------------------- */

void pm__cu_node_publish(cuda_priv_t *p, mirror_t *mr, bool written)
{
    uint64_t version = mr->c.version + 1; /* what the running task makes */
    if (p->node_row < 0 || mr->ipc_state < 0 || (!written && mr->node_version == version))
        return;
    if (mr->ipc_state == 0) {
        mr->ipc_state = PM__CUDA(QUIET, cudaIpcGetMemHandle(&mr->ipc, mr->buf.ptr)) == 0 ? 1 : -1;
        if (mr->ipc_state < 0) {
            pm__cuda_forget_error(); /* not the subtask's failure */
            return;
        }
        /* Unique on the machine: a reader keeps openings by row and gen. */
        mr->node_gen = (uint64_t)getpid() << 32 | ++p->node_gens;
    }
    /* The owner's own fields: read without the directory's lock. */
    if (pm__node_publish(p->node_row, &mr->node_rec, mr->c.handle, mr->node_gen,
                         (const unsigned char *)&mr->ipc, version, written ? &mr->c.pending : NULL) == 0)
        mr->node_version = version;
}

bool pm__cu_node_withdraw(cuda_priv_t *p, mirror_t *mr, bool wait)
{
    if (mr->node_rec < 0)
        return true;
    if (!pm__node_withdraw(p->node_row, mr->node_rec, wait))
        return false;
    mr->node_rec = -1;
    mr->node_version = 0;
    return true;
}

/* ---- readers ------------------------------------------------------------- */

/* The ordinal here of the GPU a row names, if this GPU copies from it
 * directly; else -1. Looked up once per row. */
static int node_device(const run_t *r, const pm__node_hold_t *h)
{
    cuda_priv_t *p = r->p;
    if (p->node_dev[h->row] != -2)
        return p->node_dev[h->row];
    const double t0 = pm__now();
    int n = 0, found = -1;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        n = 0;
    for (int d = 0; d < n && found < 0; d++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess &&
            memcmp(prop.uuid.bytes, h->dev, PM__NODE_DEV) == 0)
            found = d;
    }
    int can = 0;
    if (found >= 0 && found != p->gpu.ordinal &&
        (cudaDeviceCanAccessPeer(&can, p->gpu.ordinal, found) != cudaSuccess || !can))
        found = -1;
    cudaGetLastError();
    p->node_dev[h->row] = found;
    pm__debug("gpu %d %s the gpu of row %d of the machine's table", p->gpu.ordinal,
              found >= 0 ? "copies directly from" : "cannot copy directly from", h->row);
    pm__trace_span(r->s->index, PM__TRACE_GPU_OPEN, r->t->seq, (uint64_t)h->row, t0, pm__now());
    return found;
}

/* A GPU of another rank that could not be opened or copied from: the
 * part comes from the host's memory instead, and so does every later one
 * from that GPU; the failure is not the subtask's. */
static void node_unreachable(cuda_priv_t *p, int row)
{
    pm__cuda_forget_error();
    p->node_dev[row] = -1;
}

/* The other host's mirror h names, opened here (its index in node_maps),
 * or -1. Openings whose mirror is gone and that no copy uses are closed on
 * the way, so that the owner's device memory is given back. */
static int node_open(const run_t *r, const pm__node_hold_t *h)
{
    cuda_priv_t *p = r->p;
    int slot = -1;
    for (int i = 0; i < NODE_MAPS; i++) {
        struct node_map *nm = &p->node_maps[i];
        if (nm->base != NULL && nm->row == h->row && nm->gen == h->gen)
            return i;
        if (nm->base != NULL && nm->refs == 0 && !pm__node_current(nm->row, nm->rec, nm->gen)) {
            PM__CUDA(QUIET, cudaIpcCloseMemHandle(nm->base));
            *nm = (struct node_map){0};
        }
        if (nm->base == NULL && slot < 0)
            slot = i;
    }
    if (slot < 0)
        return -1;
    cudaIpcMemHandle_t handle;
    memcpy(&handle, h->ipc, sizeof handle);
    void *base = NULL;
    const double t0 = pm__trace_on() ? pm__now() : 0;
    int rc = PM__CUDA(QUIET, cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
    if (t0 > 0) /* milliseconds each (the first one enables peer access too) */
        pm__trace_span(r->s->index, PM__TRACE_GPU_OPEN, r->t->seq, (uint64_t)h->row, t0, pm__now());
    if (rc != 0) {
        node_unreachable(p, h->row);
        return -1;
    }
    p->node_maps[slot] = (struct node_map){h->row, h->rec, 0, h->gen, base};
    return slot;
}

/* Copies part q from an opened mirror into `to`, on the slot's stream. */
static int node_bytes(slot_t *sl, mirror_t *to, const unsigned char *from, const pm__sub_t *q)
{
    if (q->count == 1 || q->stride == q->block)
        return PM__CUDA(QUIET, cudaMemcpyAsync(at(to->buf.ptr, q->offset), from + q->offset,
                                               q->block * q->count, cudaMemcpyDeviceToDevice,
                                               sl->stream));
    if (q->stride <= MAX_PITCH)
        return PM__CUDA(QUIET, cudaMemcpy2DAsync(at(to->buf.ptr, q->offset), q->stride, from + q->offset,
                                                 q->stride, q->block, q->count,
                                                 cudaMemcpyDeviceToDevice, sl->stream));
    int rc = 0;
    for (uint64_t k = 0; k < q->count && rc == 0; k++)
        rc = PM__CUDA(QUIET, cudaMemcpyAsync(at(to->buf.ptr, q->offset + k * q->stride),
                                             from + q->offset + k * q->stride, q->block,
                                             cudaMemcpyDeviceToDevice, sl->stream));
    return rc;
}

int pm__cu_node_copy(run_t *r, slot_t *sl, mem_use_t *u, mirror_t *to, const pm__memory_t *mem,
                     const pm__sub_t *q)
{
    cuda_priv_t *p = r->p;
    if (p->node_row < 0 || u->nnode == NODE_USES)
        return NO_MIRROR;
    pm__node_hold_t h;
    if (!pm__node_take(p->node_row, mem->handle, mem->version, q, &h))
        return NO_MIRROR;
    int k = 0;
    while (k < u->nnode && !(u->node[k].row == h.row && u->node[k].gen == h.gen))
        k++;
    int map = k < u->nnode ? u->node_map[k] : -1;
    if (k < u->nnode) {
        pm__node_drop(&h); /* already counted as read by this use */
    } else if (node_device(r, &h) < 0 || (map = node_open(r, &h)) < 0) {
        pm__node_drop(&h);
        return NO_MIRROR;
    } else {
        u->node[u->nnode] = h;
        u->node_map[u->nnode++] = map;
        p->node_maps[map].refs++;
    }
    double t0 = pm__trace_on() ? pm__now() : 0;
    int rc = node_bytes(sl, to, p->node_maps[map].base, q);
    if (rc != 0) {
        node_unreachable(p, h.row);
        return NO_MIRROR;
    }
    r->cnt->bytes_gpu_peer += q->block * q->count;
    if (t0 > 0)
        pm__cu_trace_copy(r, sl, p->node_dev[h.row], p->gpu.ordinal, q->block * q->count, t0);
    return 0;
}

/* Whether the mirror `gen` of row's GPU needs no opening: opened here
 * already, or that GPU is out of reach. */
static bool opened_here(void *ctx, int row, uint64_t gen)
{
    const cuda_priv_t *p = ctx;
    if (p->node_dev[row] == -1)
        return true;
    for (int i = 0; i < NODE_MAPS; i++)
        if (p->node_maps[i].base != NULL && p->node_maps[i].row == row && p->node_maps[i].gen == gen)
            return true;
    return false;
}

/*
 * Opening another process's GPU memory costs milliseconds (7 ms the first
 * time, which enables peer access, 1.5 to 2.5 ms after that on 2 x H200),
 * and done at first use it stopped the GPU: PageRank's second and third
 * iterations on 2 ranks x 1 GPU took 20 and 12.7 ms against 7.5. A mirror
 * is published at the first subtask that writes it, so it is opened here
 * while the stream still computes, one at a time, the table's count of
 * publications saying when to look.
 */
void pm__cu_node_warm(run_t *r, const slot_t *sl)
{
    cuda_priv_t *p = r->p;
    if (p->node_row < 0)
        return;
    uint64_t news = pm__node_news();
    if (news == p->node_news || cudaStreamQuery(sl->stream) != cudaErrorNotReady)
        return;
    pm__node_hold_t h;
    if (!pm__node_take_unseen(p->node_row, opened_here, p, &h)) {
        p->node_news = news; /* all opened */
        return;
    }
    if (node_device(r, &h) < 0 || node_open(r, &h) < 0)
        p->node_news = news; /* no room, or out of reach: not again until more come */
    pm__node_drop(&h);
}

void pm__cu_node_release(cuda_priv_t *p, mem_use_t *u)
{
    for (int k = 0; k < u->nnode; k++) {
        pm__node_drop(&u->node[k]);
        p->node_maps[u->node_map[k]].refs--;
    }
    u->nnode = 0;
}
