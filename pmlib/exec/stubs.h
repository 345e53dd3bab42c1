/*
 * The stubs: one thread per CPU core and per GPU, each running chunks
 * through its device's ops table (pm__device_ops_t in core/internal.h).
 */
#ifndef PMLIB_EXEC_STUBS_H
#define PMLIB_EXEC_STUBS_H

#include "core/internal.h"

extern const pm__device_ops_t pm__cpu_ops;
int pm__stubs_start(void);
void pm__stubs_stop(void);
/* Has every stub with a device to set up (a GPU's context, streams,
 * staging) do it now, on its own thread, once per process. */
void pm__stubs_warm(void);
/* Stub `stub` gives chunks [lo, hi) of a batch back to its range for the
 * other stubs (one host, under pull), when they are still there (not
 * stolen); the task goes back onto the ready lists, at their front, if it
 * left them (a batch may hold its last chunks). Given back to a task off
 * the lists, as before, they were found by no stub: 16 chunks of 10 ms ran
 * on one of 4 stubs while the others slept (tests/unit/test_wakeup, 1 run
 * in 7 beside two busy loops on 2 cores). The task cannot end meanwhile:
 * the chunks given back are not done. */
bool pm__stub_give_back(pm__task_t *t, int stub, uint64_t lo, uint64_t hi);

#endif /* PMLIB_EXEC_STUBS_H */
