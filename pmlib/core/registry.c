/* Callback sets registered by name; every host registers the same names. */
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

/* The sets have a lock of their own, so that a submit looking up its
 * callbacks does not take the runtime lock that stubs use. Each set has a
 * block of its own that stays where it is until pm_finalize, so a lookup
 * may hand out its address; the set found last is remembered, and a
 * program submitting tasks of one set finds it without the lock (a set
 * never changes once registered). */
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static pm__callbacks_t **sets;
static int nsets, capsets;
static _Atomic(const pm__callbacks_t *) last_found;
static atomic_int with_cuda; /* sets registered with a cuda callback */

bool pm__registry_has_cuda(void)
{
    return atomic_load_explicit(&with_cuda, memory_order_relaxed) > 0;
}

int pm_callbacks_init(pm_callbacks_t *cb)
{
    if (cb == NULL)
        return PM__FAIL(PM_EINVAL, "pm_callbacks_init: cb is NULL; pass the address of a pm_callbacks_t");
    memset(cb, 0, sizeof *cb);
    return 0;
}

static const pm__callbacks_t *find_locked(const char *name)
{
    for (int i = 0; i < nsets; i++)
        if (strcmp(sets[i]->name, name) == 0)
            return sets[i];
    return NULL;
}

const pm__callbacks_t *pm__registry_get(const char *name)
{
    const pm__callbacks_t *found = atomic_load_explicit(&last_found, memory_order_acquire);
    if (found != NULL && strcmp(found->name, name) == 0)
        return found;
    pthread_mutex_lock(&sets_lock);
    found = find_locked(name);
    if (found != NULL)
        atomic_store_explicit(&last_found, found, memory_order_release);
    pthread_mutex_unlock(&sets_lock);
    return found;
}

int pm_callbacks_register(const char *name, const pm_callbacks_t *cb)
{
    PM__CHECK_INIT("pm_callbacks_register");
    if (name == NULL || cb == NULL)
        return PM__FAIL(PM_EINVAL, "pm_callbacks_register: name and cb must not be NULL");
    size_t len = strlen(name);
    if (len == 0 || len >= PM__NAME_MAX)
        return PM__FAIL(PM_EINVAL, "pm_callbacks_register: name '%.80s' must be 1 to %d bytes long",
                        name, PM__NAME_MAX - 1);
    if (cb->cpu == NULL && cb->cuda == NULL)
        return PM__FAIL(PM_EINVAL, "callbacks '%s' have neither a cpu nor a cuda callback; set at least one", name);
    int rc = 0;
    pthread_mutex_lock(&sets_lock);
    if (find_locked(name) != NULL) {
        rc = PM__FAIL(PM_EEXIST, "callbacks '%s' are already registered; use another name", name);
        goto out_unlock;
    }
    if (nsets == capsets) {
        int cap = capsets ? capsets * 2 : 16;
        pm__callbacks_t **n = realloc(sets, (size_t)cap * sizeof *n);
        if (n == NULL) {
            rc = PM__FAIL(PM_ENOMEM, "out of memory registering callbacks '%s'", name);
            goto out_unlock;
        }
        sets = n;
        capsets = cap;
    }
    pm__callbacks_t *set = calloc(1, sizeof *set);
    if (set == NULL) {
        rc = PM__FAIL(PM_ENOMEM, "out of memory registering callbacks '%s'", name);
        goto out_unlock;
    }
    /* Reads the set's model file, if any: registration is start-up time. */
    set->model = pm__hooks.model_create(name, pm__rt.stubs, pm__rt.nstubs);
    if (set->model == NULL) {
        free(set);
        rc = PM__FAIL(PM_ENOMEM, "out of memory registering callbacks '%s'", name);
        goto out_unlock;
    }
    memcpy(set->name, name, len + 1);
    set->name_hash = pm__name_hash(name);
    set->cb = *cb;
    set->set = set;
    sets[nsets++] = set;
    if (cb->cuda != NULL)
        atomic_fetch_add_explicit(&with_cuda, 1, memory_order_relaxed);
out_unlock:
    pthread_mutex_unlock(&sets_lock);
    if (rc == 0 && cb->cuda != NULL)
        pm__hooks.cuda_registered();
    return rc;
}

void pm__registry_clear(void)
{
    /* At pm_finalize, after the stubs stopped: each model writes its file. */
    pthread_mutex_lock(&sets_lock);
    atomic_store_explicit(&last_found, NULL, memory_order_relaxed);
    for (int i = 0; i < nsets; i++) {
        pm__hooks.model_destroy(sets[i]->model);
        free(sets[i]);
    }
    free(sets);
    sets = NULL;
    nsets = capsets = 0;
    atomic_store(&with_cuda, 0);
    pthread_mutex_unlock(&sets_lock);
}
