/*
 * Static policies, for comparison with pull: each stub gets one contiguous
 * share up front and nothing moves afterwards. Proportional shares follow
 * each stub's relative speed (equal among CPU cores).
 */
#include <stdlib.h>

#include "sched/ranges.h"

static int static_init(pm__task_t *t, int nstubs)
{
    double *w = malloc((size_t)nstubs * sizeof *w);
    if (w == NULL)
        return PM_ENOMEM;
    pm__ranges_equal_weights(t, nstubs, w);
    if (t->desc.sched == PM_SCHED_STATIC_PROPORTIONAL)
        for (int s = 0; s < nstubs; s++)
            w[s] *= pm__rt.stubs[s].speed;
    int rc = pm__ranges_init(t, nstubs, w);
    free(w);
    return rc;
}

static bool static_take(pm__task_t *t, int stub, uint64_t *chunk)
{
    return pm__ranges_take_own(t, stub, chunk);
}

const pm__sched_policy_t pm__sched_static_equal = {
    .name = "static",
    .id = PM_SCHED_STATIC_EQUAL,
    .init = static_init,
    .take = static_take,
    .left = pm__ranges_left,
    .fini = pm__ranges_fini,
};

const pm__sched_policy_t pm__sched_static_proportional = {
    .name = "proportional",
    .id = PM_SCHED_STATIC_PROPORTIONAL,
    .init = static_init,
    .take = static_take,
    .left = pm__ranges_left,
    .fini = pm__ranges_fini,
};
