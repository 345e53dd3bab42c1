/* Memories: host buffers with a version that tasks and touches bump. */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

pm__memory_t *pm__memory_lookup_locked(pm_memory_t m)
{
    return pm__handle_get(&pm__rt.memories, m.id);
}

/* Looks a memory up and keeps the runtime lock held on success. */
static int lookup(const char *fn, pm_memory_t m, pm__memory_t **out)
{
    PM__CHECK_INIT(fn);
    pthread_mutex_lock(&pm__rt.lock);
    *out = pm__memory_lookup_locked(m);
    if (*out == NULL) {
        pthread_mutex_unlock(&pm__rt.lock);
        return PM__FAIL(PM_EBADHANDLE, "%s: memory handle %#llx was released or never created",
                        fn, (unsigned long long)m.id);
    }
    return 0;
}

/* With GPU stubs and cuda callbacks registered, memories are page-locked
 * so that copies to and from the GPUs run at full speed without staging.
 * Without cuda callbacks no GPU will touch them, and page-locking would
 * make a CUDA context in a process that never needs one. */
bool pm__want_pinned(void)
{
    int ngpu = 0;
    for (int i = 0; i < pm__rt.nstubs; i++)
        ngpu += pm__rt.stubs[i].ops->kind == PM_DEVICE_GPU;
    return ngpu > 0 && pm__hooks.pinned_alloc != NULL && pm__registry_has_cuda();
}

/* Memories from this size on live in a file the other hosts of this
 * machine map, when they all run here (comm/shm.c): smaller ones travel
 * with their tasks for less than a file and a mapping cost. */
#define PM__SHARE_MIN ((size_t)64 << 10)

static void *host_alloc(pm__memory_t *m, size_t bytes)
{
    bool pin = pm__want_pinned();
    m->shm_fd = -1;
    if (bytes >= PM__SHARE_MIN && pm__hooks.shared_alloc != NULL) {
        void *p = pm__hooks.shared_alloc(bytes, &m->shm_fd);
        if (p != NULL) {
            m->shared = true;
            m->pinned = pin && pm__hooks.pin(p, bytes) == 0;
            return p;
        }
    }
    if (pin) {
        void *p = pm__hooks.pinned_alloc(bytes);
        if (p != NULL) {
            m->pinned = true;
            return p;
        }
    }
    return pm__aligned_alloc(bytes);
}

static void host_free(pm__memory_t *m)
{
    if (m->shared) {
        if (m->pinned)
            pm__hooks.unpin(m->data);
        pm__hooks.shared_free(m->data, m->bytes, m->shm_fd);
    } else if (m->pinned) {
        pm__hooks.pinned_free(m->data);
    } else {
        free(m->data);
    }
}

int pm_memory_create(size_t bytes, pm_memory_t *memory)
{
    PM__CHECK_INIT("pm_memory_create");
    if (pm__rt.host != 0)
        return PM__FAIL(PM_EINVAL, "pm_memory_create on host %d: only host 0 creates memories and submits tasks",
                        pm__rt.host);
    if (memory == NULL)
        return PM__FAIL(PM_EINVAL, "pm_memory_create: memory is NULL; pass the address of a pm_memory_t");
    *memory = PM_MEMORY_NULL;
    if (bytes == 0)
        return PM__FAIL(PM_EINVAL, "pm_memory_create: size 0; a memory holds at least one byte");
    pm__memory_t *m = calloc(1, sizeof *m);
    void *data = m ? host_alloc(m, bytes) : NULL;
    if (m == NULL || data == NULL) {
        free(m);
        return PM__FAIL(PM_ENOMEM, "pm_memory_create: cannot allocate %zu bytes", bytes);
    }
    if (!m->shared) /* a new file reads as zeros */
        memset(data, 0, bytes);
    m->data = data;
    m->bytes = bytes;
    m->version = 1;
    pthread_mutex_lock(&pm__rt.lock);
    m->handle = pm__handle_add(&pm__rt.memories, m);
    pthread_mutex_unlock(&pm__rt.lock);
    if (m->handle == 0) {
        host_free(m);
        free(m);
        return PM__FAIL(PM_ENOMEM, "pm_memory_create: out of memory for handles");
    }
    memory->id = m->handle;
    if (pm__hooks.created != NULL)
        pm__hooks.created(m);
    return 0;
}

/* PM_EBUSY, with the advice `wait` ("first", "before writing it"), while
 * unfinished tasks use the memory; runtime lock held. */
