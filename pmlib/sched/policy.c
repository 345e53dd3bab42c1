/* The registry of scheduling policies: adding one is a file and a line. */
#include <string.h>

#include "core/internal.h"
#include "sched/policy.h"

extern const pm__sched_policy_t pm__sched_pull;
extern const pm__sched_policy_t pm__sched_static_equal;
extern const pm__sched_policy_t pm__sched_static_proportional;

static const pm__sched_policy_t *const policies[] = {
    &pm__sched_pull,
    &pm__sched_static_equal,
    &pm__sched_static_proportional,
};

#define NPOLICIES (sizeof policies / sizeof policies[0])

const pm__sched_policy_t *pm__sched_policy(pm_sched_t id)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (policies[i]->id == id)
            return policies[i];
    return NULL;
}

pm_sched_t pm__sched_parse(const char *name)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (strcmp(policies[i]->name, name) == 0)
            return policies[i]->id;
    return PM_SCHED_DEFAULT;
}

const char *pm__sched_name(pm_sched_t id)
{
    const pm__sched_policy_t *p = pm__sched_policy(id);
    return p ? p->name : "?";
}
