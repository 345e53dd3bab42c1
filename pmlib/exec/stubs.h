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

#endif /* PMLIB_EXEC_STUBS_H */
