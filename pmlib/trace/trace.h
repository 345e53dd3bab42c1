/*
 * PMLIB_TRACE (trace/trace.c): a Chrome trace-event file, one track per
 * stub per host; and PMLIB_PROGRESS (trace/progress.c): a progress line on
 * host 0's terminal. The kinds of span are core's (enum pm__trace_what).
 */
#ifndef PMLIB_TRACE_TRACE_H
#define PMLIB_TRACE_TRACE_H

#include "core/internal.h"

void pm__progress_start(void);
void pm__progress_stop(void);

void pm__trace_init(void);
int pm__trace_on(void);
/* Records a span on a stub's track (stub < 0: the tasks track). */
void pm__trace_span(int stub, int what, uint64_t task, uint64_t chunk, double t0, double t1);
/* A payload of `bytes` from host `from` to host `to` for task seq `task`. */
void pm__trace_move(int from, int to, uint64_t task, uint64_t bytes, double t0, double t1);
/* A copy of `bytes` from GPU `from` to GPU `to` of this host (ordinals) for
 * task seq `task`, from when it was queued to when its stream reached its
 * end; any thread. */
void pm__trace_gpu_copy(int from, int to, uint64_t task, uint64_t bytes, double t0, double t1);
void pm__trace_finish(void);

#endif /* PMLIB_TRACE_TRACE_H */