static int check_unused_locked(const char *fn, const pm__memory_t *m, const char *wait)
{
    if (m->users == 0)
        return 0;
    return PM__FAIL(PM_EBUSY, "%s: %d unfinished task(s) use this memory; pm_task_wait for them %s",
                    fn, m->users, wait);
}

/* Host 0 brings home the ranges of a lazy memory other hosts hold; the
 * runtime lock is held on entry and on return. */
static int gather_locked(const char *fn, pm__memory_t *m)
{
    if (!pm__hooks.away(m))
        return 0;
    int rc = check_unused_locked(fn, m, "before gathering it");
    if (rc != 0)
        return rc;
    m->users++; /* no task may start on it, nor may it be released, meanwhile */
    pthread_mutex_unlock(&pm__rt.lock);
    rc = pm__hooks.gather(m);
    pthread_mutex_lock(&pm__rt.lock);
    m->users--;
    if (rc != 0)
        return PM__FAIL(rc, "%s: could not bring the memory's ranges home from the hosts holding them (%s)",
                        fn, pm_strerror(rc));
    return 0;
}

void *pm_memory_data(pm_memory_t memory)
{
    pm__memory_t *m;
    if (lookup("pm_memory_data", memory, &m) != 0)
        return NULL;
    /* A lazy memory no task uses comes home first, so the program sees
     * what its tasks wrote. */
    void *p = m->users > 0 || gather_locked("pm_memory_data", m) == 0 ? m->data : NULL;
    pthread_mutex_unlock(&pm__rt.lock);
    return p;
}

int pm_memory_set_lazy(pm_memory_t memory, int lazy)
{
    pm__memory_t *m;
    int rc = lookup("pm_memory_set_lazy", memory, &m);
    if (rc != 0)
        return rc;
    rc = check_unused_locked("pm_memory_set_lazy", m, "first");
    if (rc == 0 && !lazy)
        rc = gather_locked("pm_memory_set_lazy", m);
    if (rc == 0 && pm__hooks.set_lazy(m, lazy != 0) != 0)
        rc = PM__FAIL(PM_ENOMEM, "pm_memory_set_lazy: out of memory");
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_memory_gather(pm_memory_t memory)
{
    pm__memory_t *m;
    int rc = lookup("pm_memory_gather", memory, &m);
    if (rc != 0)
        return rc;
    rc = gather_locked("pm_memory_gather", m);
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_memory_size(pm_memory_t memory, size_t *bytes)
{
    pm__memory_t *m;
    if (bytes == NULL)
        return PM__FAIL(PM_EINVAL, "pm_memory_size: bytes is NULL");
    int rc = lookup("pm_memory_size", memory, &m);
    if (rc != 0)
        return rc;
    *bytes = m->bytes;
    pthread_mutex_unlock(&pm__rt.lock);
    return 0;
}

int pm_memory_version(pm_memory_t memory, uint64_t *version)
{
    pm__memory_t *m;
    if (version == NULL)
        return PM__FAIL(PM_EINVAL, "pm_memory_version: version is NULL");
    int rc = lookup("pm_memory_version", memory, &m);
    if (rc != 0)
        return rc;
    *version = m->version;
    pthread_mutex_unlock(&pm__rt.lock);
    return 0;
}

int pm_memory_touch(pm_memory_t memory)
{
    pm__memory_t *m;
    int rc = lookup("pm_memory_touch", memory, &m);
    if (rc != 0)
        return rc;
    rc = check_unused_locked("pm_memory_touch", m, "before writing it");
    if (rc == 0) {
        m->version++;
        pm__hooks.touched(m); /* the program's bytes are the current ones */
    }
    pthread_mutex_unlock(&pm__rt.lock);
    return rc;
}

int pm_memory_release(pm_memory_t memory)
{
    pm__memory_t *m;
    int rc = lookup("pm_memory_release", memory, &m);
    if (rc != 0)
        return rc;
    rc = check_unused_locked("pm_memory_release", m, "first");
    if (rc != 0) {
        pthread_mutex_unlock(&pm__rt.lock);
        return rc;
    }
    pm__handle_remove(&pm__rt.memories, m->handle);
    if (pm__hooks.released != NULL)
        pm__hooks.released(m);
    pthread_mutex_unlock(&pm__rt.lock);
    pm__hooks.freed(m);
    host_free(m);
    free(m);
    return 0;
}

void pm__memory_free_all(void)
{
    pm__handle_table_t *t = &pm__rt.memories;
    for (uint32_t i = 0; i < t->cap; i++) {
        pm__memory_t *m = t->obj[i];
        if (m != NULL) {
            pm__hooks.freed(m);
            host_free(m);
            free(m);
        }
    }
    pm__handle_table_free(t);
}
