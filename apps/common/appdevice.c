/* Device helpers shared by the sample apps; see appdevice.h. */
#include "appdevice.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appcommon.h"

int app_device_arg(const char *prog, const char *opt, const char *text)
{
    if (text == NULL)
        app_usage_error(prog, "%s needs a value: cpu, gpu or all", opt);
    if (strcmp(text, "cpu") == 0)
        return PM_DEVICE_CPU;
    if (strcmp(text, "gpu") == 0)
        return PM_DEVICE_GPU;
    if (strcmp(text, "all") == 0)
        return PM_DEVICE_ANY;
    app_usage_error(prog, "%s '%s': use cpu, gpu or all", opt, text);
}

const char *app_device_name(int devices)
{
    switch (devices) {
    case PM_DEVICE_CPU: return "cpu";
    case PM_DEVICE_GPU: return "gpu";
    default: return "all";
    }
}

void app_require_devices(const char *prog, int devices, int have_cuda)
{
    int ngpu;

    if (devices != PM_DEVICE_GPU)
        return;
    if (!have_cuda) {
        fprintf(stderr, "%s: --device gpu: this build has no CUDA support; "
                "use --device cpu\n", prog);
        exit(1);
    }
    APP_CHECK(pm_device_count(PM_DEVICE_GPU, &ngpu));
    if (ngpu == 0 && pm_host_count() == 1) {
        fprintf(stderr, "%s: --device gpu: pmlib found no GPU on this host; "
                "use --device cpu or all\n", prog);
        exit(1);
    }
}

uint64_t app_default_per_subtask_on(uint64_t items, uint64_t granule,
                                    int devices)
{
    int cpus = 0, gpus = 0;
    uint64_t want, per;

    if (devices & PM_DEVICE_CPU)
        APP_CHECK(pm_device_count(PM_DEVICE_CPU, &cpus));
    if (devices & PM_DEVICE_GPU)
        APP_CHECK(pm_device_count(PM_DEVICE_GPU, &gpus));
    /* A GPU takes sixteen, so that one's copies overlap the kernels of
     * others; cut finer for the cores beside it, its blocks would run
     * less efficiently (nbody, matmul and fft2d lost 1.5 to 2x that way)
     * while the cores, often 100x slower, rarely pay. Without GPUs, four
     * per core leave the scheduler room to balance. Hosts are assumed
     * alike: only host 0's stubs are known here. */
    want = gpus > 0 ? 16 * (uint64_t)gpus : 4 * (uint64_t)cpus;
    want = (want > 0 ? want : 4) * (uint64_t)pm_host_count();
    per = (items + want - 1) / want;
    per = (per + granule - 1) / granule * granule;
    return per > 0 ? per : granule;
}

void app_add_stats(pm_task_stats_t *total, pm_task_t task)
{
    pm_task_stats_t st;

    APP_CHECK(pm_task_stats(task, &st));
    total->seconds += st.seconds;
    total->run_seconds += st.run_seconds;
    total->subtasks += st.subtasks;
    total->subtasks_cpu += st.subtasks_cpu;
    total->subtasks_gpu += st.subtasks_gpu;
    total->subtasks_remote += st.subtasks_remote;
    total->steals += st.steals;
    total->steals_remote += st.steals_remote;
    total->multi_assigned += st.multi_assigned;
    total->bytes_moved += st.bytes_moved;
    total->bytes_sent += st.bytes_sent;
    total->bytes_to_gpu += st.bytes_to_gpu;
    total->bytes_from_gpu += st.bytes_from_gpu;
    total->gpu_cache_hits += st.gpu_cache_hits;
    total->bytes_gpu_peer += st.bytes_gpu_peer;
    if (st.stubs > total->stubs) /* the most any one task used */
        total->stubs = st.stubs;
}

void app_print_stats(const pm_task_stats_t *st)
{
    printf("        subtasks: cpu=%" PRIu64 " gpu=%" PRIu64 " remote=%" PRIu64
           "  stubs=%d steals=%" PRIu64 "  to_gpu=%.1f MB gpu_peer=%.1f MB gpu_cache_hits=%"
           PRIu64 "\n", st->subtasks_cpu, st->subtasks_gpu,
           st->subtasks_remote, st->stubs, st->steals,
           (double)st->bytes_to_gpu / 1e6, (double)st->bytes_gpu_peer / 1e6, st->gpu_cache_hits);
    app_print_moved(st);
}
