/* Pull (default): equal initial shares, then idle stubs steal half a range. */
#include <stdlib.h>

#include "sched/ranges.h"

static int pull_init(pm__task_t *t, int nstubs)
{
    double *w = malloc((size_t)nstubs * sizeof *w);
    if (w == NULL)
        return PM_ENOMEM;
    pm__ranges_equal_weights(t, nstubs, w);
    int rc = pm__ranges_init(t, nstubs, w);
    free(w);
    return rc;
}

static bool pull_take(pm__task_t *t, int stub, uint64_t *chunk)
{
    return pm__ranges_take_own(t, stub, chunk) || pm__ranges_steal(t, stub, chunk);
}

const pm__sched_policy_t pm__sched_pull = {
    .name = "pull",
    .id = PM_SCHED_PULL,
    .init = pull_init,
    .take = pull_take,
    .fini = pm__ranges_fini,
};
