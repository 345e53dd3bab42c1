/*
 * The scheduling policies of a host's stubs (pull, static, proportional),
 * each an ops table (pm__sched_policy_t in core/internal.h) in a file of
 * its own and listed in sched/policy.c.
 */
#ifndef PMLIB_SCHED_POLICY_H
#define PMLIB_SCHED_POLICY_H

#include "core/internal.h"

/* The policy of an id (NULL: none). */
const pm__sched_policy_t *pm__sched_policy(pm_sched_t id);
/* PMLIB_SCHED's names: the id, or PM_SCHED_DEFAULT for an unknown name. */
pm_sched_t pm__sched_parse(const char *name);
const char *pm__sched_name(pm_sched_t id);

#endif /* PMLIB_SCHED_POLICY_H */
