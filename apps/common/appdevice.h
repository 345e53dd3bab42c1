/*
 * Device helpers shared by the sample apps that run on CPUs and GPUs: the
 * --device option, a clear failure when no chosen device exists, a default
 * subtask size and the statistics of a run of several tasks.
 */
#ifndef APPDEVICE_H
#define APPDEVICE_H

#include <stdint.h>

#include "pmlib.h"

/**
 * Parses the value of --device: "cpu", "gpu" or "all" give PM_DEVICE_CPU,
 * PM_DEVICE_GPU or PM_DEVICE_ANY; anything else prints one line and exits 2.
 */
int app_device_arg(const char *prog, const char *opt, const char *text);

/** The --device value of a mask: "cpu", "gpu" or "all". */
const char *app_device_name(int devices);

/**
 * Call on host 0 after pm_init. When `devices` is PM_DEVICE_GPU and no GPU
 * can run the app (`have_cuda` is 0: the app was built without its CUDA
 * callback; or a single host has no GPU stub), prints one line and exits 1.
 * With several hosts pm_task_submit decides, since only it knows every
 * host's devices.
 */
void app_require_devices(const char *prog, int devices, int have_cuda);

/**
 * Items per subtask so that every GPU (of `devices`, a mask of
 * pm_device_kind) of every host gets about sixteen subtasks (so that copies
 * overlap kernels, in blocks large enough to fill it) or, with no GPU in
 * use, every CPU stub about four (room for the scheduler to balance);
 * rounded up to a multiple of `granule` and at least `granule`. Beside
 * GPUs, CPU cores then take subtasks only where they pay.
 * Call after pm_init.
 */
uint64_t app_default_per_subtask_on(uint64_t items, uint64_t granule,
                                    int devices);

/** Adds the counters of finished `task` to *total, which starts zeroed. */
void app_add_stats(pm_task_stats_t *total, pm_task_t task);

/**
 * Prints "subtasks: cpu=.. gpu=.. remote=..  stubs=.. steals=.." and, with
 * more than one host, app_print_moved's line.
 */
void app_print_stats(const pm_task_stats_t *st);

#endif /* APPDEVICE_H */
